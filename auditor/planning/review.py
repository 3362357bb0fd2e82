"""``--review``: a person drops, renames or adds axes and counterfactuals before anything is generated.

With ``$VISUAL`` or ``$EDITOR`` set, the plan opens there as YAML (an invalid edit reopens
with the error on top, a few times at most, and one given up on is kept as a draft that the
next review opens; an emptied file cancels). Without an editor,
an interactive prompt walks through the axes. Either way the result is checked with the
same rules as an LLM's plan and marked ``edited`` when anything changed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from rich.text import Text

from auditor.core.console import err
from auditor.core.errors import AuditorError, InvalidEditError, InvalidPlanError, ReviewCancelled
from auditor.core.store import read_text_file
from auditor.core.text import single_spaced
from auditor.planning.proposals import ProposedAxis
from auditor.planning.questions import caption_question
from auditor.planning.rules import checked_plan
from auditor.records import AuditPlan, AxisPlan

#: How often an invalid edit is sent back to the person before giving up.
MAX_EDITS = 5
_KINDS = ("societal", "incidental")
#: The keys an edited plan, and each of its axes, may have: a misspelt one would otherwise be dropped in silence.
_PLAN_KEYS = ("caption_question", "axes")
_AXIS_KEYS = ("name", "kind", "question", "counterfactuals")


def review_plan(plan: AuditPlan, draft: Path | None = None) -> AuditPlan:
    """The plan after a person reviewed it (in ``$VISUAL``/``$EDITOR``, else interactively), validated. ``draft``
    (a run's) keeps an invalid edit the review gave up on, so the person's work is not lost: the next review opens
    it instead of the plan."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    reviewed = _review_in_editor(plan, editor, draft) if editor else _review_interactively(plan)
    changed = reviewed.axes != plan.axes or reviewed.caption_question != plan.caption_question
    return reviewed.model_copy(update={"edited": plan.edited or changed})


# --------------------------------------------------------------------------- YAML in an editor


def plan_to_yaml(plan: AuditPlan) -> str:
    """The editable part of a plan as commented YAML."""
    header = (
        f"# Review the audit plan for: {plan.prompt}\n"
        f"# Planner: {plan.llm}. Drop, rename or add axes and counterfactuals, then save and quit.\n"
        "# Every axis needs at least two different counterfactuals; kind is societal, incidental or null.\n"
        "# Delete an axis's question line to get the default question for its name. An empty file cancels.\n"
    )
    body = {
        "caption_question": plan.caption_question,
        "axes": [
            {"name": a.name, "kind": a.kind, "question": a.question, "counterfactuals": list(a.counterfactuals)}
            for a in plan.axes
        ],
    }
    return header + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=1000)


def plan_from_yaml(plan: AuditPlan, text: str) -> AuditPlan:
    """Apply an edited YAML plan to ``plan``; InvalidEditError saying what is wrong."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidEditError(f"the edited plan is not valid YAML: {single_spaced(str(exc))}") from None
    if data is None:
        raise ReviewCancelled
    if not isinstance(data, dict) or not isinstance(data.get("axes"), list):
        raise InvalidEditError("the edited plan needs an 'axes:' list")
    _refuse_unknown_keys(data, _PLAN_KEYS, "the edited plan")
    caption = data.get("caption_question")
    if caption is not None and not isinstance(caption, str):
        raise InvalidEditError(f"caption_question must be text, or deleted for the default (got {caption!r})")
    axes = [_axis_from_yaml(entry, index) for index, entry in enumerate(data["axes"], start=1)]
    questions = {name: question for name, question, _ in axes if question}
    return _with_axes(plan, [axis for _, _, axis in axes], questions, caption)


def _refuse_unknown_keys(data: dict, known: tuple[str, ...], where: str) -> None:
    """An :class:`InvalidEditError` naming the keys of ``data`` not in ``known``: a misspelt key would otherwise be
    read as absent, and its edit lost without a word."""
    unknown = [str(key) for key in data if key not in known]
    if unknown:
        raise InvalidEditError(
            f"{where} has unknown key{'s' if len(unknown) > 1 else ''} {', '.join(repr(k) for k in unknown)}: "
            f"use {', '.join(known)}"
        )


def _axis_from_yaml(entry: Any, index: int) -> tuple[str, str | None, ProposedAxis]:
    if not isinstance(entry, dict) or entry.get("name") is None:
        raise InvalidEditError(f"axis {index} of the edited plan needs a 'name:'")
    if not isinstance(entry["name"], str):
        raise InvalidEditError(f"axis {index} of the edited plan: its name must be text (got {entry['name']!r})")
    name = entry["name"]
    _refuse_unknown_keys(entry, _AXIS_KEYS, f"axis '{name}'")
    kind = entry.get("kind")
    if kind is not None and kind not in _KINDS:
        raise InvalidEditError(f"axis '{name}': kind must be societal, incidental or null (got {kind!r})")
    counterfactuals = entry.get("counterfactuals") or []
    if not isinstance(counterfactuals, list) or not all(isinstance(c, str) for c in counterfactuals):
        raise InvalidEditError(f"axis '{name}': counterfactuals must be a list of prompts")
    question = entry.get("question")
    if question is not None and not isinstance(question, str):
        raise InvalidEditError(f"axis '{name}': question must be text, or deleted for the default (got {question!r})")
    return name, question, ProposedAxis(name, counterfactuals, kind)


def _with_axes(
    plan: AuditPlan, axes: list[ProposedAxis], questions: dict[str, str], caption: str | None = None
) -> AuditPlan:
    caption = caption.strip() if caption and caption.strip() else caption_question()
    try:
        return checked_plan(plan, axes, questions, caption)
    except InvalidPlanError as exc:  # the person's edit, not an LLM's plan, breaks the rule: bad input
        raise InvalidEditError(str(exc)) from None


def _review_in_editor(plan: AuditPlan, editor: str, draft: Path | None) -> AuditPlan:
    text = read_text_file(draft) if draft is not None and draft.is_file() else plan_to_yaml(plan)
    try:
        reviewed = _edit(plan, editor, text)
    except InvalidEditError as exc:
        if draft is None:
            raise
        from auditor.core.store import atomic_write_text

        atomic_write_text(draft, exc.edited)
        raise InvalidEditError(f"{exc}; the edit is kept in {draft}, and the next review opens it") from None
    except ReviewCancelled:  # the person chose to stop: the next review starts from the plan again
        if draft is not None:
            draft.unlink(missing_ok=True)
        raise
    if draft is not None:
        draft.unlink(missing_ok=True)
    return reviewed


def _edit(plan: AuditPlan, editor: str, text: str) -> AuditPlan:
    """``text`` edited until it is a valid plan; an :class:`InvalidEditError` carrying the last edit (``.edited``,
    with the error on top) where the person cannot be asked again."""
    with tempfile.TemporaryDirectory(prefix="auditor-review-") as folder:
        path = Path(folder) / "plan.yaml"
        for attempt in range(1, MAX_EDITS + 1):
            path.write_text(text, encoding="utf-8")
            try:
                status = subprocess.run([*shlex.split(editor), str(path)]).returncode
            except OSError as exc:
                raise AuditorError(f"--review could not start the editor {editor!r}: {exc.strerror or exc}") from None
            if status != 0:
                raise AuditorError(f"--review: the editor {editor!r} exited with status {status}; plan not changed")
            edited = read_text_file(path)
            try:
                return plan_from_yaml(plan, edited)
            except InvalidEditError as exc:
                kept = "".join(line for line in edited.splitlines(keepends=True) if not line.startswith("# error:"))
                text = f"# error: {exc}\n{kept}"
                if attempt == MAX_EDITS or not sys.stdin.isatty():
                    exc.edited = text
                    raise
                err.print(Text.assemble((str(exc), "red"), ": opening the plan again"))
    raise AssertionError("unreachable")  # pragma: no cover


# --------------------------------------------------------------------------- interactive


def _ask(question: str, *, default: str = "", choices: list[str] | None = None) -> str:
    from rich.prompt import Prompt

    try:
        return Prompt.ask(question, console=err, default=default, choices=choices, show_default=bool(default))
    except EOFError:
        raise AuditorError("--review: the input ended before the review was finished") from None


def _ask_lines(title: str) -> list[str]:
    """Lines typed one per line, ended by an empty line."""
    err.print(f"{title} (one per line, an empty line ends):")
    lines = []
    while line := _ask("  ").strip():
        lines.append(line)
    return lines


def _show(axis: AxisPlan | ProposedAxis, index: int, total: int) -> None:
    err.print(Text.assemble("\n", (f"axis {index}/{total}: {axis.name}", "bold"), f" ({axis.kind or 'kind not given'})"))
    if isinstance(axis, AxisPlan):
        err.print(f"  question: {axis.question}", markup=False)
    for number, text in enumerate(axis.counterfactuals, start=1):
        err.print(f"  {number}. {text}", markup=False)


def _review_interactively(plan: AuditPlan) -> AuditPlan:
    """Keep, drop, rename or rewrite each axis, then add new ones; asked again while the result is invalid."""
    current = plan
    for attempt in range(1, MAX_EDITS + 1):
        err.print(f"Review the plan for: {plan.prompt}", markup=False)
        kept: list[ProposedAxis] = []
        questions: dict[str, str] = {}
        for index, axis in enumerate(current.axes, start=1):
            _show(axis, index, len(current.axes))
            action = _ask("keep, drop, rename or edit?", default="keep", choices=["keep", "drop", "rename", "edit"])
            if action == "drop":
                continue
            name = _ask("new name", default=axis.name) if action == "rename" else axis.name
            counterfactuals = list(axis.counterfactuals)
            if action == "edit":
                counterfactuals = _ask_lines("counterfactuals") or counterfactuals
            kept.append(ProposedAxis(name, counterfactuals, axis.kind))
            if name == axis.name:
                questions[name] = axis.question
        while _ask("add an axis?", default="no", choices=["yes", "no"]) == "yes":
            name = _ask("axis name")
            kept.append(ProposedAxis(name, _ask_lines(f"counterfactuals of {name}")))
        try:
            return _with_axes(current, kept, questions, current.caption_question)
        except InvalidEditError as exc:
            if attempt == MAX_EDITS:
                raise
            err.print(Text.assemble((str(exc), "red"), ": review again"))
    raise AssertionError("unreachable")  # pragma: no cover
