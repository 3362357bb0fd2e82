"""What every study run shares: its folder and record, stage timing, how it ends, and the
generate, perceive and embed stages with the models they load.

A study (the prompt audit, a T2IAT test, the occupation study) is a list of named steps.
:meth:`StudyRun.execute` runs them, rewriting the record atomically after each, so Ctrl-C
or a crash leaves a valid record whose status (``interrupted``/``failed``) and error say
where it stopped; the content cache makes the next run skip what was finished. A study of
many prompts (a batch, an exploration) keeps its models in one :class:`ModelPool`, so each
loads once however many prompts or rounds use it.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from auditor.core.cache import ContentCache
from auditor.core.environment import collect_environment
from auditor.core.errors import AuditorError
from auditor.core.fingerprint import CHUNK, file_sha256
from auditor.core.redaction import redact
from auditor.core.registry import parse_spec
from auditor.core.store import RECORD_FILE, write_model
from auditor.core.weights import LoadOptions
from auditor.records import (
    ImageAnswers,
    ModelRef,
    PromptSet,
    RunError,
    RunStatus,
    Stage,
    StageTiming,
    StudyRecord,
    utc_now,
)
from auditor.studies.generation_stage import PromptRequest, generate_images, merge_sets
from auditor.studies.perception_stage import answer_questions, embed_images, merge_answers
from auditor.studies.progress import ProgressReporter, StageCounts

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

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


def release_accelerator_memory() -> None:
    """Free a finished stage's model before the next one loads (a GPU rarely holds two big models)."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


RecordT = TypeVar("RecordT", bound=StudyRecord)
ModelT = TypeVar("ModelT")
#: Prompt sets and the questions (axis -> question) every image of them is asked.
QuestionGroup = tuple[Sequence[PromptSet], dict[str, str]]


class ModelPool:
    """The models a study has loaded, one per kind (``t2i``, ``vqa``, ``embedder``) and spec.

    With ``keep=False`` (one prompt audit) a model is released as soon as the stage that
    loaded it ends, so a GPU holds one big model at a time. With ``keep=True`` it stays
    loaded until :meth:`release`: a batch's stage runs over every prompt on one load, and
    an exploration's rounds generate and ask questions without loading anything twice.
    """

    def __init__(self, keep: bool = False):
        self.keep = keep
        self._loaded: dict[tuple[str, str], Any] = {}

    def get(self, kind: str, spec: str, load: Callable[[], ModelT]) -> ModelT:
        """The loaded model of this kind and spec, loading it with ``load`` the first time."""
        key = (kind, spec)
        if key not in self._loaded:
            self._loaded[key] = load()
        return self._loaded[key]

    def done(self, kind: str) -> None:
        """A stage has finished with its model: released now unless the pool keeps models."""
        if not self.keep:
            self.release(kind)

    def release(self, kind: str | None = None) -> None:
        """Drop the models of one kind (or all) and free accelerator memory."""
        for key in [key for key in self._loaded if kind is None or key[0] == kind]:
            del self._loaded[key]
        release_accelerator_memory()


class StudyRun(Generic[RecordT]):
    """One run folder and its record (any :class:`~auditor.records.StudyRecord`), saved after every step.

    The envelope every study record shares is all this class touches: status, errors,
    timings, environment and prompt sets, and the config's model, seeds, generation
    settings and embedder. A study subclasses it (or uses it as it is) with its own
    record type and passes its steps to :meth:`execute`.
    """

    def __init__(
        self,
        run_dir: Path,
        record: RecordT,
        cache: ContentCache,
        progress: ProgressReporter,
        device: str | None = None,
        models: ModelPool | None = None,
    ):
        self.run_dir = run_dir
        self.record = record
        self.cache = cache
        self.progress = progress
        self.device = device
        self.models = models if models is not None else ModelPool()
        #: Stages timed in this attempt: a stage run again in the same attempt adds to its timing.
        self._timed: set[Stage] = set()
        #: Least seconds between two partial saves during a stage (see :meth:`checkpoint`).
        self.checkpoint_seconds = 0.0
        self._saved_at = float("-inf")

    def save(self) -> None:
        self.record.updated_at = utc_now()
        write_model(self.run_dir / RECORD_FILE, self.record)
        self._saved_at = time.monotonic()

    def checkpoint(self) -> None:
        """Save a partial record during a stage, at most every ``checkpoint_seconds``.

        Skipping a save loses nothing: finished work is in the content cache, so a resume
        gets it back. A study with a large record (an exploration) rewrites it less often.
        """
        if time.monotonic() - self._saved_at >= self.checkpoint_seconds:
            self.save()

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
    def stage(self, name: Stage) -> Iterator[StageCounts]:
        """Time a stage and record its computed/cached counts.

        The first time in an attempt it replaces an earlier attempt's timing; run again in the
        same attempt (an exploration's rounds) it adds to it.
        """
        outcome = StageCounts()
        started = time.perf_counter()
        try:
            yield outcome
        finally:
            timing = StageTiming(
                stage=name, seconds=time.perf_counter() - started, computed=outcome.computed, cached=outcome.cached
            )
            earlier = next((t for t in self.record.timings if t.stage == name), None)
            if earlier is not None and name in self._timed:
                timing = StageTiming(
                    stage=name,
                    seconds=earlier.seconds + timing.seconds,
                    computed=earlier.computed + timing.computed,
                    cached=earlier.cached + timing.cached,
                )
            self._timed.add(name)
            self.record.timings = [t for t in self.record.timings if t.stage != name] + [timing]

    def execute(self, steps: Sequence[tuple[Stage, Callable[[], None]]]) -> None:
        """Run the steps in order; the record ends ``completed``, ``failed`` or ``interrupted``."""
        self.begin()
        for name, step in steps:
            self.run_step(name, step)
        self.finish()

    def begin(self) -> None:
        """Start an attempt: the record says ``running`` and forgets the errors of an earlier one."""
        self.record.status = "running"
        self.record.errors = []
        self.record.environment = collect_environment()
        self._timed = set()
        self.save()

    def run_step(self, name: Stage, step: Callable[[], None]) -> None:
        """Run one step; Ctrl-C or an error ends the run (``interrupted``/``failed``, the stage named) and propagates."""
        try:
            step()
        except KeyboardInterrupt:
            self.interrupt(name)
            raise
        except Exception as exc:
            self.fail(name, exc)
            raise
        self.save()

    def interrupt(self, stage: Stage | None) -> None:
        """End the run as ``interrupted`` at ``stage`` (Ctrl-C)."""
        self._end("interrupted", RunError(stage=stage, type="KeyboardInterrupt", message="interrupted by the user"))

    def fail(self, stage: Stage | None, exc: BaseException) -> None:
        """End the run as ``failed`` at ``stage`` with ``exc`` as its error (API keys redacted)."""
        self._end("failed", RunError(stage=stage, type=type(exc).__name__, message=redact(str(exc))))

    def finish(self) -> None:
        """End the attempt as ``completed``."""
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

    def generate(self, requests: Sequence[PromptRequest]) -> StageCounts:
        """Fill the requested prompt sets in ``record.prompt_sets`` with the configured text-to-image model,
        through the cache; sets and images already there and not requested stay. Returns the counts."""
        config = self.record.config
        before = list(self.record.prompt_sets)
        with self.stage("generate") as outcome:
            try:
                backend = self.text_to_image()
                config.t2i = backend.ref.model_copy(update={"spec": config.t2i.spec})
                # Record what actually ran: the model's defaults filled in (batch size is ours, not the model's).
                config.generation = backend.settings.model_copy(update={"batch_size": config.generation.batch_size})

                def checkpoint(sets: list[PromptSet]) -> None:
                    self.record.prompt_sets = merge_sets(before, sets)
                    self.checkpoint()

                sets, counts = generate_images(
                    backend, requests, config.seeds, self.cache, self.run_dir,
                    config.generation.batch_size, self.progress, checkpoint,
                )  # fmt: skip
                outcome.computed, outcome.cached = counts.computed, counts.cached
                self.record.prompt_sets = merge_sets(before, sets)
            finally:
                self.models.done("t2i")
        return counts

    def text_to_image(self) -> Any:
        """The configured text-to-image backend, from the pool (loaded the first time)."""
        from auditor.generation.registry import T2I_BACKENDS

        config = self.record.config
        return self.models.get(
            "t2i",
            config.t2i.spec,
            lambda: T2I_BACKENDS.load(config.t2i.spec, settings=config.generation, options=self.load_options()),
        )

    def answer(
        self,
        groups: Sequence[QuestionGroup],
        caption_question: str | None,
        images_per_call: int,
        checkpoint: Callable[[dict[str, list[ImageAnswers]]], None] | None = None,
    ) -> dict[str, list[ImageAnswers]]:
        """Ask every image of each group's prompt sets that group's questions and the caption, through
        the cache, with the configured VQA model (``config.vqa``, loaded once for all groups).

        Returns prompt id -> answers per image, with the answers of an image that is in several
        groups merged. ``checkpoint`` hears the answers so far after every call to the model.
        """
        from auditor.perception.registry import VQA_BACKENDS

        config = self.record.config
        found: dict[str, list[ImageAnswers]] = {}
        with self.stage("perceive") as outcome:
            try:
                vqa = self.models.get(
                    "vqa",
                    config.vqa.spec,
                    lambda: VQA_BACKENDS.load(config.vqa.spec, settings=config.perception, options=self.load_options()),
                )
                config.vqa = vqa.ref.model_copy(update={"spec": config.vqa.spec})
                config.perception = vqa.settings  # what it answers with, its defaults filled in
                for sets, questions in groups:
                    done = dict(found)

                    def partial(answers: dict[str, list[ImageAnswers]], done=done) -> None:
                        if checkpoint is not None:
                            checkpoint(merge_answers(done, answers))

                    answers, counts = answer_questions(
                        vqa, sets, questions, caption_question, self.cache, self.run_dir, images_per_call,
                        self.progress, partial,
                    )  # fmt: skip
                    found = merge_answers(found, answers)
                    outcome.computed += counts.computed
                    outcome.cached += counts.cached
            finally:
                self.models.done("vqa")
        return found

    def embed(
        self, *, required: bool = True, also: Callable[[Embedder], None] | None = None
    ) -> dict[str, np.ndarray] | None:
        """Prompt id -> unit-length embeddings of its usable images (cached by image sha256).

        With ``required=False`` an embedder that cannot be loaded is skipped with a notice
        (and dropped from the config) instead of failing the run. ``also`` is called with
        the loaded embedder before it is released (e.g. to embed prompt texts too).
        """
        from auditor.perception.registry import EMBEDDERS

        config = self.record.config
        with self.stage("embed") as outcome:
            try:
                try:
                    embedder = self.models.get(
                        "embedder",
                        config.embedder.spec,
                        lambda: EMBEDDERS.load(config.embedder.spec, options=self.load_options()),
                    )
                except AuditorError as exc:
                    if required:
                        raise
                    self.progress.notice(f"embedding scores skipped: {exc} (pass --embedder none to silence this)")
                    config.embedder = None
                    return None
                config.embedder = embedder.ref.model_copy(update={"spec": config.embedder.spec})
                vectors, counts = embed_images(
                    embedder, self.record.prompt_sets, self.cache, self.run_dir, EMBED_BATCH_SIZE, self.progress
                )
                outcome.computed, outcome.cached = counts.computed, counts.cached
                if also is not None:
                    also(embedder)
            finally:
                self.models.done("embedder")
        return vectors
