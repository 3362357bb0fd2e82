"""Where an exploration stands, read off its record: who leads, and what its budgets leave.

These are pure functions of an :class:`~auditor.records.ExploreRecord`, apart because every
step of an exploration asks them (the proposer shows the leaderboard, allocation and the
stop test need the leaders, confirmation re-runs them) and none of them needs a model or the
run folder.
"""

from __future__ import annotations

from auditor.metrics.allocation import Bounds, eliminated, elimination_threshold, separated, top_arms
from auditor.records import Arm, Candidate, ExploreRecord, Round


def find_candidate(record: ExploreRecord, candidate_id: str) -> Candidate:
    return next(c for c in record.candidates if c.candidate_id == candidate_id)


def find_arm(record: ExploreRecord, arm_id: str) -> Arm:
    return next(arm for arm in record.arms if arm.arm_id == arm_id)


def arm_bounds(record: ExploreRecord) -> list[Bounds]:
    """Every arm's bounds; eliminated and undefined arms keep theirs but never lead (see :func:`leader_indices`)."""
    return [
        Bounds(
            value=arm.score.value if arm.score is not None else None,
            low=arm.score.ci.low if arm.score is not None and arm.score.ci is not None else None,
            high=arm.score.ci.high if arm.score is not None and arm.score.ci is not None else None,
        )
        for arm in record.arms
    ]


def in_contention(arm: Arm) -> bool:
    """Still able to lead: alive, or full (no more seeds); not eliminated, not undefined."""
    return arm.state in ("alive", "full")


def leader_indices(record: ExploreRecord) -> list[int]:
    """Indices of the top K among the arms still in contention."""
    bounds = arm_bounds(record)
    contending = [
        bound if in_contention(arm) else Bounds(None, None, None) for arm, bound in zip(record.arms, bounds, strict=True)
    ]
    return top_arms(contending, record.config.top_k)


def top_separated(record: ExploreRecord) -> bool:
    """Whether the top K are separated from every other arm (:func:`~auditor.metrics.allocation.separated`).

    Never while an arm still in contention has no score: a round the image budget cut short
    leaves new arms unseen, and one of them could lie anywhere, above the leaders too.
    """
    if any(in_contention(arm) and arm.score is None for arm in record.arms):
        return False
    return separated(arm_bounds(record), leader_indices(record), record.config.top_k)


def leading_arms(record: ExploreRecord) -> list[Arm]:
    return [record.arms[i] for i in leader_indices(record)]


def eliminate_trailing(record: ExploreRecord, current: Round) -> None:
    """Eliminate the arms whose upper bound falls below every leader's lower bound, noting them in the round."""
    bounds = arm_bounds(record)
    leaders = leader_indices(record)
    threshold = elimination_threshold(bounds, leaders)
    for i in eliminated(bounds, leaders):
        arm = record.arms[i]
        if in_contention(arm):
            arm.state, arm.ended_round = "eliminated", current.round
            arm.ended_reason = (
                f"upper bound {bounds[i].high:.4f} below the top {record.config.top_k}'s lowest lower bound "
                f"{threshold:.4f}"
            )
            current.eliminated.append(arm.arm_id)


def ranked_arms(record: ExploreRecord) -> list[Arm]:
    """Scored arms, highest objective first."""
    scored = [arm for arm in record.arms if arm.score is not None and arm.score.value is not None]
    return sorted(scored, key=lambda arm: -arm.score.value)


def leading_candidates(record: ExploreRecord) -> list[tuple[str, str]]:
    """``(candidate id, prompt)`` of the leading arms' candidates, best first, each once."""
    found: dict[str, str] = {}
    for arm in leading_arms(record):
        found.setdefault(arm.candidate_id, find_candidate(record, arm.candidate_id).prompt)
    return list(found.items())


def prompts_left(record: ExploreRecord) -> float:
    """Candidates that may still be accepted (--max-prompts)."""
    if record.config.max_prompts is None:
        return float("inf")
    return record.config.max_prompts - sum(1 for c in record.candidates if c.accepted)


def llm_calls_left(record: ExploreRecord) -> float:
    limit = record.config.max_llm_calls
    return float("inf") if limit is None else limit - record.llm_calls


def can_propose(record: ExploreRecord) -> bool:
    """Whether the proposer may run: offline always; the LLM while --max-llm-calls leaves a request for the
    proposals and, when the LLM plans too (no --axes), the worst case of one plan."""
    config = record.config
    if config.llm == "offline":
        return True
    plan = 0 if config.axes is not None else 3 + config.llm_retries
    return llm_calls_left(record) >= 1 + plan
