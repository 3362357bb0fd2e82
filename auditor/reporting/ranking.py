"""Ranks with ties, shared by the leaderboards (``auditor explore``, ``auditor batch``) and the axis ranking.

Rows whose scores are the same (:mod:`auditor.metrics.ties`: equal but for float noise) are not
ahead of one another: which comes first is only the record's order. So they share the rank of the
first of them (1, =2, =2, 4), and every report (terminal, ``--json`` "rank" and "tied",
``report.html``) numbers them alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from auditor.metrics.ties import same_score

T = TypeVar("T")


def highest_first(value: float | None) -> tuple[bool, float]:
    """The sort key of a leaderboard: the highest value first, rows without one last."""
    return (value is None, -(value or 0.0))


def rank_with_ties(items: Iterable[T], scores: Callable[[T], Sequence[float | None]]) -> list[tuple[int, bool, T]]:
    """``items`` by their ``scores``, highest first (the first score decides, the next break its ties; None last),
    each with its rank from 1 and whether another item shares it. An item whose scores are all the same as the
    one before it shares that one's rank (so a run of such items shares the rank of its first)."""
    ranked: list[tuple[int, bool, T]] = []
    previous: Sequence[float | None] | None = None
    for item in sorted(items, key=lambda item: [highest_first(score) for score in scores(item)]):
        current = scores(item)
        if previous is not None and _same(previous, current):
            rank = ranked[-1][0]
            ranked[-1] = (rank, True, ranked[-1][2])
            ranked.append((rank, True, item))
        else:
            ranked.append((len(ranked) + 1, False, item))
        previous = current
    return ranked


def _same(first: Sequence[float | None], second: Sequence[float | None]) -> bool:
    return all(
        (a is None) == (b is None) and (a is None or same_score(a, b)) for a, b in zip(first, second, strict=True)
    )


@dataclass(frozen=True)
class Ranked:
    """A leaderboard row's place: what each leaderboard's rows (an exploration's arms, a batch's prompt x axis)
    share."""

    #: Its rank from 1; rows that tie share the rank of the first of them (1, =2, =2, 4).
    rank: int
    #: Whether another row has the same rank: neither is ahead, so no report may number them as if one were.
    tied: bool

    @property
    def place(self) -> str:
        """The rank as the terminal and the page show it: ``=2`` for a shared one."""
        return f"={self.rank}" if self.tied else str(self.rank)
