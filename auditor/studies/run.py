"""What every study run shares: its folder and record, stage timing, how it ends, and the
image stages (generate, then VQA and embeddings) run by the configured executor on the
models of the run's :class:`ModelPool`.

A study (the prompt audit, a T2IAT test, the occupation study) is a list of named steps.
:meth:`StudyRun.execute` runs them, rewriting the record atomically after each, so Ctrl-C
or a crash leaves a valid record whose status (``interrupted``/``failed``) and error say
where it stopped; the content cache makes the next run skip what was finished. A study of
many prompts (a batch, an exploration) keeps its models in one :class:`ModelPool`, so each
loads once however many prompts or rounds use it.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from auditor.core.cache import ContentCache
from auditor.core.devices import collecting_only_new_objects, release_accelerator_memory
from auditor.core.environment import collect_environment
from auditor.core.errors import AuditorError, ReviewCancelled, interruption
from auditor.core.fingerprint import CHUNK, file_sha256
from auditor.core.redaction import redact
from auditor.core.registry import Registry, parse_spec, with_absolute_path
from auditor.core.runlock import RunLock
from auditor.core.snapshot import FolderSnapshot
from auditor.core.store import RECORD_FILE, RunStore, remove_partial_writes, write_model
from auditor.core.weights import LoadOptions
from auditor.executors import check_executor, check_reachable
from auditor.executors.generation import PromptRequest
from auditor.records import (
    Environment,
    ModelRef,
    RunError,
    RunStatus,
    Stage,
    StageTiming,
    StudyRecord,
    load_record,
    utc_now,
)
from auditor.reporting.wording import counted
from auditor.studies.progress import ProgressReporter, StageCounts

if TYPE_CHECKING:  # pragma: no cover
    from auditor.executors.perception import EmbedReader, ImageReader
    from auditor.generation.base import TextToImage
    from auditor.perception.base import Embedder

#: Images embedded per forward pass (does not change the embeddings).
EMBED_BATCH_SIZE = 32
#: Weight files at least this large show a progress bar while their digest is computed.
LARGE_WEIGHT_FILE = 256 * CHUNK


def spec_ref(spec: str) -> ModelRef:
    """A model reference known before loading; replaced by the backend's full ref once loaded. A local path is
    recorded absolute: a resume from another folder loads the same weights."""
    spec = with_absolute_path(spec)
    parsed = parse_spec(spec)
    return ModelRef(spec=spec, backend=parsed.prefix, model_id=parsed.target or None)


def named_model_is_required(spec: str | None, default: str) -> bool:
    """Whether a study fails when an optional model (an embedder) cannot be loaded: the default is skipped with a
    note when absent, a model the user named is not, on the first attempt and on every resume. ``None``: none
    asked for."""
    return spec is not None and spec.strip().lower() != default.lower()


def check_images_and_seeds(
    images: int, seeds: list[int] | None, option: str = "--images", noun: str = "image", per: str = "per prompt"
) -> None:
    """Reject ``images`` (given as ``option``) below 1 and a ``--seed`` list of another length or with a repeat,
    before any folder or model."""
    if images < 1:
        raise AuditorError(f"{option} must be at least 1 (got {images})")
    if seeds is not None and len(seeds) != images:
        raise AuditorError(f"--seed lists {counted(len(seeds), 'seed')} for {counted(images, noun)} {per}")
    check_distinct_seeds(seeds or [])


def check_distinct_seeds(seeds: Sequence[int]) -> None:
    """Refuse a seed given twice: it makes the same image twice, which every interval and test would count as
    two independent draws (narrower than the images support)."""
    repeated = sorted(seed for seed, times in Counter(seeds).items() if times > 1)
    if repeated:
        raise AuditorError(
            f"--seed repeats {', '.join(map(str, repeated))}: a seed makes the same image each time, so each image "
            "needs its own"
        )


def paired_seeds(images: int, seeds: list[int] | None) -> list[int]:
    """The seed of image i of every prompt set: the given list, else 0..images-1."""
    return seeds if seeds is not None else list(range(images))


#: Least seconds between two partial saves of a record during a stage: a paper-size prompt audit's record grows to
#: about 2 MB, and a save after each of its ~470 batches and chunks rewrote 135 MB (1.6-8 s of the writer thread).
CHECKPOINT_SECONDS = 1.0

RecordT = TypeVar("RecordT", bound=StudyRecord)
ModelT = TypeVar("ModelT")


def reopen_run(run: str, store: RunStore, record_type: type[RecordT]) -> tuple[Path, RecordT]:
    """For ``--resume``: the run's folder and record (a one-line error when it is another kind of run)."""
    run_dir = store.resolve(run)
    record = load_record(run_dir / RECORD_FILE, record_type)
    for name in ("t2i", "vqa"):  # a record written before results_from was kept: its config's models made them
        ref = getattr(record.config, name, None)
        known = ref is not None and ref.fingerprint is not None  # None: pointed elsewhere by a resume, never loaded
        if name not in record.results_from and known and record_holds_results(record, name):
            record.results_from[name] = ref
    return run_dir, record


def results_word(field: str) -> str:
    """What the ``field`` model (``t2i``, ``vqa``) made, for messages."""
    return "images" if field == "t2i" else "answers"


def record_holds_results(record: StudyRecord, field: str) -> bool:
    """Whether ``record`` holds what its ``field`` model made: images (``t2i``) or answers (``vqa``)."""
    return bool(record.prompt_sets if field == "t2i" else getattr(record, "answers", None))


def describe_change(before: ModelRef, ref: ModelRef) -> str:
    """The model before and the fingerprints, short, for a message about other weights."""
    return f"{before.spec}, fingerprint {(before.fingerprint or 'none')[:12]}; now {(ref.fingerprint or 'none')[:12]}"


def moved_service(before: ModelRef, ref: ModelRef) -> str | None:
    """For a hosted model now reached at another service than the one behind earlier results (the fingerprint
    names the service), what to say instead of "other weights": the option was not changed, the server was."""
    if before.service is None or ref.service is None or before.service == ref.service:
        return None
    if (before.backend, before.model_id) != (ref.backend, ref.model_id):  # another model too: going back is no fix
        return None
    return (
        f"{ref.spec} is served by {ref.service} now, not by {before.service} as before "
        f"(set OPENAI_BASE_URL back to {before.service} to use what it made)"
    )


def shown_sha256(path: Path, progress: ProgressReporter) -> str:
    """A file's sha256 (weights, a caption file), with a progress bar (in MiB) when the file is large."""
    size = path.stat().st_size
    if size < LARGE_WEIGHT_FILE:
        return file_sha256(path)
    stage = "hash file"
    progress.start(stage, -(-size // CHUNK), f"hashing {path.name} (MiB, once)")
    try:
        return file_sha256(path, lambda _bytes: progress.advance(stage))
    finally:
        progress.finish(stage)


@dataclass(frozen=True)
class Resumption:
    """What ``--resume`` may change about a run: where its models are, and where and how its stages run.

    The device, executor and VQA concurrency change where and how fast the same work runs, not
    its results. A model given again is recorded with its own fingerprint, and the cache keys on
    it, so other weights never reuse the first attempt's results (``--allow-partial-weights``
    and an embedder turned off are recorded too). Every other setting is the run's own.
    """

    device: str | None = None
    #: Config field (``t2i``, ``vqa``, ``embedder``, ``text_embedder``) -> where that model is now.
    models: Mapping[str, str] = field(default_factory=dict)
    vqa_concurrency: int | None = None
    allow_partial_weights: bool = False
    executor: str | None = None
    #: ``--ray-address`` (it needs the run to be on Ray, by its own config or ``executor``).
    ray_address: str | None = None

    def without_model(self, name: str) -> Resumption:
        """The same, with no new place for the model ``name`` (a study that handles it itself)."""
        return replace(self, models={key: spec for key, spec in self.models.items() if key != name})

    def apply(
        self, config: Any, registries: Mapping[str, Registry], executors: Callable[[str], str] = check_executor
    ) -> None:
        """Point the run's config at these models and settings, each checked (``executors`` checks the
        executor's name for this study); nothing is loaded."""
        if self.allow_partial_weights:
            config.allow_partial_weights = True
        if self.executor is not None:
            config.executor = executors(self.executor)
        if self.ray_address is not None:
            if config.executor != "ray":
                raise AuditorError(f"--ray-address is for runs on Ray; this run's executor is {config.executor}")
            if self.executor is None and self.ray_address != "auto":  # not reached before the run's executor was known
                check_reachable(self.ray_address)
        if self.vqa_concurrency is not None:
            config.perception.concurrency = self.vqa_concurrency
        for name, spec in self.models.items():
            if name == "t2i":  # the run's own generation settings must suit the model it now names
                from auditor.generation.registry import preflight_t2i

                preflight_t2i(spec, config.generation)
            else:
                registries[name].preflight(spec)
            setattr(config, name, spec_ref(spec))


class ModelPool:
    """The models a study has loaded, one per kind (``t2i``, ``vqa``, ``embedder``) and spec.

    With ``keep=False`` (one prompt audit) a model is released as soon as the stage that
    loaded it ends, so under the sequential executor a GPU holds one big model at a time.
    With ``keep=True`` every model stays loaded until :meth:`release`: a batch's prompts and
    an exploration's rounds load nothing twice, at the memory cost of all of them at once
    (as under the overlapped executor). Stages in several threads share it: it locks.
    """

    def __init__(self, keep: bool = False):
        self.keep = keep
        self._loaded: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def get(self, kind: str, spec: str, load: Callable[[], ModelT]) -> ModelT:
        """The loaded model of this kind and spec, loading it with ``load`` the first time."""
        key = (kind, spec)
        with self._lock:
            if key not in self._loaded:
                self._loaded[key] = load()
            return self._loaded[key]

    def done(self, kind: str) -> None:
        """A stage has finished with its model: released now unless the pool keeps models."""
        if not self.keep:
            self.release(kind)

    def release(self, kind: str | None = None) -> None:
        """Drop the models of one kind (or all) and free accelerator memory."""
        with self._lock:
            for key in [key for key in self._loaded if kind is None or key[0] == kind]:
                del self._loaded[key]
        release_accelerator_memory()


@contextmanager
def interruptions_held() -> Iterator[None]:
    """While an ending run writes its record and page, Ctrl-C is ignored and SIGTERM waits until they are written.

    A second Ctrl-C after the first (the run is stopping already) or a scheduler's SIGTERM would otherwise leave the
    run without the page the person reads next, or a record saying ``completed`` without it. A SIGTERM that came
    meanwhile is delivered again, to the handler there was before, once the writes are done. Holds nest (a batch
    ends its audits inside its own). Only the main thread can set signal handlers; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    terminated = threading.Event()
    changed: list[tuple[int, Any]] = []
    try:  # a signal handled as a handler is swapped raises there: what was changed by then is put back all the same
        changed.append((signal.SIGINT, signal.signal(signal.SIGINT, signal.SIG_IGN)))
        changed.append((signal.SIGTERM, signal.signal(signal.SIGTERM, lambda _signum, _frame: terminated.set())))
        yield
    finally:
        _put_back(changed)
    if terminated.is_set():
        signal.raise_signal(signal.SIGTERM)


def _put_back(changed: list[tuple[int, Any]]) -> None:
    """Put back the signal handlers ``changed`` replaced, the last first. ``signal.signal`` first runs the handler of a
    signal that came meanwhile, which may raise (a Ctrl-C put back a moment before): the handler is then set on a
    second try and the interruption raised once every handler is back. None, a handler not set from Python, is the
    default's."""
    interrupted: KeyboardInterrupt | None = None
    for number, handler in reversed(changed):
        handler = signal.SIG_DFL if handler is None else handler
        try:
            signal.signal(number, handler)
        except KeyboardInterrupt as exc:
            interrupted = interrupted or exc
            signal.signal(number, handler)
    if interrupted is not None:
        raise interrupted


class StudyRun(Generic[RecordT]):
    """One run folder and its record (any :class:`~auditor.records.StudyRecord`), saved after every step.

    The envelope every study record shares is all this class touches: status, errors,
    timings, environment and prompt sets, and the config's model, seeds, generation
    settings and embedder. A study subclasses it (or uses it as it is) with its own
    record type and passes its steps to :meth:`execute`.
    """

    #: What running a completed run again does (said when ``--resume`` names one).
    completed_again: ClassVar[str] = (
        "running it again: what the same weights made before comes from the cache, so with the same models only "
        "the scores are computed again"
    )
    #: Whether the study's numbers depend on WordNet (concepts, nouns, offline plans): its record names the
    #: version this process read. A study that reads none records none, even in a process (a notebook) where
    #: an earlier study did.
    reads_wordnet: ClassVar[bool] = True

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
        #: Stages run in several threads under the overlapped executor: saves and timings take turns.
        self._lock = threading.RLock()
        self._failed_stage: Stage | None = None
        #: Stages timed in this attempt: a stage run again in the same attempt adds to its timing.
        self._timed: set[Stage] = set()
        #: Least seconds between two partial saves during a stage (see :meth:`checkpoint`).
        self.checkpoint_seconds = CHECKPOINT_SECONDS
        self._saved_at = float("-inf")
        #: Held for an attempt (:meth:`holding_lock`): one process runs a folder at a time.
        self._lock_file = RunLock(run_dir)
        #: A completed run's folder as this attempt found it (:mod:`auditor.core.snapshot`); None for any other run.
        self._completed_folder: FolderSnapshot | None = None
        #: The attempt failed or was stopped without changing a file of a completed run, which was put back as it was.
        self.left_as_it_was = False
        #: This attempt ended completed, its record and page written: nothing is left for an interruption to stop.
        self.completed_now = False
        #: Notices given once per attempt (:meth:`notice_once`).
        self._said: set[str] = set()

    def notice_once(self, message: str) -> None:
        """Tell the person ``message`` once, however many stages or rounds (an exploration's) meet its cause."""
        with self._lock:
            if message in self._said:
                return
            self._said.add(message)
        self.progress.notice(message)

    def save(self) -> None:
        with self._lock:
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

    def mark_failed(self, stage: Stage | None) -> None:
        """Name the stage where the run is failing (the first one named wins); the record's error says it."""
        with self._lock:
            if self._failed_stage is None:
                self._failed_stage = stage

    def adopt_model(self, field: str, ref: ModelRef) -> None:
        """Record ``ref`` as the run's ``field`` model (``t2i``, ``vqa``), loaded or recalled
        (:mod:`~auditor.executors.recall`), with the spec as the run names it: from now on the record's images or
        answers are made with it (``results_from``). Weights other than those behind what an earlier attempt left
        go to :meth:`other_weights` first."""
        with self._lock:
            recorded = ref.model_copy(update={"spec": getattr(self.record.config, field).spec})
            before = self.record.results_from.get(field)
            if before is not None and before.fingerprint != recorded.fingerprint and self.holds_results(field):
                self.other_weights(field, recorded, before)
            setattr(self.record.config, field, recorded)
            self.record.results_from[field] = recorded

    def holds_results(self, field: str) -> bool:
        """Whether the record holds what the ``field`` model made."""
        return record_holds_results(self.record, field)

    def other_weights(self, field: str, ref: ModelRef, before: ModelRef) -> None:
        """``ref`` is not the model an earlier attempt's results came from (``before``). By default the user is told
        and the work is done again: a stage reads every image again through the cache, which keys on the model, so
        nothing of the other weights is reused. A study that adds to earlier results refuses here."""
        moved = moved_service(before, ref)
        if moved is not None:
            self.progress.notice(f"{moved}: the {results_word(field)} are made again there")
            return
        self.progress.notice(
            f"--{field} {ref.spec} loads other weights than the ones this run's {results_word(field)} came from "
            f"({describe_change(before, ref)}): the {results_word(field)} are made again with it"
        )

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
        return shown_sha256(path, self.progress)

    @contextmanager
    def stage(self, name: Stage, outcome: StageCounts | None = None) -> Iterator[StageCounts]:
        """Time a stage and record its computed/cached counts.

        The first time in an attempt it replaces an earlier attempt's timing; run again in the
        same attempt (an exploration's rounds) it adds to it. An exception leaving the stage
        marks it as the one that failed, unless another stage (in another thread) failed first.
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

    def forget_timing(self, name: Stage) -> None:
        """Drop an earlier attempt's timing of a stage this attempt does not run (its model was turned off), so the
        record does not show time spent on results it no longer has."""
        with self._lock:
            self.record.timings = [t for t in self.record.timings if t.stage != name]

    def run(self) -> RecordT:
        """Run (or resume) the study's steps with :meth:`execute`; the record's status says how it ended."""
        raise NotImplementedError(f"{type(self).__name__} names no steps")

    def execute(self, steps: Sequence[tuple[Stage, Callable[[], None]]]) -> None:
        """Run the steps in order; the record ends ``completed``, ``failed`` or ``interrupted``."""
        with self.holding_lock():
            self.say_if_complete()
            self.begin()
            for name, step in steps:
                self.run_step(name, step)
            self.finish()

    @contextmanager
    def holding_lock(self) -> Iterator[None]:
        """Hold the run folder's lock for one whole attempt, its last writes included, however it ends; refused
        (nothing written) while another process runs the folder. A study whose ``run`` does not use
        :meth:`execute` takes it around its own attempt. Its models' releases collect only what the attempt made
        (:func:`~auditor.core.devices.collecting_only_new_objects`)."""
        self._lock_file.acquire()
        try:
            with collecting_only_new_objects():
                yield
        finally:
            self._lock_file.release()

    def say_if_complete(self) -> None:
        """Before :meth:`begin`: tell the user what running a completed run again does (:attr:`completed_again`).
        Not said for a batch's audits: the batch says what it does."""
        if self.record.status == "completed":
            self.progress.notice(f"run {self.run_dir.name} is already complete; {self.completed_again}")

    def begin(self) -> None:
        """Start an attempt (under :meth:`holding_lock`, or the lock of the batch it belongs to): the record says
        ``running`` and forgets the errors and scores of an earlier one, and what a killed attempt left half-written
        is removed. A completed run's folder is remembered, to be put back if the attempt changes none of its files."""
        remove_partial_writes(self.run_dir)
        self._completed_folder = FolderSnapshot(self.run_dir) if self.record.status == "completed" else None
        self.left_as_it_was = False
        self.completed_now = False
        self.clear_scores()
        self.record.status = "running"
        self.record.errors = []
        self.record.environment = self.environment()
        self._timed = set()
        self._failed_stage = None
        self.save()

    def clear_scores(self) -> None:
        """Forget the scores of an earlier attempt (none by default). A resume may point at other models, so a
        record (and its report) that ends before the score stage shows no numbers this attempt did not compute;
        the scores are recomputed from the cache in moments."""

    def run_step(self, name: Stage, step: Callable[[], None]) -> None:
        """Run one step; Ctrl-C (or a cancelled review) or an error ends the run (``interrupted``/``failed``, the stage
        named) and propagates."""
        try:
            step()
        except (KeyboardInterrupt, ReviewCancelled) as exc:
            self.interrupt(self._failed_stage or name, exc)
            raise
        except Exception as exc:
            self.fail(self._failed_stage or name, exc)
            raise
        self.save()

    def interrupt(self, stage: Stage | None, exc: KeyboardInterrupt | ReviewCancelled) -> None:
        """End the run as ``interrupted`` at ``stage`` (Ctrl-C, SIGTERM: :class:`~auditor.core.errors.Terminated`,
        or a cancelled review)."""
        self.end("interrupted", RunError(stage=stage, type=type(exc).__name__, message=interruption(exc)))

    def fail(self, stage: Stage | None, exc: BaseException) -> None:
        """End the run as ``failed`` at ``stage`` with ``exc`` as its error (API keys redacted)."""
        self.end("failed", RunError(stage=stage, type=type(exc).__name__, message=redact(str(exc))))

    def finish(self) -> None:
        """End the attempt as ``completed``."""
        self.record.environment = self.environment()  # now with the GPU the models ran on
        self.end("completed")

    def environment(self) -> Environment:
        """This process's software and hardware, as the study's record should name them (:attr:`reads_wordnet`)."""
        found = collect_environment()
        return found if self.reads_wordnet else found.model_copy(update={"wordnet": None})

    def end(self, status: RunStatus, error: RunError | None = None) -> None:
        """Record how the attempt ended and write its page. Ending on an error, a record or page that cannot be
        written (the disk that filled up and failed the stage) is skipped: the caller raises the error that ended
        the run, which says more, and the cache keeps what was computed for the resume.

        The page is written before the record is saved: a kill between the two leaves a record that does not say
        how the run ended, which ``auditor runs`` offers to resume, never a completed run without its page.

        A completed run whose attempt ends early having written none of its files is put back as it was instead
        (:mod:`auditor.core.snapshot`): its results still describe its files."""
        if status != "completed" and self._completed_folder is not None and self._completed_folder.unchanged():
            self._completed_folder.restore()
            self.record = load_record(self.run_dir / RECORD_FILE, type(self.record))
            self.left_as_it_was = True
            return
        self.record.status = status
        if error is not None:
            self.record.errors.append(error)
        try:
            with interruptions_held():
                try:
                    self.after_end()
                finally:
                    self.save()
                self.completed_now = status == "completed"  # its record and page written
        except AuditorError:
            if error is None:
                raise

    def after_end(self) -> None:
        """Called once the run has ended, however it ended (e.g. to write a report)."""

    def write_page(self, write: Callable[[RecordT, Path], Path]) -> Path:
        """Write the run's ``report.html`` with ``write`` (the study's page) as the timed ``report`` stage, then
        save the record with that timing."""
        with self.stage("report"):
            path = write(self.record, self.run_dir)
        self.save()
        return path

    # ------------------------------------------------------------------ shared stages

    def run_images(self, requests: Sequence[PromptRequest], readers: Sequence[ImageReader] = ()) -> StageCounts:
        """Fill the requested images of ``record.prompt_sets`` with the configured text-to-image model (sets and
        images already there stay), then let every reader (VQA, embeddings) read them, through the cache, with
        the configured executor. Returns the generate stage's counts."""
        from auditor.executors import make_executor
        from auditor.executors.generation import GenerationStage

        generation = GenerationStage(self, requests)
        make_executor(self.record.config.executor).run(self, generation, readers)
        return generation.counts

    def text_to_image(self) -> TextToImage:
        """The configured text-to-image model, ready to generate, from the pool (loaded the first time)."""
        from auditor.executors.generation import load_text_to_image

        return self.models.get("t2i", self.record.config.t2i.spec, lambda: load_text_to_image(self))

    def embed_reader(
        self,
        *,
        required: bool = True,
        also: Callable[[Embedder], None] | None = None,
        on_skip: Callable[[str], None] | None = None,
    ) -> EmbedReader:
        """The embed stage for :meth:`run_images`: unit-length image embeddings (cached by image sha256).

        With ``required=False`` an embedder that cannot be loaded is skipped with a notice
        (and dropped from the config) instead of failing the run, and ``on_skip`` told why. ``also`` is called with
        the loaded embedder before it is released (e.g. to embed prompt texts too).
        Its ``vectors()`` are prompt id -> embeddings of the usable images once the stage ran.
        """
        from auditor.executors.perception import EmbedReader

        return EmbedReader(self, EMBED_BATCH_SIZE, required=required, also=also, on_skip=on_skip)
