"""``auditor plan``: the bias axes, counterfactual prompts and VQA questions for one prompt, nothing generated."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.commands import common

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import AuditPlan, ChatMessage

PLAN_FILE = "plan.json"


def plan(
    text: str = typer.Argument(..., metavar="PROMPT", help="The text-to-image prompt to plan an audit for."),
    llm: str | None = common.LLM,
    max_axes: int | None = typer.Option(None, "--max-axes", min=1, help="Keep the first N axes."),
    max_counterfactuals: int | None = common.MAX_COUNTERFACTUALS,
    llm_retries: int = common.LLM_RETRIES,
    temperature: float | None = common.TEMPERATURE,
    llm_seed: int | None = common.LLM_SEED,
    review: bool = typer.Option(False, "--review", help="Edit the plan ($EDITOR, else interactively) before it is saved."),
    out_dir: Path | None = typer.Option(None, "--out", help="Write plan.json and transcript.json into this folder."),
    json_output: bool = typer.Option(False, "--json", help="Print the plan as one JSON object."),
) -> None:
    """Ask the planner which bias axes the prompt may lean on and write counterfactual prompts for each."""
    from auditor.core.console import notice, print_json
    from auditor.core.errors import AuditorError
    from auditor.planning import check_llm_spec, make_plan, review_plan, transcript_of

    if out_dir is not None:
        _check_out_dir(out_dir)  # before the LLM is paid
    spec = check_llm_spec(common.planner_spec(llm), temperature, llm_seed)
    common.say_offline_fallback(llm, spec, notice)
    try:
        audit_plan = make_plan(
            text,
            spec,
            max_axes=max_axes,
            max_counterfactuals=max_counterfactuals,
            retries=llm_retries,
            temperature=temperature,
            seed=llm_seed,
        )
    except AuditorError as exc:
        transcript = transcript_of(exc)
        if out_dir is not None and transcript:
            saved = _write_transcript(out_dir, transcript)
            raise type(exc)(f"{exc} (transcript saved to {saved})") from None
        raise
    from auditor.reporting.wording import plan_notes

    for note in plan_notes(audit_plan):
        notice(note)
    if review:
        audit_plan = review_plan(audit_plan)
    if out_dir is not None:
        _write_plan(out_dir, audit_plan)
    if json_output:
        print_json(audit_plan.model_dump(mode="json"))
    else:
        _show(audit_plan)


def _check_out_dir(out_dir: Path) -> None:
    """``--out`` names a folder for this plan: not a file, and not a run's folder, whose transcript is its own
    planning conversation (an audit's, perhaps paid for) and would be replaced by this one."""
    from auditor.core.errors import AuditorError
    from auditor.core.store import RECORD_FILE

    if out_dir.exists() and not out_dir.is_dir():
        raise AuditorError(f"--out {out_dir} is a file; give a folder for plan.json and transcript.json")
    if (out_dir / RECORD_FILE).exists():
        raise AuditorError(
            f"--out {out_dir} is a run folder (it holds {RECORD_FILE}), whose transcript.json is its own: "
            "give another folder"
        )


def _write_transcript(out_dir: Path, transcript: list[ChatMessage]) -> Path:
    from pydantic import TypeAdapter

    from auditor.core.store import TRANSCRIPT_FILE, atomic_write_bytes
    from auditor.records import ChatMessage

    path = out_dir / TRANSCRIPT_FILE
    atomic_write_bytes(path, TypeAdapter(list[ChatMessage]).dump_json(transcript, indent=2) + b"\n")
    return path


def _write_plan(out_dir: Path, audit_plan: AuditPlan) -> None:
    from auditor.core.console import notice
    from auditor.core.store import write_model

    write_model(out_dir / PLAN_FILE, audit_plan)
    transcript = _write_transcript(out_dir, audit_plan.transcript)
    notice(f"wrote {out_dir / PLAN_FILE} and {transcript}")


def _show(audit_plan: AuditPlan) -> None:
    """Each axis with its kind and VQA question, then its counterfactuals one per line (never wrapped apart)."""
    from rich.text import Text

    from auditor.core.console import out

    details = [audit_plan.llm]
    if audit_plan.attempts > 1:
        details.append(f"{audit_plan.attempts} replies to the JSON request")
    if audit_plan.edited:
        details.append("edited")
    out.print(Text.assemble(("Plan for: ", "bold"), audit_plan.prompt, f"  ({', '.join(details)})"))
    out.print(Text(f"caption question: {audit_plan.caption_question}", style="dim"))
    for axis in audit_plan.axes:
        out.print()
        kind = f" ({axis.kind or 'kind not given'})  "
        out.print(Text.assemble((axis.name, "bold cyan"), kind, (axis.question, "dim")))
        for number, counterfactual in enumerate(axis.counterfactuals, start=1):
            out.print(Text(f"  {number}. {counterfactual}"), overflow="ignore", crop=False)
    count = sum(len(axis.counterfactuals) for axis in audit_plan.axes)
    out.print()
    axes = "1 axis" if len(audit_plan.axes) == 1 else f"{len(audit_plan.axes)} axes"
    out.print(f"{axes}, {count} counterfactual prompts", markup=False)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
