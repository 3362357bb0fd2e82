"""Reports of a batch: the prompt x axis leaderboard in the terminal, ``--json`` and ``report.html``.

They read the batch's record only (its leaderboard holds each audit's BAV and lean with their
intervals); every prompt's own report is its audit's ``report.html``. The headline names a
prompt x axis as the strongest lean only when its BAV interval lies above every other row's;
rows with equal BAVs share a rank, as on an exploration's leaderboard.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from auditor.core.console import say_whole
from auditor.core.store import REPORT_FILE, run_files, run_files_text
from auditor.records import BatchRecord, BatchRow
from auditor.reporting.numbers import number, separating_decimals, with_span
from auditor.reporting.ranking import Ranked, rank_with_ties
from auditor.reporting.sentences import intervals_asked, unfinished_note
from auditor.reporting.status import running_now, shown_status
from auditor.reporting.tables import borderless_table
from auditor.reporting.wording import counted, dropped_axes_summary, quote
from auditor.scoring.uncertainty import no_interval_reason


@dataclass(frozen=True)
class Row(Ranked):
    """One prompt x axis of the leaderboard as the reports show it; rows with equal BAVs tie."""

    row: BatchRow


def leaderboard(record: BatchRecord) -> list[Row]:
    """The record's leaderboard ranked: highest BAV first (no BAV last), equal BAVs (or none) sharing a rank, since
    which of them the record lists first is only the order of the prompts."""
    return [Row(*ranked) for ranked in rank_with_ties(record.leaderboard, lambda row: (row.bav,))]


def audit_statuses(record: BatchRecord, run_dir: Path | None) -> dict[str, str]:
    """Audit id -> its status as ``auditor runs`` shows it: the batch's lock covers its audits, so an audit that a
    batch no process runs any more says ``running`` in the record was stopped."""
    alive = running_now(record, run_dir)
    return {audit.audit_id: shown_status(audit.status, alive) for audit in record.audits}


def no_intervals(record: BatchRecord) -> str | None:
    """Why the leaderboard has no intervals, when its settings made none (None when they asked for them)."""
    return no_interval_reason(record.config.scoring.bootstrap, record.config.images_per_prompt)


def headline(record: BatchRecord) -> str:
    """Which prompt x axis leans most, claimed only when its BAV interval is above all the others' (and it ties
    with no row)."""
    rows = leaderboard(record)
    places = bav_decimals(rows)  # the leaderboard's, so the headline quotes its top row as the table writes it
    scored = [ranked for ranked in rows if ranked.row.bav is not None]
    if not scored:
        if record.status != "completed":
            return "No prompt x axis has a BAV yet."
        if not any(audit.status == "completed" for audit in record.audits):
            return "No prompt x axis has a BAV: no audit of the batch completed (see below)."
        return "No prompt x axis has a BAV: no axis got two counterfactuals with a CAS."
    ranked = [found.row for found in scored]
    top = ranked[0]
    if top.bav == 0:
        return "No prompt leans on any axis: every axis's counterfactuals got equal CAS values in every audit."
    subject = f"{quote(top.prompt)} on {top.axis}"
    if len(ranked) == 1:
        return f"Only {subject} has a BAV ({_bav(top, places)})."
    if scored[0].tied:  # the leaderboard's own ties: rows sharing the top rank
        shared = sum(found.rank == scored[0].rank for found in scored[1:])
        return (
            f"{subject} and {counted(shared, 'other row')} share the largest BAV ({number(top.bav, places)}), "
            "so no single one leans most."
        )
    if top.bav_ci is None or top.bav_ci.low is None:
        why = f" ({reason})" if (reason := no_intervals(record)) else ""
        return (
            f"The largest BAV is {subject} ({number(top.bav, places)}), but it has no interval{why}, so no ranking is "
            "claimed."
        )
    tied = [
        row for row in ranked[1:] if row.bav_ci is None or row.bav_ci.high is None or row.bav_ci.high >= top.bav_ci.low
    ]
    if not tied:
        return f"The strongest lean is {subject}: BAV {_bav(top, places)}, its interval above every other row's."
    overlap = "overlaps" if len(tied) == 1 else "overlap"
    return (
        f"The largest BAV is {subject} ({_bav(top, places)}), but {counted(len(tied), 'other row')} "
        f"{overlap} its interval, so no single one leans most."
    )


def notes(record: BatchRecord) -> list[str]:
    """What the leaderboard leaves out: the --axes that prompts' plans dropped, and why it has no intervals."""
    found = [dropped_axes_summary([audit.dropped_axes for audit in record.audits])]
    if reason := no_intervals(record):
        found.append(f"No intervals: {reason}; no row is ranked above another.")
    return [note for note in found if note]


def _bav(row: BatchRow, digits: int) -> str:
    return with_span(row.bav, row.bav_ci, digits)


def bav_decimals(rows: list[Row]) -> int:
    """The leaderboard's BAV decimals: 4, or more where two rows ranked apart would read as the same number."""
    return separating_decimals([(ranked.rank, ranked.row.bav) for ranked in rows], 4)


def _row_json(ranked: Row) -> dict[str, Any]:
    row = ranked.row
    return {
        "rank": ranked.rank,
        "tied": ranked.tied,
        "prompt": row.prompt,
        "axis": row.axis,
        "bav": row.bav,
        "bav_ci": row.bav_ci.bounds() if row.bav_ci else None,
        "lean": row.lean,
        "lean_ci": row.lean_ci.bounds() if row.lean_ci else None,
        "audit": row.audit_id,
    }


def batch_json(record: BatchRecord, run_dir: Path | None = None) -> dict[str, Any]:
    """What ``auditor batch --json`` prints: the leaderboard, highest BAV first, and every audit's status."""
    data: dict[str, Any] = {"kind": "batch"}
    shown = audit_statuses(record, run_dir)
    if run_dir is not None:
        data |= run_files(run_dir)
    return data | {
        "status": record.status,
        "headline": headline(record),
        "no_intervals": no_intervals(record),
        "notes": notes(record),
        "leaderboard": [_row_json(row) for row in leaderboard(record)],
        "audits": [
            {"audit": a.audit_id, "prompt": a.prompt, "folder": a.folder, "status": a.status,
             "shown_status": shown[a.audit_id], "error": a.error}
            for a in record.audits
        ],
    }  # fmt: skip


def render_batch(record: BatchRecord, run_dir: Path, console: Console) -> None:
    """The leaderboard (prompt x axis: BAV and lean with intervals), then the prompts that failed."""
    console.print(Text(f"Batch {record.run_id}: {record.subject()}", style="bold"))
    console.print(Text(headline(record)))
    if (unfinished := unfinished_note(record, run_dir)) is not None:
        say_whole(console, unfinished)
    table = borderless_table()
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("prompt", overflow="fold", ratio=1, min_width=12)
    table.add_column("axis", no_wrap=True)
    # numbers with their intervals wrap at a space when the terminal is narrow, never cut off
    table.add_column("BAV")
    table.add_column("male - female")
    rows = leaderboard(record)
    places = bav_decimals(rows)
    for ranked in rows:
        row = ranked.row
        lean = with_span(row.lean, row.lean_ci, signed=True)
        bav = "no BAV" if row.bav is None else _bav(row, places)
        table.add_row(ranked.place, Text(row.prompt), Text(row.axis), bav, lean)
    if table.rows:  # a batch stopped before any audit was scored has no leaderboard: the headline says so
        console.print(table)
    for note in notes(record):
        console.print(Text(f"- {note}"))
    failed = [a for a in record.audits if a.status != "completed"]
    shown = audit_statuses(record, run_dir)
    for audit in failed:
        error = f" ({audit.error})" if audit.error else ""
        console.print(Text(f"- {quote(audit.prompt)}: {shown[audit.audit_id]}{error}"))
    if record.status == "completed" and (again := _retryable(record, run_dir)):  # the batch went on past them
        say_whole(console, f"{record.resume_command(run_dir)} tries the {counted(again, 'audit')} that did not "
                           "complete again")
    say_whole(console, run_files_text(run_dir))


def _retryable(record: BatchRecord, run_dir: Path) -> int:
    """How many of the batch's audits did not complete in a way a resume may change (an LLM's plan that stayed
    invalid, a service that failed), read from their own records: one whose settings would fail it again
    (:meth:`~auditor.records.StudyRecord.fails_again_on_resume`) is not counted."""
    from auditor.core.errors import AuditorError
    from auditor.core.store import RECORD_FILE
    from auditor.records import RunRecord, load_record

    count = 0
    for audit in record.audits:
        if audit.status == "completed":
            continue
        try:
            again = load_record(run_dir / audit.folder / RECORD_FILE, RunRecord).fails_again_on_resume()
        except AuditorError:  # an audit folder that cannot be read: a resume would say why
            again = False
        count += not again
    return count


def write_batch_report(record: BatchRecord, run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` (the leaderboard, linking every prompt's own report) atomically."""
    from auditor.reporting.html import write_run_page

    rows = leaderboard(record)
    return write_run_page(
        run_dir,
        "batch.html.j2",
        record=record,
        headline=headline(record),
        unfinished=unfinished_note(record, run_dir),
        intervals=intervals_asked(record.config.scoring),
        rows=rows,
        bav_digits=bav_decimals(rows),
        notes=notes(record),
        no_intervals=no_intervals(record),
        links={audit.audit_id: f"{audit.folder}/{REPORT_FILE}" for audit in record.audits},
        audit_statuses=audit_statuses(record, run_dir),
    )
