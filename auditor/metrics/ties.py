"""When two scores are the same: the one rule every ranking, "largest alone" share and named tie follows.

The same numbers summed in another order differ in their last bits (about 1e-16 of their size): two axes
whose CAS values are equal but listed in other orders get BAVs that are not ``==``. A rule of exact
equality would then put one of them ahead, in one report and not in another. Scores within
:data:`RELATIVE_TIE` of each other (or both within :data:`ABSOLUTE_TIE` of 0) are the same here;
a real difference that small is below anything a report writes.
"""

from __future__ import annotations

import numpy as np

#: Relative difference at or below which two scores are one (float noise is ~1e-16 of a value).
RELATIVE_TIE = 1e-12
#: Distance from each other at or below which two scores near 0 are one (the noise of values that are 0).
ABSOLUTE_TIE = 1e-15


def same_score(a: float, b: float) -> bool:
    """Whether ``a`` and ``b`` are the same score (see the module): :func:`same_scores` of one pair, so a ranking
    and the resampled shares tie alike."""
    return bool(same_scores(np.float64(a), np.float64(b)))


def same_scores(values: np.ndarray, others: np.ndarray) -> np.ndarray:
    """:func:`same_score` elementwise (broadcast); NaN is the same as nothing, infinities as themselves."""
    return np.isclose(values, others, rtol=RELATIVE_TIE, atol=ABSOLUTE_TIE)
