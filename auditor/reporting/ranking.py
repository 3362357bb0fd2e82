"""Ranks with ties, shared by the leaderboards (``auditor explore``, ``auditor batch``).

Rows whose scores are equal are not ahead of one another: which comes first is only the
record's order. So they share the rank of the first of them (1, =2, =2, 4), and every report
(terminal, ``--json`` "rank" and "tied", ``report.html``) numbers them alike.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from itertools import groupby
from typing import TypeVar

T = TypeVar("T")


def highest_first(value: float | None) -> tuple[bool, float]:
    """The sort key of a leaderboard: the highest value first, rows without one last (where they tie)."""
    return (value is None, -(value or 0.0))


def rank_with_ties(items: Iterable[T], key: Callable[[T], Hashable]) -> list[tuple[int, bool, T]]:
    """``items`` sorted by ``key`` (stably), each with its rank from 1 and whether another item shares it: items with
    equal keys share the rank of the first of them."""
    ranked: list[tuple[int, bool, T]] = []
    for _key, group in groupby(sorted(items, key=key), key=key):
        members, rank = list(group), len(ranked) + 1
        ranked += [(rank, len(members) > 1, item) for item in members]
    return ranked


def place(rank: int, tied: bool) -> str:
    """A rank as the terminal and the page show it: ``=2`` for a shared one."""
    return f"={rank}" if tied else str(rank)
