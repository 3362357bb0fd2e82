"""The planning stage shared by studies: a prompt -> its plan, through the content cache.

A plan is keyed on the planner's fingerprint (its templates or axis library, the VQA
question table, the LLM's endpoint) and the request (prompt, caps, retries, sampling, and
``--axes`` when given), so any run that planned the same prompt the same way before hands
its plan on: a rerun, a resume, or a prompt audited alone after an exploration asks the
LLM nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from auditor.core.cache import ContentCache
from auditor.records import AuditPlan

if TYPE_CHECKING:  # pragma: no cover
    from auditor.planning.turns import TurnCache
    from auditor.records import ExploreConfig, RunConfig

STAGE = "plan"


@dataclass(frozen=True)
class PlanRequest:
    """What a plan is asked for; every field changes the plan, so every field keys the cache."""

    prompt: str
    llm: str
    max_axes: int | None = None
    max_counterfactuals: int | None = None
    retries: int = 2
    temperature: float | None = None
    seed: int | None = None
    #: ``--axes``: the axis library writes these axes' counterfactuals and no LLM is asked.
    axes: tuple[str, ...] | None = None

    @classmethod
    def asked(cls, prompt: str, config: RunConfig | ExploreConfig) -> PlanRequest:
        """The plan a run's config asks for ``prompt``: one rule for a prompt audit and an exploration's
        candidates, so a prompt audited alone gets the plan its exploration cached."""
        return cls(
            prompt=prompt,
            llm=config.llm,
            max_axes=config.max_axes,
            max_counterfactuals=config.max_counterfactuals,
            retries=config.llm_retries,
            temperature=config.llm_temperature,
            seed=config.llm_seed,
            axes=tuple(config.axes) if config.axes is not None else None,
        )

    def cache_inputs(self) -> dict[str, Any]:
        inputs: dict[str, Any] = {
            "prompt": self.prompt,
            "max_axes": self.max_axes,
            "max_counterfactuals": self.max_counterfactuals,
            "retries": self.retries,
            "temperature": self.temperature,
            "seed": self.seed,
        }
        if self.axes is not None:  # only then, so plans cached before --axes existed keep their keys
            inputs["axes"] = list(self.axes)
        return inputs

    @property
    def planner(self) -> str:
        """The planner that runs: the offline axis library when the axes are fixed, else ``llm``."""
        return "offline" if self.axes is not None else self.llm


def is_cached(cache: ContentCache, request: PlanRequest) -> bool:
    """Whether the plan is cached (then it costs no LLM call); counts no cache hit or miss."""
    from auditor.planning import planner_fingerprint

    return cache.contains(STAGE, planner_fingerprint(request.planner), request.cache_inputs())


def cached_plan(
    cache: ContentCache, request: PlanRequest, before_request: Callable[[], None] | None = None
) -> tuple[AuditPlan, bool]:
    """``(plan, came from the cache)``. A planner error carries the conversation (``transcript_of``).

    The LLM's replies are cached turn by turn too, so a conversation cut off (a kill, a
    failed request) is resumed where it stopped; ``before_request`` runs before each
    request that leaves.
    """
    from auditor.planning import planner_fingerprint
    from auditor.planning.turns import TurnCache

    fingerprint = planner_fingerprint(request.planner)
    cached = cache.get(STAGE, fingerprint, request.cache_inputs())
    if cached is not None:
        return AuditPlan.model_validate_json(cached), True
    plan = _make_plan(request, TurnCache(cache, before_request))
    cache.put(STAGE, fingerprint, request.cache_inputs(), plan.model_dump_json().encode("utf-8"))
    return plan, False


def replayable_turns(cache: ContentCache, request: PlanRequest) -> int | None:
    """How many of the plan's LLM turns the turn cache holds: the conversation replayed without sending
    anything. None when all of it replays (the plan then costs no request, or ends in an error that costs
    none)."""
    from auditor.core.errors import AuditorError
    from auditor.planning.turns import NotCached, TurnCache

    try:
        _make_plan(request, TurnCache(cache, dry_run=True))
    except NotCached as stop:
        return stop.replayed
    except AuditorError:
        return None
    return None


def _make_plan(request: PlanRequest, turns: TurnCache) -> AuditPlan:
    from auditor.planning import make_plan

    return make_plan(
        request.prompt,
        request.llm,
        max_axes=request.max_axes,
        max_counterfactuals=request.max_counterfactuals,
        retries=request.retries,
        temperature=request.temperature,
        seed=request.seed,
        axes=request.axes,
        turns=turns,
    )
