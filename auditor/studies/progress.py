"""Progress reporting for long stages: rich bars with counts and ETA, or silence.

Studies talk to a :class:`ProgressReporter`; the CLI picks the rich one (on stderr, so
``--json`` output on stdout stays clean) or the quiet one. Library users can pass their
own reporter, e.g. to drive a notebook widget or to stop a run from a callback.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from auditor.core.redaction import redact


@dataclass
class StageCounts:
    """How many items a stage computed and how many came from the content cache (the run's timings)."""

    computed: int = 0
    cached: int = 0


class ProgressReporter(Protocol):
    def start(self, stage: str, total: int | None, description: str) -> None:
        """A stage with ``total`` units of work begins (None: a count not known in advance, e.g. rows streamed)."""

    def advance(self, stage: str, amount: int = 1) -> None:
        """``amount`` more units of ``stage`` are done."""

    def finish(self, stage: str) -> None:
        """The stage is over (completed or stopped)."""

    def notice(self, message: str) -> None:
        """Something the person running the audit should know."""


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


class RichProgress:
    """One rich progress bar per stage, with done/total counts and the time remaining.

    Stages may report from several threads (the overlapped executor, the writer thread):
    bars are added and removed under a lock.
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
                    TextColumn("{task.description:<24}"),
                    BarColumn(bar_width=None),
                    MofNCompleteColumn(),
                    TimeRemainingColumn(),
                    console=self.console,
                    transient=False,
                )
                self._progress.start()
            self._tasks[stage] = self._progress.add_task(description, total=total)

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
        self.console.print(f"note: {redact(message)}", markup=False, highlight=False)
