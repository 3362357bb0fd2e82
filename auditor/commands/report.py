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
    """Show what a run found: axes ranked by how much they lean, CAS per counterfactual, concepts."""
    from auditor.core.console import err
    from auditor.core.settings import get_settings
    from auditor.core.store import RECORD_FILE, RunStore
    from auditor.records import load_record
    from auditor.reporting import render_terminal, report_json, write_html_report

    folder = RunStore(runs_dir or get_settings().runs_dir).resolve(run)
    record = load_record(folder / RECORD_FILE)
    if html:
        path = write_html_report(record, folder)
        (err if json_output else out).print(str(path), markup=False, highlight=False, soft_wrap=True)
    if json_output:
        print_json(report_json(record))
    elif not html:
        render_terminal(record, out)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
