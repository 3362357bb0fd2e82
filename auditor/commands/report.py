"""``auditor report``: the report of a stored run, in the terminal, as JSON or as HTML."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.commands import common
from auditor.core.console import out, print_json, say_whole

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import StudyRecord


def report(
    run: str = typer.Argument(
        ..., metavar="RUN", help="Run id (looked up in the runs folder), run folder, or record.json path."
    ),
    html: bool = typer.Option(False, "--html", help="(Re)write report.html in the run folder and print its path."),
    json_output: bool = typer.Option(False, "--json", help="Print the report's content as JSON, without colour codes."),
    runs_dir: Path | None = common.RUNS_DIR,
) -> None:
    """Show what a run found: axes ranked by how much they lean, CAS per counterfactual, concepts
    (for a batch or an exploration: its leaderboard; for a trace: its tables; a T2IAT or amplification run as
    its own report command shows it)."""
    from auditor.records import load_any_record

    folder = common.run_store(runs_dir).resolve(run)
    show_stored(folder, load_any_record, html=html, json_output=json_output)


def show_stored(folder: Path, load: Callable[[Path], StudyRecord], *, html: bool, json_output: bool) -> None:
    """A stored run of any kind (its record read by ``load``), as every ``report`` command shows it: with ``html``,
    report.html written again and its path printed (on stderr when ``json_output`` puts JSON on stdout); the JSON
    (with ``next_step`` for a run that did not complete and runs no more); or else the terminal report.

    The page is written holding the run's lock, refused while a process runs it: a run that ended between the read
    of its record and the write would have its own page replaced by one of the record as it was before."""
    from auditor.core.runlock import held_while_read
    from auditor.core.store import RECORD_FILE

    why = f"it writes its report.html when it ends (`auditor report {folder}` without --html shows it now)"
    with held_while_read(folder, "writing its page: auditor report --html", why) if html else nullcontext():
        _show(load(folder / RECORD_FILE), folder, html=html, json_output=json_output)


def _show(record: StudyRecord, folder: Path, *, html: bool, json_output: bool) -> None:
    from auditor.core.console import err
    from auditor.core.store import RECORD_FILE
    from auditor.reporting.status import STOPPED_MEANING, running_now

    alive = running_now(record, folder)
    if alive is False:  # a running record no process holds: its report would read "running"
        how = record.resume_command(folder)
        say_whole(err, f"note: run {folder.name} was stopped: {STOPPED_MEANING}; continue it with: {how}")
    write, as_json, render = _outputs(record, folder / RECORD_FILE)
    if html:
        path = write(record, folder)
        say_whole(err if json_output else out, str(path))
    if json_output:  # a running record says whether a process runs it, as `auditor runs --json` does
        data = as_json(record, folder) | ({"alive": alive} if alive is not None else {})
        if record.status != "completed" and alive is not True and "next_step" not in data:
            from auditor.reporting.sentences import next_step

            data["next_step"] = next_step(record, folder)  # what the terminal says goes on from it, for every kind
        print_json(data)
    elif not html:
        render(record, folder, out)


def _outputs(record: StudyRecord, path: Path) -> tuple[Callable, Callable, Callable]:
    """The HTML writer ``(record, folder)``, JSON builder ``(record, folder)`` and terminal renderer
    ``(record, folder, console)`` of the record's kind (a T2IAT or amplification run shown as its own ``report``
    command shows it)."""
    from auditor.records import (
        AmplificationRecord,
        BatchRecord,
        ExploreRecord,
        OccupationsRecord,
        RunRecord,
        T2IATRecord,
        TraceRecord,
        load_record,
    )
    from auditor.reporting import batch, explore, render_terminal, report_json, trace, write_html_report

    if isinstance(record, T2IATRecord | OccupationsRecord):
        from auditor.reporting import t2iat
        from auditor.reporting.t2iat_html import write_t2iat_report

        if isinstance(record, T2IATRecord):
            return write_t2iat_report, t2iat.test_run_json, t2iat.render_test_run
        return write_t2iat_report, t2iat.occupations_json, t2iat.render_occupations
    if isinstance(record, AmplificationRecord):
        from auditor.reporting import amplification

        return amplification.write_amplification_html, amplification.amplification_json, amplification.render_amplification
    if isinstance(record, BatchRecord):
        return batch.write_batch_report, batch.batch_json, batch.render_batch
    if isinstance(record, ExploreRecord):
        return explore.write_explore_report, explore.explore_json, explore.render_explore
    if isinstance(record, TraceRecord):
        return trace.write_trace_report, trace.trace_json, trace.render_trace
    load_record(path, RunRecord)  # a kind added later and not reported here: one line, not a traceback
    return write_html_report, report_json, render_terminal


def register(app: typer.Typer) -> None:
    app.command("report")(report)
