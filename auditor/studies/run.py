"""What every study run shares: its folder and record, stage timing, how it ends, and the
image stages (generate, then VQA and embeddings) run by the configured executor.

A study (the prompt audit, a T2IAT test, the occupation study) is a list of named steps.
:meth:`StudyRun.execute` runs them, rewriting the record atomically after each, so Ctrl-C
or a crash leaves a valid record whose status (``interrupted``/``failed``) and error say
where it stopped; the content cache makes the next run skip what was finished.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from auditor.core.cache import ContentCache
from auditor.core.environment import collect_environment
from auditor.core.errors import AuditorError
from auditor.core.fingerprint import CHUNK, file_sha256
from auditor.core.redaction import redact
from auditor.core.registry import parse_spec
from auditor.core.store import RECORD_FILE, write_model
from auditor.core.weights import LoadOptions
from auditor.executors.generation import PromptRequest
from auditor.records import (
    ModelRef,
    RunError,
    RunStatus,
    Stage,
    StageTiming,
    StudyRecord,
    utc_now,
)
from auditor.studies.progress import ProgressReporter, StageCounts

if TYPE_CHECKING:  # pragma: no cover
    from auditor.executors.perception import EmbedReader, ImageReader
    from auditor.perception.base import Embedder

#: Images embedded per forward pass (does not change the embeddings).
EMBED_BATCH_SIZE = 32
#: Weight files at least this large show a progress bar while their digest is computed.
LARGE_WEIGHT_FILE = 256 * CHUNK


def spec_ref(spec: str) -> ModelRef:
    """A model reference known before loading; replaced by the backend's full ref once loaded."""
    parsed = parse_spec(spec)
    return ModelRef(spec=spec, backend=parsed.prefix, model_id=parsed.target or None)


def check_images_and_seeds(images: int, seeds: list[int] | None) -> None:
    """Reject ``--images`` below 1 and a ``--seed`` list of another length, before any folder or model."""
    if images < 1:
        raise AuditorError(f"--images must be at least 1 (got {images})")
    if seeds is not None and len(seeds) != images:
        raise AuditorError(f"--seed lists {len(seeds)} seeds for {images} images per prompt")


def paired_seeds(images: int, seeds: list[int] | None) -> list[int]:
    """The seed of image i of every prompt set: the given list, else 0..images-1."""
    return seeds if seeds is not None else list(range(images))


RecordT = TypeVar("RecordT", bound=StudyRecord)


class StudyRun(Generic[RecordT]):
    """One run folder and its record (any :class:`~auditor.records.StudyRecord`), saved after every step.

    The envelope every study record shares is all this class touches: status, errors,
    timings, environment and prompt sets, and the config's model, seeds, generation
    settings and embedder. A study subclasses it (or uses it as it is) with its own
    record type and passes its steps to :meth:`execute`.
    """

    def __init__(
        self, run_dir: Path, record: RecordT, cache: ContentCache, progress: ProgressReporter, device: str | None = None
    ):
        self.run_dir = run_dir
        self.record = record
        self.cache = cache
        self.progress = progress
        self.device = device
        #: Stages run in several threads under the overlapped executor: saves and timings take turns.
        self._lock = threading.RLock()
        self._failed_stage: Stage | None = None

    def save(self) -> None:
        with self._lock:
            self.record.updated_at = utc_now()
            write_model(self.run_dir / RECORD_FILE, self.record)

    def mark_failed(self, stage: Stage | None) -> None:
        """Name the stage where the run is failing (the first one named wins); the record's error says it."""
        with self._lock:
            if self._failed_stage is None:
                self._failed_stage = stage

    def load_options(self) -> LoadOptions:
        """How this run's stages load models: its device, whether partial checkpoints are allowed,
        and weight digests memoised in the content cache."""
        return LoadOptions(
            device=self.device,
            allow_partial_weights=self.record.config.allow_partial_weights,
            digest=lambda path: self.cache.file_digest(path, self._hash_weights),
        )

    def _hash_weights(self, path: Path) -> str:
        """A weight file's sha256, with a progress bar (in MiB) when the file is large."""
        size = path.stat().st_size
        if size < LARGE_WEIGHT_FILE:
            return file_sha256(path)
        stage = "hash weights"
        self.progress.start(stage, -(-size // CHUNK), f"hashing {path.name} (MiB, once)")
        try:
            return file_sha256(path, lambda _bytes: self.progress.advance(stage))
        finally:
            self.progress.finish(stage)

    @contextmanager
    def stage(self, name: Stage, outcome: StageCounts | None = None) -> Iterator[StageCounts]:
        """Time a stage and record its computed/cached counts (replacing an earlier attempt's).

        An exception leaving the stage marks it as the one that failed, unless another
        stage (in another thread) failed first.
        """
        outcome = outcome if outcome is not None else StageCounts()
        started = time.perf_counter()
        try:
            yield outcome
        except BaseException:
            self.mark_failed(name)
            raise
        finally:
            timing = StageTiming(
                stage=name, seconds=time.perf_counter() - started, computed=outcome.computed, cached=outcome.cached
            )
            with self._lock:
                self.record.timings = [t for t in self.record.timings if t.stage != name] + [timing]

    def execute(self, steps: Sequence[tuple[Stage, Callable[[], None]]]) -> None:
        """Run the steps in order; the record ends ``completed``, ``failed`` or ``interrupted``."""
        self.record.status = "running"
        self.record.errors = []
        self.record.environment = collect_environment()
        self._failed_stage = None
        self.save()
        current: Stage | None = None
        try:
            for current, step in steps:
                step()
                self.save()
        except KeyboardInterrupt:
            stage = self._failed_stage or current
            self._end("interrupted", RunError(stage=stage, type="KeyboardInterrupt", message="interrupted by the user"))
            raise
        except Exception as exc:
            stage = self._failed_stage or current
            self._end("failed", RunError(stage=stage, type=type(exc).__name__, message=redact(str(exc))))
            raise
        self.record.environment = collect_environment()  # now with the GPU the models ran on
        self._end("completed")

    def _end(self, status: RunStatus, error: RunError | None = None) -> None:
        self.record.status = status
        if error is not None:
            self.record.errors.append(error)
        self.save()
        self.after_end()

    def after_end(self) -> None:
        """Called once the run has ended, however it ended (e.g. to write a report)."""

    # ------------------------------------------------------------------ shared stages

    def run_images(self, requests: Sequence[PromptRequest], readers: Sequence[ImageReader] = ()) -> None:
        """Fill ``record.prompt_sets`` with the configured text-to-image model, then let every reader
        (VQA, embeddings) read every image, through the cache, with the configured executor."""
        from auditor.executors import make_executor
        from auditor.executors.generation import GenerationStage

        make_executor(self.record.config.executor).run(self, GenerationStage(self, requests), readers)

    def embed_reader(self, *, required: bool = True, also: Callable[[Embedder], None] | None = None) -> EmbedReader:
        """The embed stage for :meth:`run_images`: unit-length image embeddings (cached by image sha256).

        With ``required=False`` an embedder that cannot be loaded is skipped with a notice
        (and dropped from the config) instead of failing the run. ``also`` is called with
        the loaded embedder before it is released (e.g. to embed prompt texts too).
        Its ``vectors()`` are prompt id -> embeddings of the usable images once the stage ran.
        """
        from auditor.executors.perception import EmbedReader

        return EmbedReader(self, EMBED_BATCH_SIZE, required=required, also=also)
