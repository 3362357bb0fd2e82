"""How a number and its interval are written for a reader.

Each place picks the decimals its numbers usually need (2 for CAS, 4 for BAV). A number
that is not 0 must never read as 0, though: a lean of +0.004 [0.001, 0.008] written as
"+0.00 [0.00, 0.01]" beside "the images look more like the male version" reads as no
effect with a claim, and a bound of -0.003 written "-0.00" hides that the interval crosses
0. So a number and its bounds share the fewest decimals, from the place's own, at which none
of them that is not 0 rounds to 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from auditor.records import Interval

#: Decimals added at most to keep small numbers from reading as 0 (beyond that they do, as 0.0000).
MOST_EXTRA_DECIMALS = 3


def decimals(values: Iterable[float | None], digits: int) -> int:
    """The fewest decimals, ``digits`` or more, at which no finite value other than 0 is written as 0; a value
    below what even the most decimals would show (floating-point noise around 0) asks for none."""
    smallest = 0.5 * 10.0 ** -(digits + MOST_EXTRA_DECIMALS)
    shown = [v for v in values if v is not None and math.isfinite(v) and abs(v) >= smallest]
    for places in range(digits, digits + MOST_EXTRA_DECIMALS):
        if all(float(f"{v:.{places}f}") != 0 for v in shown):
            return places
    return digits + MOST_EXTRA_DECIMALS


def separating_decimals(ranked: Sequence[tuple[int, float | None]], digits: int) -> int:
    """The fewest decimals, ``digits`` or more, at which a leaderboard's neighbouring rows of different rank
    (``(rank, value)``, best first) never read as the same number; rows that share a rank may. ``digits`` where
    no more decimals would tell them apart (values that differ by floating-point noise)."""
    for places in range(digits, digits + MOST_EXTRA_DECIMALS + 1):
        written = [(rank, f"{value:.{places}f}") for rank, value in ranked if value is not None]
        if all(a[1] != b[1] for a, b in zip(written, written[1:]) if a[0] != b[0]):
            return places
    return digits


def number(value: float | None, digits: int = 2, *, signed: bool = False, missing: str = "-") -> str:
    """``0.62`` (``+0.62`` when ``signed``), with more decimals where fewer would write it as 0; ``missing`` for
    None."""
    if value is None:
        return missing
    return _written(value, decimals([value], digits), signed)


def bounds(low: float | None, high: float | None, digits: int = 2, *, signed: bool = False) -> str:
    """``[0.55, 0.69]``; empty when a bound is missing."""
    if low is None or high is None:
        return ""
    places = decimals([low, high], digits)
    return f"[{_written(low, places, signed)}, {_written(high, places, signed)}]"


def with_bounds(
    value: float | None,
    low: float | None,
    high: float | None,
    digits: int = 2,
    *,
    signed: bool = False,
    missing: str = "-",
) -> str:
    """``0.62 [0.55, 0.69]`` with shared decimals, or the number alone without bounds, or ``missing`` for None."""
    if value is None:
        return missing
    if low is None or high is None:
        return number(value, digits, signed=signed)
    value_text, low_text, high_text = written_apart(value, low, high, digits, signed=signed)
    return f"{value_text} [{low_text}, {high_text}]"


#: How a p-value too small for a float (a large chi-square's tail underflows to 0.0) is written: it is not 0.
BELOW_FLOAT = "< 1e-300"


def p_value(p: float | None, missing: str = "-") -> str:
    """A p-value to three significant digits (``0.0123``, ``3.2e-07``): never written as 0 (one that underflowed
    reads :data:`BELOW_FLOAT`)."""
    if p is None:
        return missing
    return BELOW_FLOAT if p == 0 else f"{p:.3g}"


def p_equals(p: float | None) -> str:
    """A p-value after its name in a sentence, ``p {p_equals(p)}``: ``= 0.0123``, or ``< 1e-300`` for one that
    underflowed (not ``p = < 1e-300``)."""
    text = p_value(p)
    return text if text == BELOW_FLOAT else f"= {text}"


#: An interval as a record holds it, or as a report view does: ``(low, high)``.
IntervalLike = Interval | tuple[float, float]


def _low_high(interval: IntervalLike | None) -> tuple[float | None, float | None]:
    if interval is None:
        return None, None
    return (interval.low, interval.high) if isinstance(interval, Interval) else interval


def with_span(value: float | None, interval: IntervalLike | None, digits: int = 2, *, signed: bool = False) -> str:
    """A number and its interval as :func:`with_bounds` writes them."""
    return with_bounds(value, *_low_high(interval), digits, signed=signed)


def cells(
    value: float | None, interval: IntervalLike | None, digits: int = 2, *, signed: bool = False, missing: str = "-"
) -> tuple[str, str]:
    """A number and its interval for two table cells (or a number and a styled interval beside it), written with
    the decimals :func:`with_span` shares between them, so a small number does not sit beside bounds rounded to
    fewer places; the interval is empty when there is none."""
    low, high = _low_high(interval)
    if value is None:
        return missing, bounds(low, high, digits, signed=signed)
    if low is None or high is None:
        return number(value, digits, signed=signed), ""
    value_text, low_text, high_text = written_apart(value, low, high, digits, signed=signed)
    return value_text, f"[{low_text}, {high_text}]"


def written_apart(
    value: float, low: float, high: float, digits: int = 2, *, signed: bool = False
) -> tuple[str, str, str]:
    """The number and its bounds with shared decimals, each on its own, for a sentence that puts words between them."""
    places = decimals([value, low, high], digits)
    return _written(value, places, signed), _written(low, places, signed), _written(high, places, signed)


def _written(value: float, places: int, signed: bool) -> str:
    return f"{value:+.{places}f}" if signed else f"{value:.{places}f}"
