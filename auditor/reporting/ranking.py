"""Ranks with ties, shared by the leaderboards (``auditor explore``, ``auditor batch``).

Rows whose scores are equal (to :data:`TIE_DIGITS` significant digits) are not ahead of one
another: which comes first is only the record's order. So they share the rank of the first of them (1, =2, =2, 4), and every report
(terminal, ``--json`` "rank" and "tied", ``report.html``) numbers them alike.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from itertools import groupby
from typing import TypeVar

T = TypeVar("T")


#: Significant digits at which two scores are the same: float sums taken in another order (the CAS values of two
#: axes listed in other orders) differ in the last bits, and such a difference must not put one row ahead.
TIE_DIGITS = 12


def comparable(value: float) -> float:
    """``value`` at :data:`TIE_DIGITS` significant digits, for ordering and ties (never for display or records)."""
    return float(f"{value:.{TIE_DIGITS}g}")


def highest_first(value: float | None) -> tuple[bool, float]:
    """The sort key of a leaderboard: the highest value first, rows without one last (where they tie)."""
    return (value is None, -comparable(value or 0.0))


def rank_with_ties(items: Iterable[T], key: Callable[[T], Hashable]) -> list[tuple[int, bool, T]]:
    """``items`` sorted by ``key`` (stably), each with its rank from 1 and whether another item shares it: items with
    equal keys share the rank of the first of them."""
    ranked: list[tuple[int, bool, T]] = []
    for _key, group in groupby(sorted(items, key=key), key=key):
        members, rank = list(group), len(ranked) + 1
        ranked += [(rank, len(members) > 1, item) for item in members]
    return ranked


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
