"""Corrections for testing many hypotheses at once: Holm (family-wise) and Benjamini–Hochberg (FDR).

An audit tests one association per axis, and an exploration one effect per prompt and
axis; with 20 tests at α = 0.05 one "finding" is expected by chance alone. The reports
state a direction only when its adjusted p-value is below α, and say which correction
was applied.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _checked(p_values: Sequence[float]) -> np.ndarray:
    values = np.asarray(p_values, dtype=float)
    if values.ndim != 1 or np.isnan(values).any() or (values < 0).any() or (values > 1).any():
        raise ValueError("p-values must be a flat sequence of numbers between 0 and 1")
    return values


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order.

    Sorted ascending, the i-th smallest (0-based) of m is multiplied by ``m - i``; a running
    maximum keeps the adjusted values in the same order as the raw ones; capped at 1. A
    hypothesis is rejected at family-wise level α when its adjusted p-value is below α.
    """
    values = _checked(p_values)
    m = len(values)
    order = np.argsort(values, kind="stable")
    scaled = values[order] * (m - np.arange(m))
    adjusted_sorted = np.minimum(np.maximum.accumulate(scaled), 1.0)
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted
    return adjusted.tolist()


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (q-values), in the input order.

    Sorted ascending, the i-th smallest (1-based rank r) of m becomes ``p * m / r``; a running
    minimum from the largest down keeps them monotone; capped at 1. A hypothesis is a
    discovery at false discovery rate α when its adjusted value is below α.
    """
    values = _checked(p_values)
    m = len(values)
    order = np.argsort(values, kind="stable")
    ranks = np.arange(1, m + 1)
    scaled = values[order] * m / ranks
    adjusted_sorted = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted
    return adjusted.tolist()
