"""Planning: which bias axes to audit for a prompt, and the counterfactual prompts of each.

``make_plan`` runs the TIBET chain on an LLM (``openai:<model>``,
``langchain:<provider>:<model>``) or the offline WordNet planner (``offline``) and returns
a validated :class:`~auditor.records.AuditPlan`. Importing this package is cheap: the
SDKs and WordNet load only when a plan is made.
"""

from __future__ import annotations

from auditor.core.errors import AuditorError
from auditor.core.fingerprint import settings_fingerprint, text_fingerprint
from auditor.core.openai_api import configured_base_url
from auditor.core.registry import parse_spec
from auditor.core.resources import read_prompt_text
from auditor.planning.chain import CHAIN_FILE, PlanLimits, validate_plan
from auditor.planning.llm import LLM_BACKENDS, check_llm_spec
from auditor.planning.offline import LIBRARY_FILE
from auditor.planning.questions import QUESTIONS_FILE, question_for_axis
from auditor.planning.review import review_plan
from auditor.records import AuditPlan, ChatMessage

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
) -> AuditPlan:
    """The validated plan for ``prompt`` from the planner ``llm`` names.

    Raises InvalidPlanError when the LLM's plan stays invalid after ``retries`` repair
    turns, BackendError when the service fails after bounded retries, AuditorError for a
    missing API key, an unknown spec or bad limits. Errors raised during a conversation
    carry it as ``.transcript`` (see :func:`transcript_of`).
    """
    limits = PlanLimits(max_axes=max_axes, max_counterfactuals=max_counterfactuals, retries=retries)
    prompt = prompt.strip()
    if not prompt:
        raise AuditorError(
            'the prompt is empty: give the text-to-image prompt to plan for, e.g. "a photo of a pharmacist"'
        )
    planner = LLM_BACKENDS.load(check_llm_spec(llm), temperature=temperature, seed=seed)
    return planner.plan(prompt, limits)


def transcript_of(error: BaseException) -> list[ChatMessage]:
    """The planning conversation an error from :func:`make_plan` carries (empty when none)."""
    return list(getattr(error, "transcript", []))


def planner_fingerprint(llm: str) -> str:
    """What a cached plan is keyed on besides the request: the planner, its data and where it runs.

    The LLM chain's templates, or the offline planner's axis library, and the VQA question
    table are hashed, and an LLM's endpoint (base URL) is included, so a changed template
    or another server never returns an old plan. Needs no API key and imports no SDK.
    """
    spec = parse_spec(check_llm_spec(llm))
    data = [QUESTIONS_FILE, LIBRARY_FILE if spec.prefix == "offline" else CHAIN_FILE]
    return settings_fingerprint(
        None,
        planner=str(spec),
        data=text_fingerprint(*(read_prompt_text(name) for name in data)),
        endpoint=_endpoint(spec.prefix, spec.target),
    )


def _endpoint(prefix: str, target: str) -> str | None:
    """Where the planner's requests go: the OpenAI base URL, or the langchain provider's default."""
    provider = target.partition(":")[0] if prefix == "langchain" else prefix
    if provider == "openai":
        return configured_base_url()
    return None if prefix == "offline" else f"{provider} (provider default)"
