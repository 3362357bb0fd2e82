"""The rules every plan obeys, whoever made it: an LLM, the offline planner, or a person (--review).

Proposed axes are tidied (snake_case names, axes that then share a name merged, blank,
repeated and unchanged counterfactuals dropped), capped (``--max-axes``,
``--max-counterfactuals``, the planner's order kept) and checked: at least one axis, and
per axis at least two distinct counterfactuals, none equal to the prompt. Every axis
gets its VQA question (TIBET Table 4). A broken rule is a :class:`PlanProblem` whose
message can go back to the LLM in a repair turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from auditor.core.errors import AuditorError, InvalidPlanError
from auditor.core.text import first_few, single_spaced, text_key
from auditor.planning.proposals import PlanProblem, ProposedAxis, snake_case
from auditor.planning.questions import caption_question, question_for_axis
from auditor.records import AuditPlan, AxisPlan, ChatMessage

_MAX_PROBLEMS_SHOWN = 3


@dataclass(frozen=True)
class PlanLimits:
    """Caps on the plan (first N in the planner's order) and the repair turns allowed."""

    max_axes: int | None = None
    max_counterfactuals: int | None = None
    retries: int = 2

    def __post_init__(self) -> None:
        if self.max_axes is not None and self.max_axes < 1:
            raise AuditorError(f"--max-axes must be at least 1 (got {self.max_axes})")
        if self.max_counterfactuals is not None and self.max_counterfactuals < 2:
            raise AuditorError(
                f"--max-counterfactuals must be at least 2, since an axis varies over two or more "
                f"counterfactuals (got {self.max_counterfactuals})"
            )
        if self.retries < 0:
            raise AuditorError(f"--llm-retries must be 0 or more (got {self.retries})")


def attach_transcript(error: AuditorError, messages: Sequence[ChatMessage]) -> AuditorError:
    """Give ``error`` a ``transcript`` attribute (the conversation so far) for the caller to save."""
    error.transcript = list(messages)  # type: ignore[attr-defined]
    return error


def tidy_axes(prompt: str, proposed: Sequence[ProposedAxis]) -> list[ProposedAxis]:
    """snake_case names (axes that then share a name are merged), stripped counterfactuals,
    with blank ones, repeats within an axis and copies of the original prompt dropped."""
    merged: dict[str, ProposedAxis] = {}
    for axis in proposed:
        name = snake_case(axis.name)
        target = merged.setdefault(name, ProposedAxis(name, [], axis.kind))
        target.kind = target.kind or axis.kind
        target.counterfactuals += axis.counterfactuals
    for axis in merged.values():
        seen = {text_key(prompt)}
        kept = []
        for text in (t.strip() for t in axis.counterfactuals):
            if text and text_key(text) not in seen:
                seen.add(text_key(text))
                kept.append(text)
        axis.counterfactuals = kept
    return list(merged.values())


def limit_axes(axes: Sequence[ProposedAxis], limits: PlanLimits) -> list[ProposedAxis]:
    """The first ``max_axes`` axes with their first ``max_counterfactuals`` counterfactuals."""
    kept = list(axes)[: limits.max_axes] if limits.max_axes else list(axes)
    cap = limits.max_counterfactuals
    return [ProposedAxis(a.name, a.counterfactuals[:cap] if cap else list(a.counterfactuals), a.kind) for a in kept]


def plan_problems(prompt: str, axes: Sequence[ProposedAxis]) -> list[str]:
    """Every way ``axes`` break the rules: at least one axis with a name, names distinct, and per
    axis at least two non-empty, distinct counterfactuals, none equal to the original prompt."""
    problems = [] if axes else ["the plan has no axes"]
    original = text_key(prompt)
    names: set[str] = set()
    for axis in axes:
        name = snake_case(axis.name)
        label = name or axis.name
        if not name:
            problems.append(f"axis {axis.name!r} has no usable name")
        elif name in names:
            problems.append(f"axis '{name}' appears twice")
        names.add(name)
        seen: set[str] = set()
        for text in axis.counterfactuals:
            key = text_key(text)
            if not key:
                problems.append(f"axis '{label}' has an empty counterfactual")
            elif key == original:
                problems.append(f"a counterfactual of axis '{label}' is the original prompt itself")
            elif key in seen:
                problems.append(f"axis '{label}' repeats the counterfactual {text.strip()!r}")
            seen.add(key)
        count = len(axis.counterfactuals)
        if count < 2:
            has = "no counterfactuals" if count == 0 else "only 1 counterfactual"
            problems.append(f"axis '{label}' has {has}; every axis needs at least two different ones")
    return problems


def checked_axes(prompt: str, axes: Sequence[ProposedAxis], questions: dict[str, str] | None = None) -> list[AxisPlan]:
    """AxisPlans with snake_case names and their VQA questions (given ones win); PlanProblem on any rule broken."""
    problems = plan_problems(prompt, axes)
    if problems:
        raise PlanProblem(first_few(problems, _MAX_PROBLEMS_SHOWN, separator="; "))
    built = []
    for axis in axes:
        name = snake_case(axis.name)
        question = ((questions or {}).get(axis.name) or "").strip() or question_for_axis(name)
        counterfactuals = [text.strip() for text in axis.counterfactuals]
        built.append(AxisPlan(name=name, kind=axis.kind, counterfactuals=counterfactuals, question=question))
    return built


def finish_plan(
    prompt: str,
    proposed: Sequence[ProposedAxis],
    limits: PlanLimits,
    *,
    llm: str,
    transcript: Sequence[ChatMessage],
    attempts: int = 1,
    temperature: float | None = None,
    seed: int | None = None,
) -> AuditPlan:
    """Tidy, cap and check proposed axes into an AuditPlan; PlanProblem when they break a rule."""
    axes = checked_axes(prompt, limit_axes(tidy_axes(prompt, proposed), limits))
    return AuditPlan(
        prompt=prompt,
        axes=axes,
        caption_question=caption_question(),
        llm=llm,
        llm_temperature=temperature,
        llm_seed=seed,
        attempts=attempts,
        transcript=list(transcript),
    )


def validate_plan(plan: AuditPlan) -> AuditPlan:
    """Check a plan again: names to snake_case, the rules, questions filled in (InvalidPlanError)."""
    proposed = [ProposedAxis(axis.name, list(axis.counterfactuals), axis.kind) for axis in plan.axes]
    return checked_plan(plan, proposed, {axis.name: axis.question for axis in plan.axes}, plan.caption_question)


def checked_plan(
    plan: AuditPlan, axes: Sequence[ProposedAxis], questions: dict[str, str], caption: str
) -> AuditPlan:
    """``plan`` with these axes, their questions and this caption question, after every rule (a person's edit
    goes through here too); InvalidPlanError saying which rule is broken."""
    try:
        checked = checked_axes(plan.prompt, axes, questions)
    except PlanProblem as problem:
        raise InvalidPlanError(f"invalid plan: {problem}") from None
    check_caption_question(checked, caption)
    return plan.model_copy(update={"axes": checked, "caption_question": caption})


def check_caption_question(axes: Sequence[AxisPlan], caption: str) -> None:
    """InvalidPlanError when an axis asks the caption question: that question is asked with the
    caption's template and length, so the axis would get a caption for its answers."""
    words = single_spaced(caption).lower()
    for axis in axes:
        if single_spaced(axis.question).lower() == words:
            raise InvalidPlanError(f"invalid plan: axis '{axis.name}' asks the caption question; give it its own")
