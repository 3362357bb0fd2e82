"""Progress reporting for long stages: rich bars with counts and ETA, or silence.

Studies talk to a :class:`ProgressReporter`; the CLI picks the rich one (on stderr, so
``--json`` output on stdout stays clean) or the quiet one. Library users can pass their
own reporter, e.g. to drive a notebook widget or to stop a run from a callback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from auditor.core.errors import RunBusyError, RunLockError
from auditor.core.redaction import redact


@dataclass
class StageCounts:
    """How many items a stage computed and how many came from the content cache (the run's timings)."""

    computed: int = 0
    cached: int = 0


@dataclass
class WorkerThroughput:
    """One worker's share of a stage run on Ray: items it computed and the seconds it spent computing them."""

    #: ``node address:process id``; a restarted worker is a new process, so a new entry.
    worker: str
    pid: int
    items: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        """Items per second of computing (loading the model and waiting for work not counted)."""
        return self.items / self.seconds if self.seconds > 0 else 0.0


def describe_workers(workers: Sequence[WorkerThroughput]) -> str:
    """``3 workers, 5.1/s (1.6-1.8 each)``: how many, the stage's throughput, and the range per worker."""
    if not workers:
        return ""
    rates = [worker.rate for worker in workers]
    plural = "" if len(workers) == 1 else "s"
    return f"{len(workers)} worker{plural}, {sum(rates):.2f}/s ({min(rates):.2f}-{max(rates):.2f} each)"


class ProgressReporter(Protocol):
    def start(self, stage: str, total: int | None, description: str) -> None:
        """A stage with ``total`` units of work begins (None: a count not known in advance, e.g. rows streamed)."""

    def advance(self, stage: str, amount: int = 1) -> None:
        """``amount`` more units of ``stage`` are done."""

    def finish(self, stage: str) -> None:
        """The stage is over (completed or stopped)."""

    def notice(self, message: str) -> None:
        """Something the person running the audit should know."""

    def workers(self, stage: str, workers: Sequence[WorkerThroughput]) -> None:
        """The throughput of each worker of ``stage`` so far (stages run on Ray), after every batch."""


class QuietProgress:
    """Reports nothing (``--quiet`` and ``--json``)."""

    def start(self, stage: str, total: int | None, description: str) -> None:
        pass

    def advance(self, stage: str, amount: int = 1) -> None:
        pass

    def finish(self, stage: str) -> None:
        pass

    def notice(self, message: str) -> None:
        pass

    def workers(self, stage: str, workers: Sequence[WorkerThroughput]) -> None:
        pass


class NoticesOnly(QuietProgress):
    """Passes notices on, each message once, and keeps stage bars to itself: a batch shows one bar per stage over
    its prompts instead of one per prompt and stage, and what all its audits say (other weights, say) once."""

    def __init__(self, inner: ProgressReporter):
        self.inner = inner
        self._said: set[str] = set()

    def notice(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            self.inner.notice(message)


class RichProgress:
    """One rich progress bar per stage, with done/total counts and the time remaining.

    Stages may report from several threads (the overlapped executor, the writer thread):
    bars are added and removed under a lock. A stage run on Ray workers shows how many
    work on it and how fast, beside its bar.
    """

    def __init__(self, console: Console):
        self.console = console
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self._lock = threading.Lock()

    def start(self, stage: str, total: int | None, description: str) -> None:
        with self._lock:
            if self._progress is None:
                self._progress = Progress(
                    *_bar_columns(),
                    console=self.console,
                    transient=False,
                )
                self._progress.start()
            self._tasks[stage] = self._progress.add_task(_bar_label(description, total), total=total, workers="")

    def advance(self, stage: str, amount: int = 1) -> None:
        with self._lock:
            if self._progress is not None and stage in self._tasks:
                self._progress.advance(self._tasks[stage], amount)

    def finish(self, stage: str) -> None:
        with self._lock:
            if self._progress is not None and stage in self._tasks:
                self._progress.stop_task(self._tasks.pop(stage))
                if not self._tasks:
                    self._progress.stop()
                    self._progress = None

    def notice(self, message: str) -> None:
        print_notice(self.console, message)

    def workers(self, stage: str, workers: Sequence[WorkerThroughput]) -> None:
        with self._lock:
            if self._progress is not None and stage in self._tasks:
                self._progress.update(self._tasks[stage], workers=describe_workers(workers))


def _bar_label(description: str, total: int | None) -> str:
    """A stage's bar label; one with nothing to compute (all cached, or no input) says so, where its bar would read
    ``0/0 -:--:--``."""
    return f"{description} (nothing to compute)" if total == 0 else description


def _bar_columns() -> tuple[ProgressColumn, ...]:
    """A stage's bar: its description, the bar, done/total, the time remaining and, for a stage run on
    Ray workers, how many work on it and how fast (the task's ``workers`` field)."""
    return (
        TextColumn("{task.description:<24}"),
        BarColumn(bar_width=None),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[workers]}", style="dim"),
    )


def print_notice(console: Console, message: str) -> None:
    """A note between the bars, as plain text (never markup) with API keys redacted."""
    console.print(f"note: {redact(message)}", markup=False, highlight=False, soft_wrap=True)  # paths stay whole


class _HeadedProgress(Progress):
    """A rich Progress that draws a header (refreshed with it) above its bars."""

    def __init__(self, header: Callable[[], RenderableType], *columns, **options):
        self._header = header  # before Progress.__init__, which renders once
        super().__init__(*columns, **options)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self._header()
        yield self.make_tasks_table(self.tasks)


class LiveProgress:
    """One live display: a header that the study refreshes (an exploration's round table) over the
    current stages' bars. Use it as a context manager; finished bars go away, so it stays short.
    Stages may report from several threads (the executors): bars change under a lock."""

    def __init__(self, console: Console, header: Callable[[], RenderableType]):
        self.console = console
        self._progress = _HeadedProgress(
            header,
            *_bar_columns(),
            console=console,
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> LiveProgress:
        self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_exc: object) -> None:
        if exc_type is not None and issubclass(exc_type, RunBusyError | RunLockError):
            self._progress.live.transient = True  # refused before it began: the one-line refusal is all there is
        self._progress.stop()

    def refresh(self) -> None:
        """Redraw the header (after a round)."""
        self._progress.refresh()

    def start(self, stage: str, total: int | None, description: str) -> None:
        with self._lock:
            self._tasks[stage] = self._progress.add_task(_bar_label(description, total), total=total, workers="")

    def advance(self, stage: str, amount: int = 1) -> None:
        with self._lock:
            if stage in self._tasks:
                self._progress.advance(self._tasks[stage], amount)

    def finish(self, stage: str) -> None:
        with self._lock:
            if stage in self._tasks:
                self._progress.remove_task(self._tasks.pop(stage))

    def notice(self, message: str) -> None:
        print_notice(self.console, message)

    def workers(self, stage: str, workers: Sequence[WorkerThroughput]) -> None:
        with self._lock:
            if stage in self._tasks:
                self._progress.update(self._tasks[stage], workers=describe_workers(workers))
