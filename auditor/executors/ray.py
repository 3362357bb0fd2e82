"""``--executor ray``: the generate -> perceive -> embed stages on pools of Ray workers (``auditor[ray]``).

The driver (this process) keeps all the bookkeeping it has under the in-process
executors: the stages look every item up in the content cache, and what is missing
becomes a Ray Data dataset, one row per generation batch or reader chunk, cut exactly as
the in-process executors cut them (so every image, answer and embedding is the same).
``map_batches`` runs each stage's rows on an actor pool of :mod:`~auditor.executors.ray_workers`
(each worker loads the model once: ``num_gpus`` 1 for generation, fractions for the
small readers so several share a GPU; one CPU each on a cluster without GPUs). Results
stream back as they finish and the driver stores them through the stages and the run's
writer thread: the driver is the only writer of the cache (one SQLite file) and of the
record, so reports, ``auditor score``/``compare`` and resume work unchanged, and a run
started on Ray resumes in-process and the other way round.

Images go to the workers as files of the run folder when the workers see it at the same
path (a shared filesystem; each file checked against its sha256), otherwise as PNG bytes
through Ray's object store; never as a list of pictures in the driver. Generation
workers send PNG bytes back (encoded on the worker), which the driver writes and caches.

Failures: a worker that dies (a lost node, an out-of-memory kill) loses only the batch
it was computing; Ray restarts it (``max_restarts``) and runs that batch again
(``max_task_retries``, one batch in flight per worker); finished batches are stored as
they arrive and never computed again. An error raised by the model code is not retried:
it ends the run as it would in-process, with the same exception. Ctrl-C stops the
dataset; what was stored is kept, as with every executor.

The stages run one after the other, each on every worker the cluster holds for it, so
a stage's pool starts once the previous stage is done (the readers' chunks depend on the
generated images' contents).
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import signal
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from auditor.core.errors import AuditorError
from auditor.executors import RAY_ADDRESS, check_reachable
from auditor.executors.generation import STAGE as GENERATE
from auditor.executors.generation import GenerationStage, StoredImage, give_batch_size
from auditor.executors.local import read_stage, stored_images
from auditor.executors.perception import Chunk, Feed, ImageReader, usable
from auditor.executors.ray_workers import (
    FAILED_CHUNK,
    BatchWorker,
    GenerateWorker,
    ModelInfo,
    Placement,
    ReadWorker,
    call,
    describe,
)
from auditor.executors.writer import BackgroundWriter
from auditor.studies.progress import WorkerThroughput, describe_workers

if TYPE_CHECKING:  # pragma: no cover
    from auditor.executors.base import BatchStage, ModelRecipe
    from auditor.studies.run import StudyRun


@dataclass(frozen=True)
class RayOptions:
    """How the stages use the cluster. None of it changes a number (workers compute the batches and
    chunks the in-process executors compute), so none of it is recorded."""

    #: Times Ray restarts a stage's worker that died (then the run fails).
    max_restarts: int = 3
    #: Times a batch whose worker died is run again on the restarted worker (an error the model raised is not retried).
    max_task_retries: int = 3
    #: GPUs each worker of a stage holds, by stage (a stage not named holds 1): fractions put several
    #: workers of a small stage on one GPU. Unused without GPUs (or with ``--device cpu``): one CPU each.
    gpus: dict[str, float] = field(default_factory=lambda: {"perceive": 0.5, "embed": 0.25})
    #: Workers per stage at most; None = as many as the cluster's GPUs (or CPUs) hold.
    max_workers: int | None = None
    #: Whether readers' workers open the run folder's files (mounted at the same path everywhere) or get the
    #: images through the object store; None = each reading stage asks a worker whether it sees the folder.
    shared_files: bool | None = None


class RayExecutor:
    """Each stage on an actor pool of Ray workers; the driver stores every result (see the module)."""

    name: ClassVar[str] = "ray"

    def __init__(self, options: RayOptions | None = None):
        self.options = options or RayOptions()

    def run(self, study: StudyRun, generation: GenerationStage, readers: Sequence[ImageReader]) -> None:
        connect()
        with BackgroundWriter(on_error=study.mark_failed) as writer:
            run = _RayRun(study, self.options, writer)
            run.generate(generation)
            for reader in readers:
                run.read(reader, generation.stored(), generation.total)

    def read_stored(self, study: StudyRun, readers: Sequence[ImageReader]) -> None:
        connect()
        images = stored_images(study)
        with BackgroundWriter(on_error=study.mark_failed) as writer:
            run = _RayRun(study, self.options, writer)
            for reader in readers:
                run.read(reader, images, len(images))

    def run_batches(self, study: StudyRun, stage: BatchStage) -> None:
        connect()
        with BackgroundWriter(on_error=study.mark_failed) as writer:
            _RayRun(study, self.options, writer).batches(stage)


def connect() -> None:
    """Join the Ray cluster at ``RAY_ADDRESS`` (``--ray-address``), or start one on this machine.

    A program that already called ``ray.init`` (a notebook, the tests) keeps its connection.
    Without an address Ray starts a local Ray with this machine's CPUs and GPUs. Workers'
    logs stay in Ray's session folder, not on this terminal, and the driver's Ray logs say
    errors only: their warnings (the token authentication of every local Ray, actor restart
    caveats) are not the user's to act on.
    """
    import ray

    if not ray.is_initialized():
        address = os.environ.get("RAY_ADDRESS", "").strip()
        if address != "auto" and RAY_ADDRESS.fullmatch(address):
            check_reachable(address, given_as="RAY_ADDRESS")  # set in the environment, not by --ray-address
        try:
            with signal_handlers_kept():
                ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"the Ray cluster at {address}" if address else "a local Ray"
            raise AuditorError(f"cannot start or reach {where}: {_first_line(exc)}") from None
    from ray.data import DataContext

    context = DataContext.get_current()
    context.enable_progress_bars = False  # the driver shows its own progress, per stage and per worker
    context.print_on_execution_start = False
    for handler in logging.getLogger("ray.data").handlers:
        if not isinstance(handler, logging.FileHandler):
            handler.setLevel(logging.CRITICAL)  # errors reach the run as exceptions; Ray Data logs to its file


@contextmanager
def signal_handlers_kept() -> Iterator[None]:
    """Put back this process's SIGTERM and SIGINT handlers after ``ray.init``, which replaces them (SIGTERM by a
    plain exit, and its core library's crash handler): a scheduler's time limit must stop a run on Ray as it
    stops one in process, its record saying ``interrupted``. Only the main thread has handlers to keep."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, handler in kept.items():
            if handler is not None:  # None: set outside Python, nothing Python can put back
                signal.signal(number, handler)


class RemoteModel:
    """A stage's model loaded on a Ray worker, as the driver sees it: what identifies it and its settings.

    Stands where the in-process executors hand the stages a loaded model, so the stages
    record and key the cache exactly as they do in-process. Its methods (a batch-size
    probe, text embeddings) run as Ray tasks that load the model on a worker again.
    """

    def __init__(self, recipe: ModelRecipe, placement: Placement, info: ModelInfo, prompts: Sequence[str] = ()):
        self._recipe = recipe
        self._placement = placement
        self._info = info
        #: The prompts the model was described with: their cut ends are in ``info``.
        self._described = frozenset(prompts)
        self.ref = info.ref
        self.settings = info.settings
        self.seeded = info.seeded

    @classmethod
    def load(
        cls,
        recipe: ModelRecipe,
        placement: Placement,
        probe: tuple[str, str] | None = None,
        prompts: Sequence[str] = (),
    ) -> RemoteModel:
        """Load the model on a worker placed as the stage's workers will be, and learn what identifies it (and
        which of ``prompts``, those a generation stage may make images of, its text encoder reads only in part)."""
        recipe = portable(recipe)
        info = _remote(describe, placement, recipe, placement, probe, list(prompts))
        return cls(recipe, placement, info, prompts)

    def cut_prompts(self, prompts: Sequence[str]) -> list[tuple[str, str]]:
        """The model's ``cut_prompts`` of ``prompts``: learnt when it was described, or for prompts only known
        later (a trace picks its prompts' words with the model first) asked of a worker."""
        asked = dict.fromkeys(prompts)
        known = [(prompt, end) for prompt, end in self._info.cut_prompts if prompt in asked]
        later = [prompt for prompt in asked if prompt not in self._described]
        if later and "cut_prompts" in self._info.methods:
            known += self._call("cut_prompts", later)
        return known

    @property
    def sees_file(self) -> bool:
        """Whether the worker that loaded it saw the probe file with its recorded bytes."""
        return self._info.sees_file

    @property
    def recipe(self) -> ModelRecipe:
        return self._recipe

    def cache_fingerprint(self) -> str:
        return self._info.fingerprint

    def __getattr__(self, name: str) -> Any:
        info = self.__dict__.get("_info")
        if info is not None and name == "batch_size_key" and info.batch_size_key is not None:
            return lambda: info.batch_size_key
        if info is not None and name in info.methods:
            return partial(self._call, name)
        raise AttributeError(name)

    def _call(self, method: str, *args: Any) -> Any:
        return _remote(call, self._placement, self._recipe, self._placement, method, args)


class _RayRun:
    """One ``run`` of the executor: the study, the Ray options, the writer, and the cluster's size."""

    def __init__(self, study: StudyRun, settings: RayOptions, writer: BackgroundWriter):
        import ray

        self.study = study
        self.settings = settings
        self.writer = writer
        resources = ray.cluster_resources()
        self.gpus = float(resources.get("GPU", 0))
        self.cpus = max(1, int(resources.get("CPU", 1)))

    # ------------------------------------------------------------------ stages

    def generate(self, generation: GenerationStage) -> None:
        """Cache scan in the driver, the misses in batches on the generation pool, each stored as it arrives."""
        study, writer = self.study, self.writer
        with study.stage(GENERATE, generation.counts):
            try:
                placement = self.placement(GENERATE)
                backend = RemoteModel.load(generation.recipe(), placement, prompts=generation.prompts())
                give_batch_size(study, backend)
                generation.adopt(backend)
                pending = generation.scan(backend, writer)
                size = backend.settings.batch_size
                batches = [pending[start : start + size] for start in range(0, len(pending), size)]
                rows = [
                    {
                        "batch": number,
                        "prompts": [item.prompt for item in batch],
                        "indices": [item.index for item in batch],
                        "seeds": [item.seed for item in batch],
                    }
                    for number, batch in enumerate(batches)
                ]
                arguments = {
                    "recipe": backend.recipe,
                    "placement": placement,
                    "fingerprint": backend.cache_fingerprint(),
                    "batch_size": size,
                    "compile": study.record.config.generation.compile,
                }
                settled = False
                with closing(self.stream(GENERATE, rows, GenerateWorker, arguments, placement)) as outputs:
                    for output in outputs:
                        if not settled:  # what ran on the workers, torch.compile included
                            settled = True
                            ran = backend.settings.model_copy(update={"optimizations": output["optimizations"]})
                            generation.settle(ran)
                            if output["notice"]:
                                study.progress.notice(output["notice"])
                        store = partial(generation.store_encoded, batches[output["batch"]], output["pictures"])
                        writer.submit(store, GENERATE)
                writer.submit(generation.finish, GENERATE)
                writer.drain()
            finally:
                study.progress.finish(GENERATE)

    def batches(self, stage: BatchStage) -> None:
        """A study's own stage: the model described by a worker, the batches left computed on the stage's pool."""
        study, writer = self.study, self.writer
        with study.stage(stage.stage, stage.counts):
            try:
                placement = self.placement(stage.stage)
                model = RemoteModel.load(stage.recipe(), placement)
                batches = stage.open(model)
                arguments = {
                    "recipe": portable(stage.recipe()),  # as open settled it: the workers check it is the same model
                    "placement": placement,
                    "fingerprint": model.cache_fingerprint(),
                    "compute": type(stage).compute,
                }
                rows = [{"batch": number, "work": pickle.dumps(batch)} for number, batch in enumerate(batches)]
                with closing(self.stream(stage.stage, rows, BatchWorker, arguments, placement)) as outputs:
                    for output in outputs:
                        writer.submit(partial(stage.store, batches[output["batch"]], output["result"]), stage.stage)
                writer.submit(stage.finish, stage.stage)
                writer.drain()
            finally:
                study.progress.finish(stage.stage)

    def read(self, reader: ImageReader, images: list[StoredImage], total: int) -> None:
        """A reader's chunks of ``images``, cut in the driver as in-process, computed on the reader's pool."""
        placement = self.placement(reader.stage)
        first = next((image for _, image in usable(self.study.record.prompt_sets)), None)
        probe = None if first is None else (str(self.study.run_dir.resolve() / first.file), first.sha256)

        def compute(feed: Feed, chunks: list[Chunk]) -> None:
            model: RemoteModel = reader.model
            shared = self.settings.shared_files
            if shared is None:
                shared = model.sees_file
                if chunks and not shared:
                    self.study.progress.notice(
                        f"{reader.stage}: the Ray workers do not see the run folder; images go through Ray's object store"
                    )
            rows = [self._chunk_row(number, chunk, shared) for number, chunk in enumerate(chunks)]
            arguments = {
                "recipe": model.recipe,
                "placement": placement,
                "fingerprint": model.cache_fingerprint(),
                "compute": type(reader).compute,
            }
            arrived: dict[int, Any] = {}  # results that came before an earlier chunk's (the feed stores in order)
            stored = 0
            try:
                with closing(self.stream(reader.stage, rows, ReadWorker, arguments, placement)) as outputs:
                    for output in outputs:
                        arrived[output["chunk"]] = output["result"]
                        while stored in arrived:
                            feed.store(chunks[stored], arrived.pop(stored))
                            stored += 1
            except Exception as exc:
                cut = getattr(exc, FAILED_CHUNK, None)
                if cut is not None:  # a worker's failure: what its chunk got first is kept, as in process
                    reader.salvage(chunks[cut].images, chunks[cut].task, exc)
                raise

        read_stage(
            self.study,
            reader,
            self.writer,
            images,
            total,
            load=lambda recipe: RemoteModel.load(recipe, placement, probe),
            compute_elsewhere=compute,
        )

    def _chunk_row(self, number: int, chunk: Chunk, shared: bool) -> dict[str, Any]:
        """A reader chunk as a dataset row: the task, and the images as run-folder paths or, without a
        shared run folder, a reference to their PNG bytes in Ray's object store."""
        images = chunk.images
        row: dict[str, Any] = {
            "chunk": number,
            "task": pickle.dumps(chunk.task),
            "sha256": [image.sha256 for image in images],
        }
        folder = self.study.run_dir.resolve()
        if shared:
            row["files"] = [str(folder / image.file) for image in images]
        else:
            import ray

            # One object per chunk, put now: the driver holds one chunk's bytes at a time, and the object
            # store (which spills to disk) holds the rest until a worker reads them.
            row["png"] = [ray.put([(folder / image.file).read_bytes() for image in images])]
        return row

    # ------------------------------------------------------------------ Ray

    def placement(self, stage: str) -> Placement:
        """What each of the stage's workers holds, and how many the cluster has room for."""
        settings, device = self.settings, self.study.device
        allow = self.study.record.config.allow_partial_weights
        if device == "cpu" or self.gpus == 0:
            if device not in (None, "cpu"):
                raise AuditorError(f"--device {device}: the Ray cluster has no GPUs")
            capacity = self.cpus
            placement = Placement(num_gpus=0.0, num_cpus=1.0, workers=capacity, device=device,
                                  allow_partial_weights=allow)  # fmt: skip
        else:
            share = settings.gpus.get(stage, 1.0)
            capacity = max(1, math.floor(self.gpus / share + 1e-9))
            placement = Placement(num_gpus=share, num_cpus=1.0, workers=capacity, device=device,
                                  allow_partial_weights=allow)  # fmt: skip
        if settings.max_workers is not None:
            placement = replace(placement, workers=min(placement.workers, settings.max_workers))
        return placement

    def stream(
        self, stage: str, rows: list[dict[str, Any]], worker: type, arguments: dict[str, Any], placement: Placement
    ) -> Iterator[dict[str, Any]]:
        """Run ``rows`` through an actor pool of ``worker`` and yield each output as it finishes.

        Each row is a block of its own and a worker holds one at a time, so a worker that
        dies loses one batch. A worker's error is raised here as the worker raised it.
        """
        if not rows:
            return
        import ray.data
        from ray.data import ActorPoolStrategy

        dataset = ray.data.from_items(rows, override_num_blocks=len(rows))
        size = min(placement.workers, len(rows))
        pool = ActorPoolStrategy(min_size=1, max_size=size, initial_size=size, max_tasks_in_flight_per_actor=1)
        with warnings.catch_warnings():
            # Ray 2.60 deprecates remote arguments such as max_restarts without a named replacement for
            # actor pools yet; the extra pins ray below their removal.
            warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
            dataset = dataset.map_batches(
                worker,
                fn_constructor_kwargs=arguments,
                batch_size=1,
                batch_format="numpy",
                compute=pool,
                num_gpus=placement.num_gpus,
                num_cpus=placement.num_cpus,
                max_restarts=self.settings.max_restarts,
                max_task_retries=self.settings.max_task_retries,
            )
        workers: dict[str, WorkerThroughput] = {}
        iterator = iter(dataset.iter_rows())
        try:
            while True:
                try:
                    row = next(iterator)
                except StopIteration:
                    break
                except Exception as exc:  # noqa: BLE001 - Ray's own failures: one line, not a traceback
                    raise AuditorError(
                        f"Ray failed in the {stage} stage: {_first_line(exc)} (the workers' logs are in Ray's session folder)"
                    ) from None
                if row["error"]:
                    raise pickle.loads(row["error"])
                output = pickle.loads(row["result"])
                entry = workers.setdefault(output["worker"], WorkerThroughput(output["worker"], output["pid"]))
                entry.items += output["items"]
                entry.seconds += output["seconds"]
                self.study.progress.workers(stage, list(workers.values()))
                yield output
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()
            if workers:
                self.study.progress.notice(f"{stage} on Ray: {describe_workers(list(workers.values()))}")


def _remote(function: Callable[..., Any], placement: Placement, *args: Any) -> Any:
    """``function(*args)`` as a Ray task placed like the stage's workers; a worker's error raised as it was."""
    import ray

    task = ray.remote(function).options(num_gpus=placement.num_gpus, num_cpus=placement.num_cpus, max_retries=0)
    try:
        return ray.get(task.remote(*args))
    except ray.exceptions.RayTaskError as exc:
        raise (exc.cause if exc.cause is not None else AuditorError(f"Ray: {_first_line(exc)}")) from None
    except ray.exceptions.RayError as exc:
        raise AuditorError(f"Ray: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def portable(recipe: ModelRecipe) -> ModelRecipe:
    """The recipe with a relative local model path made absolute: workers do not share the driver's working directory."""
    spec = recipe.backends().check(recipe.spec)
    target = Path(spec.target).expanduser() if spec.target else None
    if target is None or target.is_absolute() or not target.exists():
        return recipe
    return replace(recipe, spec=f"{spec.prefix}:{target.resolve()}")
