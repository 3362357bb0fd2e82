"""``auditor report``: the report of a stored run, in the terminal, as JSON or as HTML."""

from __future__ import annotations

from pathlib import Path

import typer

from auditor.core.console import out, print_json


def report(
    run: str = typer.Argument(..., help="Run id (looked up in the runs folder), run folder, or record.json path."),
    html: bool = typer.Option(False, "--html", help="(Re)write report.html in the run folder and print its path."),
    json_output: bool = typer.Option(False, "--json", help="Print the report's content as JSON, without colour codes."),
    runs_dir: Path | None = typer.Option(None, "--runs-dir", help="Runs folder (default: AUDITOR_RUNS_DIR or ./runs)."),
) -> None:
    """Show what a run found: axes ranked by how much they lean, CAS per counterfactual, concepts
    (for a batch or an exploration: its leaderboard)."""
    from auditor.core.console import err
    from auditor.core.settings import get_settings
    from auditor.core.store import RECORD_FILE, RunStore
    from auditor.records import BatchRecord, ExploreRecord, RunRecord, load_any_record, load_record
    from auditor.reporting import render_terminal, report_json, write_html_report

    folder = RunStore(runs_dir or get_settings().runs_dir).resolve(run)
    found = load_any_record(folder / RECORD_FILE)
    if isinstance(found, (BatchRecord, ExploreRecord)):
        _leaderboard_report(found, folder, html=html, json_output=json_output)
        return
    record = load_record(folder / RECORD_FILE, RunRecord)
    if html:
        path = write_html_report(record, folder)
        (err if json_output else out).print(str(path), markup=False, highlight=False, soft_wrap=True)
    if json_output:
        print_json(report_json(record))
    elif not html:
        render_terminal(record, out)


def _leaderboard_report(record, folder: Path, *, html: bool, json_output: bool) -> None:
    """A batch's or an exploration's report: its leaderboard in the terminal, as JSON or as HTML."""
    from auditor.core.console import err
    from auditor.records import BatchRecord
    from auditor.reporting import batch as batch_report
    from auditor.reporting import explore as explore_report

    if isinstance(record, BatchRecord):
        write, as_json, render = batch_report.write_batch_report, batch_report.batch_json, batch_report.render_batch
    else:
        write, as_json, render = explore_report.write_explore_report, explore_report.explore_json, explore_report.render_explore
    if html:
        path = write(record, folder)
        (err if json_output else out).print(str(path), markup=False, highlight=False, soft_wrap=True)
    if json_output:
        print_json(as_json(record, folder))
    elif not html:
        render(record, folder, out)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
