"""``auditor runs``: the runs in the runs folder, newest first."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.commands import common
from auditor.core.console import out, print_json
from auditor.core.runlock import is_running

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import AnyRecord


def runs(
    runs_dir: Path | None = common.RUNS_DIR,
    json_output: bool = typer.Option(False, "--json", help="Print a JSON list."),
) -> None:
    """List runs: id, prompt, date, status and models."""
    from rich.table import Table

    store = common.run_store(runs_dir)
    rows = [
        _row(folder, record) if record is not None else {"run_id": folder.name, "status": "unreadable"}
        for folder, record in store.list_records()
    ]
    if json_output:
        print_json(rows)
        return
    if not rows:
        out.print(f"no runs in {store.root}")
        return
    table = Table()
    table.add_column("run", no_wrap=True)  # the id other commands take: never cut
    for heading in ("prompt", "date", "status", "models"):
        table.add_column(heading)
    for row in rows:
        models = "\n".join(row.get("models", []))
        table.add_row(row["run_id"], row.get("prompt", ""), row.get("created_at", ""), _shown_status(row), models)
    out.print(table)
    if any(_shown_status(row) == "stopped" for row in rows):
        out.print("stopped: the record says running, but no process runs it (killed, or its machine went down)")
    for row in rows:
        if "resume" in row:
            out.print(f"{row['run_id']} ({_shown_status(row)}) continues with: {row['resume']}", markup=False, highlight=False, soft_wrap=True)


def _row(folder: Path, record: AnyRecord) -> dict:
    """One listing row: what was audited, when, how it ended, with which models. A run whose record says
    ``running`` also says whether a process still runs it (``alive``; a killed one's record says ``running``
    too, and the table shows it as stopped); one that is not complete nor alive gets the command that continues
    it."""
    row = {
        "run_id": record.run_id,
        "kind": record.kind,
        "prompt": record.subject(),
        "created_at": record.created_at.isoformat(timespec="seconds"),
        "status": record.status,
        "models": [ref.spec for ref in record.models()],
    }
    if record.status == "running":
        row["alive"] = is_running(folder)
    if record.status != "completed" and not row.get("alive"):
        row["resume"] = f"{record.made_by} --resume {shlex.quote(str(folder))}"
    return row


def _shown_status(row: dict) -> str:
    """The status as the table shows it: a ``running`` record no process holds is a run that was stopped
    without ending (killed, or its machine went down)."""
    if row["status"] == "running" and row.get("alive") is False:
        return "stopped"
    return row["status"]


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)
