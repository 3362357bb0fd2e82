"""Planning: which bias axes to audit for a prompt, and the counterfactual prompts of each.

``make_plan`` runs the TIBET chain on an LLM (``openai:<model>``,
``langchain:<provider>:<model>``) or the offline WordNet planner (``offline``) and returns
a validated :class:`~auditor.records.AuditPlan`. Importing this package is cheap: the
SDKs and WordNet load only when a plan is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from auditor.core.errors import AuditorError
from auditor.core.text import has_visible_text, refuse_control_characters, single_spaced
from auditor.planning.questions import question_for_axis
from auditor.planning.registry import LLM_BACKENDS, check_llm_spec, planner_fingerprint
from auditor.planning.review import review_plan
from auditor.planning.rules import PlanLimits, validate_plan
from auditor.records import AuditPlan, ChatMessage

if TYPE_CHECKING:  # pragma: no cover
    from auditor.planning.turns import TurnCache

__all__ = [
    "LLM_BACKENDS",
    "check_llm_spec",
    "make_plan",
    "planner_fingerprint",
    "question_for_axis",
    "review_plan",
    "transcript_of",
    "validate_plan",
]


def make_plan(
    prompt: str,
    llm: str,
    *,
    max_axes: int | None = None,
    max_counterfactuals: int | None = None,
    retries: int = 2,
    temperature: float | None = None,
    seed: int | None = None,
    axes: Sequence[str] | None = None,
    turns: TurnCache | None = None,
) -> AuditPlan:
    """The validated plan for ``prompt`` from the planner ``llm`` names.

    ``axes`` (``--axes``) fixes the axes: the offline planner writes their counterfactuals
    from the axis library and no LLM is asked, whatever ``llm`` says. ``turns`` caches each
    LLM reply as it arrives (see :mod:`auditor.planning.turns`).

    Raises InvalidPlanError when the LLM's plan stays invalid after ``retries`` repair
    turns, BackendError when the service fails after bounded retries, AuditorError for a
    missing API key, an unknown spec or bad limits. Errors raised during a conversation
    carry it as ``.transcript`` (see :func:`transcript_of`).
    """
    limits = PlanLimits(max_axes=max_axes, max_counterfactuals=max_counterfactuals, retries=retries)
    prompt = single_spaced(prompt)
    if not has_visible_text(prompt):
        raise AuditorError(
            "the prompt is empty (nothing but spaces or invisible characters): give the text-to-image prompt to plan "
            'for, e.g. "a photo of a pharmacist"'
        )
    refuse_control_characters(prompt, "the prompt")
    if axes is not None:
        from auditor.planning.offline import OfflinePlanner

        return OfflinePlanner(axes).plan(prompt, limits)
    planner = LLM_BACKENDS.load(check_llm_spec(llm), temperature=temperature, seed=seed, turns=turns)
    return planner.plan(prompt, limits)


def transcript_of(error: BaseException) -> list[ChatMessage]:
    """The planning conversation an error from :func:`make_plan` carries (empty when none)."""
    return list(getattr(error, "transcript", []))
