"""Adaptive allocation over arms with confidence bounds: which arms lead, which are out, when to stop.

An exploration spends images on *arms* (a candidate prompt x an axis), each with a score and
a bootstrap interval ``[low, high]`` on the images it has so far. In the spirit of LUCB and
successive elimination (Kalyanakrishnan et al. 2012; Even-Dar et al. 2006), after each round:

* the **top K** are the K arms with the highest scores (ties: the earlier arm);
* an arm outside the top K whose upper bound lies below the lowest lower bound of the top K
  is **eliminated**: even its optimistic value loses to every leader's pessimistic one;
* the top K are **separated** when each leader's lower bound lies above every other arm's
  upper bound, so more images would not change who leads (at this interval level).

An arm with a score but without one of its bounds is never eliminated and never separated
from (its value is uncertain without limit). An arm without a score never leads and is left
out of these tests (the study passes arms out of contention to :func:`top_arms` so); whether
an unscored arm still in contention lets the top stop is the study's call (it does not: see
:func:`auditor.studies.explore_standings.top_separated`). Pure functions over numbers; the
study turns arms into these tuples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Bounds:
    """An arm's score and interval; None where unknown."""

    value: float | None
    low: float | None
    high: float | None


def top_arms(arms: Sequence[Bounds], k: int) -> list[int]:
    """Indices of the ``k`` arms with the highest values (arms without a value never lead), best first."""
    if k < 1:
        raise ValueError(f"the top needs at least one arm (k={k})")
    scored = [i for i, arm in enumerate(arms) if arm.value is not None]
    return sorted(scored, key=lambda i: (-arms[i].value, i))[:k]


def elimination_threshold(arms: Sequence[Bounds], top: Sequence[int]) -> float | None:
    """The lowest lower bound among the top arms; None when one of them has no lower bound."""
    lows = [arms[i].low for i in top]
    if not lows or any(low is None for low in lows):
        return None
    return min(lows)


def eliminated(arms: Sequence[Bounds], top: Sequence[int]) -> list[int]:
    """Arms outside ``top`` whose upper bound is below every top arm's lower bound."""
    threshold = elimination_threshold(arms, top)
    if threshold is None:
        return []
    leaders = set(top)
    return [i for i, arm in enumerate(arms) if i not in leaders and arm.high is not None and arm.high < threshold]


def separated(arms: Sequence[Bounds], top: Sequence[int], k: int) -> bool:
    """Whether the top ``k`` are all known and each one's lower bound lies above every other scored arm's upper bound.

    Needs ``k`` leaders and at least one other scored arm (with nothing to separate from,
    nothing is decided).
    """
    if len(top) < k:
        return False
    threshold = elimination_threshold(arms, top)
    leaders = set(top)
    others = [arm for i, arm in enumerate(arms) if i not in leaders and arm.value is not None]
    if threshold is None or not others:
        return False
    return all(arm.high is not None and arm.high < threshold for arm in others)


def folded_interval(low: float | None, high: float | None) -> tuple[float | None, float | None]:
    """An interval for |x| from an interval ``[low, high]`` for x: the image of the interval under |.|.

    Whenever ``[low, high]`` covers x, the result covers |x|, so it keeps the coverage:
    ``[low, high]`` if it lies above 0, ``[-high, -low]`` if below, ``[0, max(-low, high)]``
    if it straddles 0.
    """
    if low is None or high is None:
        return None, None
    if low >= 0:
        return low, high
    if high <= 0:
        return -high, -low
    return 0.0, max(-low, high)
