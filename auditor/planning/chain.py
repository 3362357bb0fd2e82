"""The TIBET planning chain and the checks every plan passes, from an LLM, offline or edited.

The chain is one conversation of three user turns (paper Appendix 8.1; the templates
are data in ``prompts/planning/tibet_chain.yaml``). The last reply is read with
:func:`~auditor.planning.extract.extract_axes`, tidied (snake_case names, blank,
repeated and unchanged counterfactuals dropped), capped and checked. When that fails,
the problem goes back to the LLM in the same conversation and it answers again, at most
``retries`` times; then :class:`~auditor.core.errors.InvalidPlanError` carries the whole
transcript so the caller can save it. Errors from the backend carry the transcript so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

from auditor.core.errors import AuditorError, InvalidPlanError
from auditor.core.redaction import redact
from auditor.core.resources import read_prompt_yaml
from auditor.planning.extract import PlanProblem, ProposedAxis, extract_axes, snake_case
from auditor.planning.questions import caption_question, question_for_axis
from auditor.records import AuditPlan, AxisPlan, ChatMessage

if TYPE_CHECKING:  # pragma: no cover
    from auditor.planning.llm import ChatModel

CHAIN_FILE = "planning/tibet_chain.yaml"
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


class Planner(Protocol):
    """What the ``--llm`` registry's loaders return."""

    spec: str

    def plan(self, prompt: str, limits: PlanLimits) -> AuditPlan:
        """The validated plan for ``prompt``; InvalidPlanError (with ``.transcript``) when there is none."""
        ...


@lru_cache(maxsize=1)
def chain_templates() -> dict:
    """``{"turns": [three user turns], "repair": template}`` with ``{prompt}``/``{error}`` placeholders."""
    return read_prompt_yaml(CHAIN_FILE)


def _fill(template: str, **values: str) -> str:
    # str.replace, not str.format: prompts and errors may contain braces.
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


def attach_transcript(error: AuditorError, messages: Sequence[ChatMessage]) -> AuditorError:
    """Give ``error`` a ``transcript`` attribute (the conversation so far) for the caller to save."""
    error.transcript = list(messages)  # type: ignore[attr-defined]
    return error


class ChainPlanner:
    """The three-turn TIBET chain over any :class:`~auditor.planning.llm.ChatModel`."""

    def __init__(self, chat: ChatModel):
        self.chat = chat
        self.spec = chat.spec

    def plan(self, prompt: str, limits: PlanLimits) -> AuditPlan:
        templates = chain_templates()
        messages: list[ChatMessage] = []
        turns = templates["turns"]
        for index, turn in enumerate(turns):
            messages.append(ChatMessage(role="user", content=_fill(turn, prompt=prompt)))
            reply = self._ask(messages, json_mode=index == len(turns) - 1)
        attempts = 1
        while True:
            try:
                return finish_plan(
                    prompt,
                    extract_axes(reply),
                    limits,
                    llm=self.spec,
                    transcript=messages,
                    attempts=attempts,
                    temperature=self.chat.temperature,
                    seed=self.chat.seed,
                )
            except PlanProblem as problem:
                if attempts > limits.retries:
                    replies = "reply" if attempts == 1 else "replies"
                    error = InvalidPlanError(
                        f"the LLM gave no valid plan in {attempts} {replies} to the JSON request "
                        f"(--llm-retries {limits.retries}): {problem}"
                    )
                    raise attach_transcript(error, messages) from None
                repair = _fill(templates["repair"], prompt=prompt, error=str(problem))
                messages.append(ChatMessage(role="user", content=repair))
                reply = self._ask(messages, json_mode=True)
                attempts += 1

    def _ask(self, messages: list[ChatMessage], *, json_mode: bool) -> str:
        try:
            reply = self.chat.complete(messages, json_mode=json_mode)
        except AuditorError as error:
            raise attach_transcript(error, messages)
        reply = redact(reply)  # a server may echo the key back: it never reaches the plan or the transcript
        messages.append(ChatMessage(role="assistant", content=reply))
        return reply


# --------------------------------------------------------------------------- validation


def _key(text: str) -> str:
    """Comparison key: case- and whitespace-insensitive."""
    return " ".join(text.split()).casefold()


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
        seen = {_key(prompt)}
        kept = []
        for text in (t.strip() for t in axis.counterfactuals):
            if text and _key(text) not in seen:
                seen.add(_key(text))
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
    original = _key(prompt)
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
            key = _key(text)
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


def _summary(problems: list[str]) -> str:
    shown = "; ".join(problems[:_MAX_PROBLEMS_SHOWN])
    more = len(problems) - _MAX_PROBLEMS_SHOWN
    return shown + (f" (and {more} more)" if more > 0 else "")


def checked_axes(prompt: str, axes: Sequence[ProposedAxis], questions: dict[str, str] | None = None) -> list[AxisPlan]:
    """AxisPlans with snake_case names and their VQA questions (given ones win); PlanProblem on any rule broken."""
    problems = plan_problems(prompt, axes)
    if problems:
        raise PlanProblem(_summary(problems))
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
    """Check a plan again (after a person edited it): names to snake_case, the rules, questions filled in."""
    proposed = [ProposedAxis(axis.name, list(axis.counterfactuals), axis.kind) for axis in plan.axes]
    try:
        axes = checked_axes(plan.prompt, proposed, {axis.name: axis.question for axis in plan.axes})
    except PlanProblem as problem:
        raise InvalidPlanError(f"invalid plan: {problem}") from None
    return plan.model_copy(update={"axes": axes})
