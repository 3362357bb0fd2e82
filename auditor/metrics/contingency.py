"""χ² tests of independence on object × prompt-set count tables (Wu et al., J. Imaging 2025, §§5.2, 7.1).

Do the prompt sets of a triplet (neutral, feminine, masculine) show objects in different
proportions? scipy's ``chi2_contingency`` answers for the whole triplet and for each
pair. The paper applies the test to every table of at least 5 objects (§7.1: not to the
groups whose "numbers of objects ... are less than 5"), sparse ones included (its Tables
7-9 test the sparse dependency groups); a test that runs while some expected counts are
below 5, where the χ² approximation is rough, carries a note saying so. The textbook rule
(no test when an expected count is below 5) is an option. Pure arithmetic: no models, no
records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from auditor.core.errors import AuditorError

#: Objects a table needs before the paper applies a χ² test to it (§7.1).
MIN_OBJECTS = 5
#: The expected count below which the χ² approximation is held to be rough (Cochran's rule).
ROUGH_EXPECTED = 5.0


@dataclass(frozen=True)
class ChiSquare:
    """One χ² test of independence on an object × prompt-set table (or why it was not run)."""

    sets: tuple[str, ...]
    objects: int
    """Rows of the table tested (objects seen in at least one of the sets)."""
    statistic: float | None
    p_value: float | None
    dof: int | None
    yates: bool
    """Whether Yates' continuity correction was applied (scipy does for 1 degree of freedom)."""
    smallest_expected: float | None
    note: str | None
    """Why the test was skipped, or the caveat on one that ran with small expected counts; else None."""

    @property
    def skipped(self) -> bool:
        return self.p_value is None


def _expected(table: np.ndarray) -> np.ndarray:
    from scipy.stats.contingency import expected_freq

    return expected_freq(table)


def chi_square(
    counts: Mapping[str, Mapping[str, float]],
    *,
    min_objects: int = MIN_OBJECTS,
    min_expected: float | None = None,
) -> ChiSquare:
    """χ² test (scipy's ``chi2_contingency``) of objects × the prompt sets of ``counts``.

    ``counts`` maps each prompt set to its C(o, P). Rows are the objects seen in any of
    the sets. The paper's rule: no test on fewer than ``min_objects`` (5) objects; the
    result then says so in ``note``. With ``min_expected`` (ours, off by default) a test
    with an expected count below it is skipped as well.
    """
    sets = tuple(counts)
    if len(sets) < 2:
        raise AuditorError("a χ² test needs at least two prompt sets")
    if any(value < 0 for table in counts.values() for value in table.values()):
        raise AuditorError("co-occurrence counts cannot be negative")
    names = sorted({name for table in counts.values() for name, value in table.items() if value > 0})
    table = np.array([[counts[s].get(name, 0) for s in sets] for name in names], dtype=np.float64).reshape(-1, len(sets))

    def skipped(note: str, rows: int, smallest: float | None = None) -> ChiSquare:
        return ChiSquare(sets, rows, None, None, None, False, smallest, note)

    if len(names) < 2:
        return skipped(f"fewer than two objects in {', '.join(sets)}: nothing to compare", len(names))
    if len(names) < min_objects:
        return skipped(f"{len(names)} objects, fewer than {min_objects}: χ² not applied (the paper's rule)", len(names))
    empty = [s for s, total in zip(sets, table.sum(axis=0)) if total == 0]
    if empty:
        return skipped(f"no objects in {', '.join(empty)}", len(names))
    expected = _expected(table)
    smallest = float(expected.min())
    if min_expected is not None and (below := int((expected < min_expected).sum())):
        return skipped(
            f"{below} of {expected.size} expected counts below {min_expected:g} (smallest {smallest:.3g}): "
            "χ² not applied (--min-expected)",
            len(table),
            smallest,
        )
    rough = int((expected < ROUGH_EXPECTED).sum())
    note = (
        f"{rough} of {expected.size} expected counts below {ROUGH_EXPECTED:g} (smallest {smallest:.3g}): "
        "the χ² approximation is rough there"
        if rough
        else None
    )
    from scipy.stats import chi2_contingency

    result = chi2_contingency(table, correction=True)
    dof = int(result.dof)
    return ChiSquare(sets, len(table), float(result.statistic), float(result.pvalue), dof, dof == 1, smallest, note)


def chi_square_tests(
    counts: Mapping[str, Mapping[str, float]],
    *,
    min_objects: int = MIN_OBJECTS,
    min_expected: float | None = None,
) -> list[ChiSquare]:
    """The χ² test over all sets of ``counts`` (the triplet), then over every pair, in the mapping's order."""
    sets = list(counts)
    groups = [tuple(sets)] + (list(combinations(sets, 2)) if len(sets) > 2 else [])
    return [
        chi_square({s: counts[s] for s in group}, min_objects=min_objects, min_expected=min_expected)
        for group in groups
    ]
