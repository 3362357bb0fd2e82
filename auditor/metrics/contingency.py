"""χ² tests of independence on object × prompt-set count tables (Wu et al., J. Imaging 2025, §§5.2, 7.1).

Do the prompt sets of a triplet (neutral, feminine, masculine) show objects in different
proportions? scipy's ``chi2_contingency`` answers for the whole triplet and for each
pair; the paper applies the test only when every expected count is at least 5 and
otherwise skips it, which is what happens here, with a note saying why. Pure
arithmetic: no models, no records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from auditor.core.errors import AuditorError

#: The expected count below which the paper does not apply a χ² test (§7.1).
MIN_EXPECTED = 5.0


@dataclass(frozen=True)
class ChiSquare:
    """One χ² test of independence on an object × prompt-set table (or why it was not run)."""

    sets: tuple[str, ...]
    objects: int
    """Rows of the table tested (objects seen in at least one of the sets; a pooled row counts as one)."""
    statistic: float | None
    p_value: float | None
    dof: int | None
    yates: bool
    """Whether Yates' continuity correction was applied (scipy does for 1 degree of freedom)."""
    pooled: int
    """Objects summed into one row by ``pool_rare`` (0 without it)."""
    smallest_expected: float | None
    note: str | None
    """Why the test was skipped; None when it ran."""

    @property
    def skipped(self) -> bool:
        return self.p_value is None


def _expected(table: np.ndarray) -> np.ndarray:
    from scipy.stats.contingency import expected_freq

    return expected_freq(table)


def chi_square(
    counts: Mapping[str, Mapping[str, float]], *, min_expected: float = MIN_EXPECTED, pool_rare: bool = False
) -> ChiSquare:
    """χ² test (scipy's ``chi2_contingency``) of objects × the prompt sets of ``counts``.

    ``counts`` maps each prompt set to its C(o, P). Rows are the objects seen in any of
    the sets. The paper's rule: no test when an expected count is below ``min_expected``
    (5); the result then says so in ``note``. With ``pool_rare`` (ours, off by default)
    the objects whose expected count is below it in some set are first summed into one
    row, the usual way to keep a large sparse table testable; the rule then applies to
    the pooled table.
    """
    sets = tuple(counts)
    if len(sets) < 2:
        raise AuditorError("a χ² test needs at least two prompt sets")
    if any(value < 0 for table in counts.values() for value in table.values()):
        raise AuditorError("co-occurrence counts cannot be negative")
    names = sorted({name for table in counts.values() for name, value in table.items() if value > 0})
    table = np.array([[counts[s].get(name, 0) for s in sets] for name in names], dtype=np.float64).reshape(-1, len(sets))

    def skipped(note: str, rows: int, pooled: int = 0, smallest: float | None = None) -> ChiSquare:
        return ChiSquare(sets, rows, None, None, None, False, pooled, smallest, note)

    if len(names) < 2:
        return skipped(f"fewer than two objects in {', '.join(sets)}: nothing to compare", len(names))
    empty = [s for s, total in zip(sets, table.sum(axis=0)) if total == 0]
    if empty:
        return skipped(f"no objects in {', '.join(empty)}", len(names))
    pooled = 0
    if pool_rare:
        rare = (_expected(table) < min_expected).any(axis=1)
        pooled = int(rare.sum())
        if pooled:
            table = np.vstack([table[~rare], table[rare].sum(axis=0, keepdims=True)])
            if len(table) < 2:
                return skipped(f"all {pooled} objects are rare: one pooled row, nothing to compare", 1, pooled)
    expected = _expected(table)
    smallest = float(expected.min())
    below = int((expected < min_expected).sum())
    if below:
        return skipped(
            f"{below} of {expected.size} expected counts below {min_expected:g} (smallest {smallest:.3g}): "
            "χ² not applied (the paper's rule)",
            len(table),
            pooled,
            smallest,
        )
    from scipy.stats import chi2_contingency

    result = chi2_contingency(table, correction=True)
    dof = int(result.dof)
    return ChiSquare(sets, len(table), float(result.statistic), float(result.pvalue), dof, dof == 1, pooled, smallest, None)


def chi_square_tests(
    counts: Mapping[str, Mapping[str, float]], *, min_expected: float = MIN_EXPECTED, pool_rare: bool = False
) -> list[ChiSquare]:
    """The χ² test over all sets of ``counts`` (the triplet), then over every pair, in the mapping's order."""
    sets = list(counts)
    groups = [tuple(sets)] + (list(combinations(sets, 2)) if len(sets) > 2 else [])
    return [
        chi_square({s: counts[s] for s in group}, min_expected=min_expected, pool_rare=pool_rare) for group in groups
    ]
