"""``auditor report``: the report of a stored run, in the terminal, as JSON or as HTML."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.core.console import out, print_json

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import TraceRecord


def report(
    run: str = typer.Argument(..., help="Run id (looked up in the runs folder), run folder, or record.json path."),
    html: bool = typer.Option(False, "--html", help="(Re)write report.html in the run folder and print its path."),
    json_output: bool = typer.Option(False, "--json", help="Print the report's content as JSON, without colour codes."),
    runs_dir: Path | None = typer.Option(None, "--runs-dir", help="Runs folder (default: AUDITOR_RUNS_DIR or ./runs)."),
) -> None:
    """Show what a run found: axes ranked by lean, CAS per counterfactual, concepts; or a trace's tables."""
    from auditor.core.console import err
    from auditor.core.settings import get_settings
    from auditor.core.store import RECORD_FILE, RunStore
    from auditor.records import RunRecord, TraceRecord, load_any_record, load_record
    from auditor.reporting import render_terminal, report_json, write_html_report

    folder = RunStore(runs_dir or get_settings().runs_dir).resolve(run)
    record = load_any_record(folder / RECORD_FILE)
    if isinstance(record, TraceRecord):
        _trace_report(record, folder, html, json_output)
        return
    if not isinstance(record, RunRecord):
        load_record(folder / RECORD_FILE)  # one line naming the kind and the command that reports it
    if html:
        path = write_html_report(record, folder)
        (err if json_output else out).print(str(path), markup=False, highlight=False, soft_wrap=True)
    if json_output:
        print_json(report_json(record))
    elif not html:
        render_terminal(record, out)


def _trace_report(record: TraceRecord, folder: Path, html: bool, json_output: bool) -> None:
    """The same three outputs for a prompt-to-image trace (``auditor trace``)."""
    from auditor.core.console import err
    from auditor.reporting.trace import render_trace, trace_json, write_trace_report

    if html:
        path = write_trace_report(record, folder)
        (err if json_output else out).print(str(path), markup=False, highlight=False, soft_wrap=True)
    if json_output:
        print_json(trace_json(record, folder))
    elif not html:
        render_trace(record, folder, out)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
