"""The in-process executors: ``sequential`` (stage after stage) and ``overlapped`` (readers alongside generation).

Under ``overlapped`` each reader runs in a thread of its own and, on CUDA, on a stream of
its own, so its kernels can fill what generation leaves of the GPU.

Timings: each stage's timing runs from the moment it starts loading its model to the
moment its last result is stored. Under ``sequential`` the stages follow each other, so
their times add up to the run's; under ``overlapped`` the readers start with generation
and end after it, so their times overlap generation's (and sum to more than the wall time).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from auditor.executors.generation import STAGE as GENERATE
from auditor.executors.generation import GenerationStage, StoredImage, stored_image
from auditor.executors.perception import Chunk, Feed, ImageReader
from auditor.executors.writer import BackgroundWriter

if TYPE_CHECKING:  # pragma: no cover
    from auditor.executors.base import BatchStage, ModelRecipe
    from auditor.generation.base import TextToImage
    from auditor.studies.run import StudyRun

#: Seconds between checks for a stop request while a thread waits.
POLL_SECONDS = 0.1
#: Images a reader may lag behind generation before generation waits for it: each waiting image holds its pixels
#: (0.75 MB at 512 px, 1.7 MB at 768 px), so a slow VQA would otherwise pile up gigabytes over a paper-size audit.
MAX_BACKLOG = 256
#: Models load one at a time: the libraries' loading patches process-wide state (empty-weight
#: initialisation, tied weights, logging), so two loads in two threads can corrupt each other.
MODEL_LOADING = threading.Lock()


def _generate(
    study: StudyRun, generation: GenerationStage, writer: BackgroundWriter, between: Callable[[], None] = lambda: None
) -> None:
    """The generate stage: cache scan, then the misses in batches; the writer stores each batch.

    ``between`` runs before every batch (the overlapped executor raises a reader's error there).
    """
    with study.stage(GENERATE, generation.counts):
        with MODEL_LOADING:
            backend: TextToImage | None = generation.open()
        try:
            pending = generation.scan(backend, writer)
            size = backend.settings.batch_size
            for start in range(0, len(pending), size):
                between()
                batch = pending[start : start + size]
                pictures = backend.generate(batch)
                writer.submit(partial(generation.store, batch, pictures), GENERATE)
            writer.submit(generation.finish, GENERATE)
            writer.drain()
        finally:
            study.progress.finish(GENERATE)
            backend = None
            generation.close()


def read_stage(
    study: StudyRun,
    reader: ImageReader,
    writer: BackgroundWriter,
    images: Iterable[StoredImage],
    total: int,
    load: Callable[[ModelRecipe], Any] | None = None,
    compute_elsewhere: Callable[[Feed, list[Chunk]], None] | None = None,
    on_open: Callable[[bool], None] = lambda opened: None,
) -> None:
    """One reader over ``images`` (an iterable of :class:`StoredImage` ending the stream), chunk by chunk.

    In-process, each chunk is computed here as soon as it is full. With ``compute_elsewhere``
    (the Ray executor) the model is loaded with ``load``, the feed only cuts the chunks, and
    ``compute_elsewhere`` computes them and hands each result to ``feed.store``. ``on_open(opened)`` runs once
    the stage has its model (``opened`` True) or is to be skipped (False), still holding :data:`MODEL_LOADING` and
    before the stream is read: a skipped stage reads it to its end, which comes only after generation.
    """
    with study.stage(reader.stage, reader.counts):
        with MODEL_LOADING:
            opened = reader.open(load)
            on_open(opened)
        if not opened:
            for _ in images:  # a skipped stage still lets the stream run out
                pass
            return
        try:
            chunks: list[Chunk] = []
            feed = Feed(reader, writer, dispatch=None if compute_elsewhere is None else chunks.append)
            feed.start(total)
            for stored in images:
                feed.add(stored)
            feed.flush()
            if compute_elsewhere is not None:
                compute_elsewhere(feed, chunks)
            writer.drain()
            reader.finish()
        finally:
            study.progress.finish(reader.stage)
            reader.close()


def stored_images(study: StudyRun) -> list[StoredImage]:
    """The images already in the run folder, in record order, as readers take them."""
    return [stored_image(study, s.prompt_id, image) for s in study.record.prompt_sets for image in s.images]


class _InProcess:
    """What both in-process executors do the same way: readers over stored images, a study's own batches."""

    def read_stored(self, study: StudyRun, readers: Sequence[ImageReader]) -> None:
        """Each reader in turn over the images already in the run folder."""
        images = stored_images(study)
        with BackgroundWriter(on_error=study.mark_failed) as writer:
            for reader in readers:
                read_stage(study, reader, writer, images, len(images))

    def run_batches(self, study: StudyRun, stage: BatchStage) -> None:
        """The stage's model loaded here, its batches computed in turn, each stored on the writer thread."""
        from auditor.core.devices import release_accelerator_memory

        with BackgroundWriter(on_error=study.mark_failed) as writer, study.stage(stage.stage, stage.counts):
            try:
                with MODEL_LOADING:
                    model = stage.recipe().load(study.load_options())
                for batch in stage.open(model):
                    writer.submit(partial(stage.store, batch, stage.compute(model, batch)), stage.stage)
                writer.submit(stage.finish, stage.stage)
                writer.drain()
            finally:
                study.progress.finish(stage.stage)
                model = None
                release_accelerator_memory()


class SequentialExecutor(_InProcess):
    """Generation, then each reader in turn: one model in memory at a time."""

    name: ClassVar[str] = "sequential"

    def run(self, study: StudyRun, generation: GenerationStage, readers: Sequence[ImageReader]) -> None:
        with BackgroundWriter(on_error=study.mark_failed) as writer:
            _generate(study, generation, writer)
            for reader in readers:
                read_stage(study, reader, writer, generation.stored(), generation.total)


class _Stopped(BaseException):
    """Raised in a reader's thread when the run stops elsewhere (not an error of that reader)."""


class _Lane:
    """A reader in its own thread, fed the generated images in order through a queue.

    The queue itself is unbounded, because the writer thread puts into it: a full queue would
    make the writer wait for a reader that itself waits for the writer. Generation, which
    waits on nobody, is what waits instead (:func:`_keep_up`).
    """

    def __init__(
        self, study: StudyRun, reader: ImageReader, writer: BackgroundWriter, total: int, resident: bool = False
    ):
        self.reader = reader
        self.error: BaseException | None = None
        #: Load the reader's model as its stage opens, even where a remembered description would let it wait for
        #: the first missing result.
        self.resident = resident
        #: Set once the stage has opened (with its model loaded where ``resident``), was skipped, or failed.
        self.ready = threading.Event()
        self._images: queue.Queue[StoredImage | None] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(study, writer, total), name=f"auditor-{reader.stage}", daemon=True
        )

    def put(self, stored: StoredImage | None) -> None:
        self._images.put(stored)

    @property
    def backlog(self) -> int:
        """Images given to the reader that it has not taken yet."""
        return self._images.qsize()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread (at most ``timeout`` seconds); True once it has ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _stream(self):
        while True:
            try:
                stored = self._images.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if self._stop.is_set():
                    raise _Stopped from None
                continue
            if stored is None:
                return
            if self._stop.is_set():
                raise _Stopped
            yield stored

    def _run(self, study: StudyRun, writer: BackgroundWriter, total: int) -> None:
        try:
            with _own_cuda_stream():
                read_stage(study, self.reader, writer, self._stream(), total, on_open=self._opened)
        except _Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 - raised again in the main thread
            self.error = exc
        finally:
            self.ready.set()

    def _opened(self, opened: bool) -> None:
        if opened and self.resident:
            self.reader.loaded()
        self.ready.set()


class OverlappedExecutor(_InProcess):
    """Readers in their own threads, reading each image as soon as it and every image before it is stored.

    Generation runs in the calling thread, so Ctrl-C stops it at once; a reader's error
    stops generation before its next batch. Whatever ends the run, the writer first stores
    everything already computed.

    With ``--batch-size auto``, where generation loads its model (some image is missing), the
    readers load theirs first and generation waits for them: its batch-size probe then
    measures the GPU's memory with every model that will share it already there.
    """

    name: ClassVar[str] = "overlapped"

    def run(self, study: StudyRun, generation: GenerationStage, readers: Sequence[ImageReader]) -> None:
        with BackgroundWriter(on_error=study.mark_failed) as writer:
            probing = study.record.config.generation.batch_size_auto and generation.loads_model()
            lanes = [_Lane(study, reader, writer, generation.total, resident=probing) for reader in readers]
            for lane in lanes:
                generation.subscribe(lane.put)
                lane.start()
            try:
                if probing:
                    _wait_until_ready(study, lanes)
                _generate(study, generation, writer, between=lambda: _keep_up(lanes))
                self._wait(study, lanes)
            except BaseException:
                for lane in lanes:
                    lane.stop()
                for lane in lanes:
                    lane.join()
                raise

    @staticmethod
    def _wait(study: StudyRun, lanes: list[_Lane]) -> None:
        """Join the readers after generation, raising the first error; Ctrl-C is marked on the reader still running."""
        for lane in lanes:
            try:
                while not lane.join(POLL_SECONDS):
                    _raise_first(lanes)
            except KeyboardInterrupt:
                study.mark_failed(lane.reader.stage)
                raise
        _raise_first(lanes)


def _own_cuda_stream():
    """On CUDA, a stream of the reader's own, so its kernels can run beside generation's.

    No tensor passes between the threads (images go as PIL pictures), so nothing needs to
    wait for another stream. Elsewhere nothing changes.
    """
    import contextlib
    import sys

    if "torch" not in sys.modules:
        return contextlib.nullcontext()
    import torch  # not sys.modules["torch"]: another thread may still be importing it (half initialised)

    if not torch.cuda.is_available():
        return contextlib.nullcontext()
    return torch.cuda.stream(torch.cuda.Stream())


def _wait_until_ready(study: StudyRun, lanes: list[_Lane]) -> None:
    """Wait until every reader has opened its stage (or skipped it, or failed), raising the first reader's error;
    Ctrl-C here stops the run before generation, and is recorded at that stage."""
    try:
        for lane in lanes:
            while not lane.ready.wait(POLL_SECONDS):
                _raise_first(lanes)
    except KeyboardInterrupt:
        study.mark_failed(GENERATE)
        raise
    _raise_first(lanes)


def _keep_up(lanes: list[_Lane]) -> None:
    """Before a generation batch: raise a reader's error, and wait while a reader lags :data:`MAX_BACKLOG` images
    behind (a bounded producer-consumer queue, bounded where the producer can wait)."""
    _raise_first(lanes)
    while any(lane.backlog >= MAX_BACKLOG for lane in lanes):
        time.sleep(POLL_SECONDS / 10)
        _raise_first(lanes)


def _raise_first(lanes: list[_Lane]) -> None:
    for lane in lanes:
        if lane.error is not None:
            raise lane.error
