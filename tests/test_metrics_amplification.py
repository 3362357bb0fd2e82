"""Bias amplification metrics against hand computations (Seshadri et al. 2023, Eqs. 1-2, §6.3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from auditor.core.errors import AuditorError
from auditor.metrics.amplification import (
    amplification,
    amplification_interval,
    bootstrap_mean_interval,
    flipped,
    one_sample_t_test,
    percentage,
    summarize_amplification,
    wilson_interval,
)

Z95 = 1.959963984540054


def _wilson_by_quadratic(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson interval as the roots of (p_hat - p)^2 = z^2 p (1 - p) / n, solved for p."""
    p_hat = k / n
    # (1 + z^2/n) p^2 - (2 p_hat + z^2/n) p + p_hat^2 = 0
    roots = np.roots([1 + z * z / n, -(2 * p_hat + z * z / n), p_hat * p_hat])
    return float(min(roots.real)), float(max(roots.real))


@pytest.mark.parametrize("k,n", [(5, 10), (0, 10), (10, 10), (1, 3), (81, 263), (499, 500)])
def test_wilson_interval_is_the_score_test_inversion(k, n):
    low, high = wilson_interval(k, n)
    expected = _wilson_by_quadratic(k, n)
    assert low == pytest.approx(max(0.0, expected[0]), abs=1e-12)
    assert high == pytest.approx(min(1.0, expected[1]), abs=1e-12)


def test_wilson_interval_known_values():
    # 5 of 10: centre 0.5, half-width z*sqrt(0.025 + z^2/400)/(1 + z^2/10).
    assert wilson_interval(5, 10) == pytest.approx((0.236593, 0.763407), abs=1e-6)
    # 0 of 10: lower bound 0, upper z^2/n / (1 + z^2/n) = 0.277533.
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.277533), abs=1e-6)
    # A wider level gives a wider interval.
    assert wilson_interval(5, 10, level=0.99)[0] < wilson_interval(5, 10)[0]


def test_percentage_in_percent_and_empty():
    share = percentage(3, 4)
    assert share.percent == 75.0
    low, high = wilson_interval(3, 4)
    assert (share.low, share.high) == pytest.approx((100 * low, 100 * high))
    empty = percentage(0, 0)
    assert empty.percent is None and empty.low is None and empty.high is None
    with pytest.raises(AuditorError):
        percentage(5, 4)
    with pytest.raises(AuditorError):
        wilson_interval(0, 0)


def test_amplification_and_flips_by_hand():
    # Figure 1's engineer: 25% female in training, 9% in generated images -> |9-50| - |25-50| = 16.
    assert amplification(9.0, 25.0) == 16.0
    # Without gender indicators the training share is 10%: 41 - 40 = 1.
    assert amplification(9.0, 10.0) == 1.0
    # De-amplification: the model is closer to parity than the data.
    assert amplification(40.0, 20.0) == -20.0
    assert flipped(60.0, 40.0) and flipped(10.0, 90.0)
    assert not flipped(10.0, 40.0) and not flipped(50.0, 10.0) and not flipped(70.0, 50.0)


def test_one_sample_t_test_by_hand():
    values = [1.0, 2.0, 3.0, 4.0]
    # mean 2.5, sample sd sqrt(5/3), se = sd / 2, t = 2.5 / se, df = 3, two-sided p.
    t_expected = 2.5 / (math.sqrt(5.0 / 3.0) / 2.0)
    t, p = one_sample_t_test(values)
    assert t == pytest.approx(t_expected)
    assert p == pytest.approx(2 * stats.t.sf(t_expected, df=3))
    assert p == pytest.approx(0.030466, abs=1e-6)
    assert one_sample_t_test([3.0]) == (None, None)
    assert one_sample_t_test([2.0, 2.0, 2.0]) == (None, None)


def test_bootstrap_mean_interval_of_two_values():
    # Resampling [0, 10] twice gives a mean of 0, 5 or 10 with probabilities 1/4, 1/2, 1/4:
    # the 2.5th percentile is 0 and the 97.5th is 10.
    assert bootstrap_mean_interval([0.0, 10.0], resamples=4000, seed=1) == (0.0, 10.0)
    # A constant sample has a zero-width interval at its value.
    assert bootstrap_mean_interval([3.0, 3.0, 3.0]) == (3.0, 3.0)
    # Seeded: the same seed gives the same interval, and it contains the mean.
    values = np.random.default_rng(7).normal(5.0, 2.0, size=40)
    first = bootstrap_mean_interval(values, seed=3)
    assert first == bootstrap_mean_interval(values, seed=3)
    assert first[0] < values.mean() < first[1]
    # About mean +- 1.96 sd / sqrt(n) for a normal sample of 40.
    half = 1.96 * values.std(ddof=1) / math.sqrt(values.size)
    assert first[1] - first[0] == pytest.approx(2 * half, rel=0.15)
    with pytest.raises(AuditorError):
        bootstrap_mean_interval([])


def test_summary_excludes_flips_and_tests_against_zero():
    values = [16.0, 1.0, -4.0, 7.0, 30.0]
    flips = [False, False, False, False, True]
    summary = summarize_amplification(values, flips, exclude_flips=True, resamples=2000, seed=0)
    assert summary.n == 4 and summary.n_excluded == 1
    assert summary.mean == pytest.approx(5.0)
    result = stats.ttest_1samp([16.0, 1.0, -4.0, 7.0], 0.0)
    assert summary.t_statistic == pytest.approx(result.statistic)
    assert summary.p_value == pytest.approx(result.pvalue)
    assert summary.low <= 5.0 <= summary.high
    everything = summarize_amplification(values, flips, resamples=2000)
    assert everything.n == 5 and everything.n_excluded == 0 and everything.mean == pytest.approx(10.0)
    none_left = summarize_amplification([30.0], [True], exclude_flips=True)
    assert none_left.n == 0 and none_left.mean is None and none_left.p_value is None
    # one occupation: every resample is itself, so no interval (a zero-width one would back any claim) and no t-test
    one = summarize_amplification([33.3], resamples=500)
    assert (one.n, one.mean, one.low, one.high, one.p_value) == (1, 33.3, None, None, None)
    with pytest.raises(AuditorError):
        summarize_amplification(values, exclude_flips=True)
    with pytest.raises(AuditorError):
        summarize_amplification(values, [True])


def test_amplification_interval_resamples_both_sides():
    # 9 of 100 women generated, 25 of 100 in training: A = 41 - 25 = 16.
    low, high = amplification_interval((9, 100), (25, 100), resamples=4000, seed=0)
    assert low < 16.0 < high
    # The sd of A is about sqrt(var G + var T) in percentage points.
    sd = 100 * math.sqrt(0.09 * 0.91 / 100 + 0.25 * 0.75 / 100)
    assert high - low == pytest.approx(2 * 1.96 * sd, rel=0.15)
    assert (low, high) == amplification_interval((9, 100), (25, 100), resamples=4000, seed=0)
    # All women on both sides: nothing varies.
    assert amplification_interval((10, 10), (5, 5)) == (0.0, 0.0)
    with pytest.raises(AuditorError):
        amplification_interval((0, 0), (5, 10))
