"""How a run's status reads: in a listing, in a report's header and in a sentence.

Apart from the report sentences (:mod:`auditor.reporting.sentences`, which import numpy and the glossary)
because ``auditor runs`` shows statuses and nothing else of a report.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from auditor.core.runlock import is_running, lock_folder

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import RunStatus, StudyRecord

#: How each run status reads in a sentence ("This run ..."); a ``running`` record whose lock was not asked (or
#: cannot be told) may be either of the two :func:`status_wording` tells apart.
STATUS_PHRASES = {
    "running": "is still running (or stopped without recording why)",
    "completed": "completed",
    "failed": "failed",
    "interrupted": "was interrupted",
}

#: How a run ends that records no end of its own.
STOP_CAUSES = "killed, or its machine went down"

#: A ``running`` record that no process holds: its attempt ended without writing how.
STOPPED_PHRASE = f"was stopped without recording why ({STOP_CAUSES})"

#: The same, as the listing's ``stopped`` status is explained (``auditor runs``, ``auditor report``).
STOPPED_MEANING = f"the record says running, but no process runs it ({STOP_CAUSES})"


def running_now(record: StudyRecord, run_dir: Path | None) -> bool | None:
    """For a record that says ``running``: whether a process holds its run folder's lock now (True), none does
    (False: it was stopped without recording why), or that cannot be told (None, as without ``run_dir``). None for
    any other status."""
    return is_running(lock_folder(run_dir)) if record.status == "running" and run_dir is not None else None


def status_wording(status: RunStatus, alive: bool | None) -> str:
    """How a run's status reads in a sentence ("This run ..."), given :func:`running_now`'s answer ``alive``."""
    if status != "running" or alive is None:
        return STATUS_PHRASES[status]
    return "is running now" if alive else STOPPED_PHRASE


def shown_status(status: RunStatus, alive: bool | None) -> str:
    """The status as ``auditor runs`` and the reports' headers show it: ``stopped`` for a ``running`` record that no
    process runs (:func:`running_now` False), else the record's own."""
    return "stopped" if status == "running" and alive is False else status
