"""Holm and Benjamini–Hochberg adjusted p-values against hand computations."""

from __future__ import annotations

import pytest

from auditor.metrics.multiple_testing import benjamini_hochberg, holm

P = [0.01, 0.04, 0.03, 0.005]


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04; running max 0.02, 0.03, 0.06, 0.06
    assert holm(P) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([0.2]) == pytest.approx([0.2])  # one test: nothing to correct


def test_benjamini_hochberg_by_hand():
    # sorted p * 4 / rank = 0.02, 0.02, 0.04, 0.04; running minimum from the largest keeps them
    assert benjamini_hochberg(P) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    # 0.01*3/1 = .03, .02*3/2 = .03, .9*3/3 = .9
    assert benjamini_hochberg([0.02, 0.01, 0.9]) == pytest.approx([0.03, 0.03, 0.9])


def test_holm_is_never_below_the_raw_p_and_bh_never_above_holm():
    import numpy as np

    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.uniform(0, 1, size=rng.integers(1, 12)).tolist()
        adjusted_holm, adjusted_bh = holm(p), benjamini_hochberg(p)
        assert all(h >= raw - 1e-12 for h, raw in zip(adjusted_holm, p))
        assert all(b <= h + 1e-12 for b, h in zip(adjusted_bh, adjusted_holm))


@pytest.mark.parametrize("bad", [[-0.1], [1.5], [float("nan")], [[0.1]]])
def test_bad_p_values_are_refused(bad):
    with pytest.raises(ValueError):
        holm(bad)
