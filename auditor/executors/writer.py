"""One background thread for a run's bookkeeping, so the accelerator never waits on it.

After every batch a stage has CPU work that the next batch does not need: encoding the
images as PNG, hashing them, writing them and the cache entries, rewriting the record.
The stages hand that work to a :class:`BackgroundWriter` and go on computing. One thread
runs the jobs in the order they were given, so the record and the cache change exactly
as they would if the stage did the work itself; a bounded queue keeps a fast stage from
running far ahead of its bookkeeping (and from holding many batches of images in memory).

The first exception a job raises (including a ``KeyboardInterrupt`` raised by a progress
callback) stops the writer; :meth:`submit`, :meth:`drain` and :meth:`close` raise it again
in the calling thread, as the same object, so the run ends as if the stage had raised it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

#: Batches of bookkeeping that may wait at once; the producer blocks beyond that. Ctrl-C and
#: errors let the queue drain; a killed process loses what waits in it (and the batch in flight).
QUEUE_DEPTH = 2

_STOP = object()


class BackgroundWriter:
    """A FIFO of bookkeeping jobs run by one daemon thread; a context manager that drains on exit."""

    def __init__(
        self,
        on_error: Callable[[Any], None] = lambda _tag: None,
        name: str = "auditor-writer",
        depth: int = QUEUE_DEPTH,
    ):
        self._jobs: queue.Queue = queue.Queue(maxsize=depth)
        self._on_error = on_error
        self._error: BaseException | None = None
        self._done = threading.Condition()
        self._pending = 0
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ producer side

    def submit(self, job: Callable[[], None], tag: Any = None) -> None:
        """Queue ``job``; raises the writer's first error instead once there is one.

        ``tag`` (e.g. the stage the job belongs to) is passed to ``on_error`` if the job fails.
        """
        self.raise_error()
        with self._done:
            self._pending += 1
        while True:
            try:
                self._jobs.put((job, tag), timeout=0.1)
                return
            except queue.Full:
                if self._error is not None:  # the writer stopped taking jobs
                    with self._done:
                        self._pending -= 1
                    self.raise_error()

    def drain(self) -> None:
        """Wait until every job given so far has run; raise the writer's error if one failed."""
        with self._done:
            while self._pending and self._error is None:
                self._done.wait(0.1)
        self.raise_error()

    def close(self) -> None:
        """Run what is queued, stop the thread, and raise the writer's error if there was one."""
        if self._thread.is_alive():
            self._jobs.put(_STOP)
            self._thread.join()
        self.raise_error()

    def raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    @property
    def failed(self) -> bool:
        return self._error is not None

    def __enter__(self) -> BackgroundWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        """Finish the queued work however the block ends: what was computed is kept.

        When the block itself raised, that exception wins; a writer error is then dropped
        (the run already stops), except that it is raised when the block ended normally.
        """
        try:
            self.close()
        except BaseException:
            if error is None:
                raise

    # ------------------------------------------------------------------ the thread

    def _work(self) -> None:
        while True:
            entry = self._jobs.get()
            if entry is _STOP:
                return
            job, tag = entry
            if self._error is None:
                try:
                    job()
                except BaseException as exc:  # noqa: BLE001 - handed to the producer as it is
                    self._on_error(tag)
                    self._error = exc
            with self._done:
                self._pending -= 1
                self._done.notify_all()
