"""``auditor runs``: the runs in the runs folder, newest first."""

from __future__ import annotations

from pathlib import Path

import typer

from auditor.console import out, print_json


def runs(
    runs_dir: Path | None = typer.Option(None, "--runs-dir", help="Runs folder (default: AUDITOR_RUNS_DIR or ./runs)."),
    json_output: bool = typer.Option(False, "--json", help="Print a JSON list."),
) -> None:
    """List runs: id, prompt, date, status and models."""
    from rich.table import Table

    from auditor.settings import get_settings
    from auditor.store import RunStore

    store = RunStore(runs_dir or get_settings().runs_dir)
    rows = []
    for folder, record in store.list_records():
        if record is None:
            rows.append({"run_id": folder.name, "status": "unreadable"})
            continue
        rows.append(
            {
                "run_id": record.run_id,
                "prompt": record.config.prompt,
                "created_at": record.created_at.isoformat(timespec="seconds"),
                "status": record.status,
                "t2i": record.config.t2i.spec,
                "vqa": record.config.vqa.spec,
            }
        )
    if json_output:
        print_json(rows)
        return
    if not rows:
        out.print(f"no runs in {store.root}")
        return
    table = Table("run", "prompt", "date", "status", "models")
    for row in rows:
        models = f"{row['t2i']}\n{row['vqa']}" if "t2i" in row else ""
        table.add_row(row["run_id"], row.get("prompt", ""), row.get("created_at", ""), row["status"], models)
    out.print(table)


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)
