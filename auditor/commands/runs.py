"""``auditor runs``: the runs in the runs folder, newest first."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.commands import common
from auditor.core.console import out, print_json, say_whole

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import AnyRecord


def runs(
    runs_dir: Path | None = common.RUNS_DIR,
    json_output: bool = typer.Option(False, "--json", help="Print a JSON list."),
) -> None:
    """List runs: id, prompt, date, status and models (each with its role: llm, t2i, vqa, embedder)."""
    from rich.padding import Padding
    from rich.text import Text

    from auditor.reporting.status import STOPPED_MEANING

    store = common.run_store(runs_dir)
    rows = [
        _row(folder, record) if record is not None else {"run_id": folder.name, "status": "unreadable", "why": why}
        for folder, record, why in store.list_records()
    ]
    if json_output:
        print_json(rows)
        return
    if not rows:
        say_whole(out, f"no runs in {store.root}")
        return
    # One block per run, not a table: a default id (date, time and prompt) takes half an 80-column terminal, and
    # a table's columns would cut the prompt, the date or a model's path beside it.
    for row in rows:
        head = Text(row["run_id"], style="bold")  # the id other commands take: never cut
        started = row.get("created_at", "")[:16].replace("T", " ")  # to the minute: this is for finding a run
        head.append(f"  {_shown_status(row)}" + (f"  started {started} UTC" if started else ""))
        say_whole(out, head)
        if about := row.get("prompt") or row.get("why"):
            out.print(Padding(Text(about), (0, 0, 0, 2), expand=False))
        models = row.get("models", [])
        width = max((len(model["role"]) for model in models), default=0)
        for model in models:  # a local path whole, not broken mid-word
            say_whole(out, Text(f"  {model['role']:<{width}}  {model['spec']}", style="dim"))
    if any(_shown_status(row) == "stopped" for row in rows):
        out.print(f"stopped: {STOPPED_MEANING}")
    for row in rows:
        if "resume" in row:
            say_whole(out, f"{row['run_id']} ({_shown_status(row)}) continues with: {row['resume']}")


def _row(folder: Path, record: AnyRecord) -> dict:
    """One listing row: what was audited, when, how it ended, with which models. A run whose record says
    ``running`` also says whether a process still runs it (``alive``; a killed one's record says ``running``
    too, and the listing shows it as stopped); one that is not complete nor alive gets the command that continues
    it, unless it failed in a way a resume would repeat."""
    from auditor.core.runlock import is_running

    row = {
        "run_id": folder.name,  # what other commands take (a copied or renamed run's record keeps its first id)
        "kind": record.kind,
        "prompt": record.subject(),
        "created_at": record.created_at.isoformat(timespec="seconds"),
        "status": record.status,
        "models": _models(record),
    }
    if record.status == "running":
        row["alive"] = is_running(folder)
    if record.status != "completed" and not row.get("alive") and not record.fails_again_on_resume():
        row["resume"] = record.resume_command(folder)
    return row


def _models(record: AnyRecord) -> list[dict[str, str]]:
    """The run's models with their roles, the planner first where the study has one (a spec, not a loaded model)."""
    planner = getattr(record.config, "llm", None)  # prompt audits, batches and explorations plan with an LLM
    models = [{"role": "llm", "spec": planner}] if planner is not None else []
    return models + [{"role": role, "spec": ref.spec} for role, ref in record.models_by_role()]


def _shown_status(row: dict) -> str:
    """The status as the listing shows it (:func:`~auditor.reporting.status.shown_status`)."""
    from auditor.reporting.status import shown_status

    return shown_status(row["status"], row.get("alive"))


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)
