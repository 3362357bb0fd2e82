"""Prompt-to-image tracing numbers against hand computations (Wu et al. 2025, §§4-5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.signal import convolve2d

from auditor.core.errors import AuditorError
from auditor.metrics import trace
from auditor.metrics.contingency import chi_square, chi_square_tests
from auditor.metrics.trace import (
    ObjectBias,
    bias_ranking,
    bias_score,
    bias_score_intervals,
    bias_score_swap_p,
    co_occurrence,
    compare_closeness,
    count_cosine,
    paired_cosines,
    smallest_swap_p,
    ssim,
    swap_test,
    triplets_needed,
)

# --------------------------------------------------------------------------- representations


def test_paired_cosines_row_by_row_with_nan_for_a_zero_row():
    a = [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [2.0, 0.0]]
    b = [[0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [-3.0, 0.0]]
    result = paired_cosines(a, b)
    assert result[:2] == pytest.approx([0.0, 1 / math.sqrt(2)])
    assert math.isnan(result[2])
    assert result[3] == pytest.approx(-1.0)


def test_paired_cosines_flatten_latents():
    z = np.zeros((2, 2, 2))
    z[0, 0, 0], z[1, 1, 1] = 1.0, 2.0
    w = np.ones((2, 2, 2))
    assert paired_cosines(z, w) == pytest.approx([1 / 2, 1 / 2])  # <e, 1> / (|e| * sqrt(4))


def test_paired_cosines_reject_bad_input():
    with pytest.raises(AuditorError, match="differ in shape"):
        paired_cosines(np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(AuditorError, match="NaN"):
        paired_cosines([[np.nan, 1.0]], [[1.0, 1.0]])
    with pytest.raises(AuditorError, match="one row per pair"):
        paired_cosines([1.0, 2.0], [1.0, 2.0])


def test_closeness_with_a_hand_computed_bootstrap():
    # d per unit: 0.1, 0.2, 0.0. A resample of 3 is all-0.0 (or all-0.2) with chance 1/27 = 3.7%,
    # more than the 2.5% in each tail: the 95% percentile interval is exactly [0.0, 0.2].
    result = compare_closeness([0.5, 0.6, 0.7], [0.6, 0.8, 0.7], seed=7)
    assert result.mean_neutral_feminine == pytest.approx(0.6)
    assert result.mean_neutral_masculine == pytest.approx(0.7)
    assert result.difference == pytest.approx(0.1)
    assert result.interval == pytest.approx((0.0, 0.2))
    assert result.closer_to == "undecided"  # the interval touches 0
    # sign test: 2 positive, 1 tie dropped -> P(2 of 2) two-sided = 0.5
    assert (result.masculine_closer, result.feminine_closer, result.ties) == (2, 0, 1)
    assert result.sign_p == pytest.approx(0.5)
    assert (result.units, result.pairs, result.dropped_pairs, result.resamples, result.seed) == (3, 3, 0, 10_000, 7)


def test_closeness_averages_pairs_within_a_unit_and_drops_undefined_pairs():
    nf = [0.5, 0.5, 0.6, np.nan]
    nm = [0.6, 0.8, 0.5, 0.9]
    result = compare_closeness(nf, nm, units=["a", "a", "b", "b"])
    # unit a: (0.1 + 0.3) / 2 = 0.2; unit b: -0.1 (its NaN pair dropped); mean over units 0.05
    assert result.difference == pytest.approx(0.05)
    assert (result.units, result.pairs, result.dropped_pairs) == (2, 3, 1)
    assert result.mean_neutral_feminine == pytest.approx(1.6 / 3)
    assert (result.masculine_closer, result.feminine_closer) == (1, 1)
    assert result.sign_p == pytest.approx(1.0)


def test_closeness_claims_a_side_only_when_the_interval_excludes_zero_and_the_swap_test_agrees():
    masculine = compare_closeness([0.5] * 20, [0.6] * 20)
    assert masculine.interval == pytest.approx((0.1, 0.1))
    assert masculine.closer_to == "masculine"
    assert masculine.sign_p == pytest.approx(2 * 0.5**20)
    # 2^20 swaps > 10,000: random ones; only the two with every sign alike reach |mean| 0.1, so p is (1 + k) / 10,001.
    assert masculine.swap_p < 1e-3
    # Seven triplets, all closer to feminine: 2 of the 2^7 swaps (none, all) are as extreme, p = 1/64.
    feminine = compare_closeness([0.7, 0.8, 0.9, 0.7, 0.8, 0.9, 0.7], [0.6, 0.6, 0.8, 0.6, 0.6, 0.8, 0.6])
    assert feminine.closer_to == "feminine" and feminine.interval[1] < 0 and feminine.swap_p == pytest.approx(2 / 128)
    # Two or three triplets of one sign: the bootstrap interval excludes 0, but the swap test cannot go below 1/4.
    two = compare_closeness([0.5, 0.5], [0.501, 0.55])
    assert two.interval[0] > 0 and two.swap_p == pytest.approx(0.5) and two.closer_to == "undecided"
    three = compare_closeness([0.7, 0.8, 0.9], [0.6, 0.6, 0.8])
    assert three.interval[1] < 0 and three.swap_p == pytest.approx(0.25) and three.closer_to == "undecided"
    single = compare_closeness([0.5, 0.5], [0.9, 0.9], units=["t", "t"])
    assert single.interval is None and single.swap_p is None and single.closer_to == "undecided"
    ties = compare_closeness([0.5, 0.5], [0.5, 0.5])
    assert ties.sign_p is None and ties.ties == 2 and ties.closer_to == "undecided"


@pytest.mark.parametrize("triplets", [2, 3, 8])
def test_with_no_effect_a_side_is_claimed_at_most_as_often_as_the_level_allows(triplets):
    """Differences drawn symmetric around 0: a 95% claim in at most ~5% of data sets (the percentile bootstrap
    alone claimed one in 50% at two triplets, 26% at three, 14% at eight)."""
    rng = np.random.default_rng(11)
    runs = 600
    claimed = sum(
        compare_closeness(np.zeros(triplets), rng.normal(size=triplets), resamples=256, seed=i).closer_to != "undecided"
        for i in range(runs)
    )
    assert claimed / runs <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)


def test_closeness_is_reproducible_and_batching_does_not_change_the_draws(monkeypatch):
    rng = np.random.default_rng(1)
    nf, nm = rng.random(50), rng.random(50)
    first = compare_closeness(nf, nm, resamples=999, seed=3)
    assert compare_closeness(nf, nm, resamples=999, seed=3) == first
    assert compare_closeness(nf, nm, resamples=999, seed=4).interval != first.interval
    monkeypatch.setattr(trace, "_BOOTSTRAP_BATCH_VALUES", 50 * 7)  # 7 resamples per batch
    assert compare_closeness(nf, nm, resamples=999, seed=3) == first


def test_closeness_rejects_bad_input():
    with pytest.raises(AuditorError, match="pair up"):
        compare_closeness([0.1, 0.2], [0.1])
    with pytest.raises(AuditorError, match="one unit per pair"):
        compare_closeness([0.1, 0.2], [0.1, 0.3], units=["a"])
    with pytest.raises(AuditorError, match="no pair"):
        compare_closeness([np.nan], [0.1])
    with pytest.raises(AuditorError, match="confidence"):
        compare_closeness([0.1], [0.2], confidence=1.0)


# --------------------------------------------------------------------------- SSIM


def _reference_ssim(a: np.ndarray, b: np.ndarray, data_range: float) -> float:
    """Wang et al. (2004) written out: 11x11 Gaussian (sigma 1.5), population moments, valid pixels only."""
    offsets = np.arange(-5, 6)
    g = np.exp(-(offsets**2) / (2 * 1.5**2))
    window = np.outer(g, g) / np.outer(g, g).sum()

    def blur(x):
        return convolve2d(x, window, mode="valid")

    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    mu_a, mu_b = blur(a), blur(b)
    var_a = blur(a * a) - mu_a**2
    var_b = blur(b * b) - mu_b**2
    cov = blur(a * b) - mu_a * mu_b
    s = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
    return float(s.mean())


def test_ssim_of_constant_images_by_hand():
    # no variance: SSIM = (2*mu_x*mu_y + C1) / (mu_x^2 + mu_y^2 + C1) with C1 = (0.01 * 255)^2
    a = np.full((16, 16), 100, dtype=np.uint8)
    b = np.full((16, 16), 150, dtype=np.uint8)
    c1 = (0.01 * 255) ** 2
    assert ssim(a, b) == pytest.approx((2 * 100 * 150 + c1) / (100**2 + 150**2 + c1))
    assert ssim(a, a) == pytest.approx(1.0)


def test_ssim_matches_the_written_out_definition():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, size=(24, 20)).astype(np.uint8)
    b = np.clip(a.astype(int) + rng.integers(-40, 41, size=a.shape), 0, 255).astype(np.uint8)
    assert ssim(a, b) == pytest.approx(_reference_ssim(a.astype(float), b.astype(float), 255), rel=1e-9)
    # colour: the mean of the per-channel values
    rgb_a = rng.integers(0, 256, size=(16, 16, 3)).astype(np.uint8)
    rgb_b = rng.integers(0, 256, size=(16, 16, 3)).astype(np.uint8)
    per_channel = [_reference_ssim(rgb_a[..., c].astype(float), rgb_b[..., c].astype(float), 255) for c in range(3)]
    assert ssim(rgb_a, rgb_b) == pytest.approx(np.mean(per_channel), rel=1e-9)
    # floats need their range
    assert ssim(a / 255.0, b / 255.0, data_range=1.0) == pytest.approx(ssim(a, b), rel=1e-9)


def test_ssim_rejects_bad_input():
    with pytest.raises(AuditorError, match="same shape"):
        ssim(np.zeros((16, 16), np.uint8), np.zeros((16, 17), np.uint8))
    with pytest.raises(AuditorError, match="data_range"):
        ssim(np.zeros((16, 16)), np.zeros((16, 16)))
    with pytest.raises(AuditorError, match="11"):
        ssim(np.zeros((8, 16), np.uint8), np.zeros((8, 16), np.uint8))


# --------------------------------------------------------------------------- objects


def test_co_occurrence_sums_counts_over_images():
    assert co_occurrence([{"dog": 1, "cat": 2}, {"dog": 3}, {}]) == {"cat": 2, "dog": 4}
    with pytest.raises(AuditorError):
        co_occurrence([{"dog": -1}])


def test_count_cosine():
    assert count_cosine({"a": 1, "b": 1}, {"a": 1}) == pytest.approx(1 / math.sqrt(2))
    assert count_cosine({"a": 2, "b": 0}, {"a": 1}) == pytest.approx(1.0)
    assert count_cosine({}, {"a": 1}) == 0.0  # nothing in common
    assert math.isnan(count_cosine({}, {}))  # undefined: left out


def test_bias_score_by_hand():
    assert bias_score(3, 1, 10, 10) == pytest.approx(0.75)
    assert bias_score(3, 1, 10, 5) == pytest.approx(3 / (3 + 2 * 1))  # |P_m|/|P_f| = 2 rescales C_f
    assert bias_score(5, 0, 4, 4) == 1.0
    assert bias_score(0, 4, 4, 4) == 0.0
    assert bias_score(2, 2, 4, 4) == 0.5
    assert bias_score(0, 0, 4, 4) is None
    with pytest.raises(AuditorError):
        bias_score(1, 1, 0, 4)


def test_bias_ranking_filters_by_the_largest_count():
    masculine = {"suit": 9, "dress": 1, "hat": 2, "tie": 2}
    feminine = {"suit": 1, "dress": 9, "hat": 2}
    neutral = {"cake": 7, "tie": 6}
    ranking = bias_ranking(masculine, feminine, n_masculine=10, n_feminine=10, min_count=1, neutral=neutral)
    assert [(o.name, o.score) for o in ranking] == [
        ("tie", 1.0),
        ("suit", 0.9),
        ("hat", 0.5),
        ("dress", 0.1),
    ]  # "cake" (neutral only) has no BS
    assert ranking[1] == ObjectBias(name="suit", score=0.9, masculine=9, feminine=1, neutral=0)
    # min-count 5: "hat" (max 2) goes; "tie" stays through its neutral count 6
    strict = bias_ranking(masculine, feminine, n_masculine=10, n_feminine=10, min_count=5, neutral=neutral)
    assert [o.name for o in strict] == ["tie", "suit", "dress"]
    without_neutral = bias_ranking(masculine, feminine, n_masculine=10, n_feminine=10, min_count=5)
    assert [o.name for o in without_neutral] == ["suit", "dress"]
    assert without_neutral[0].neutral is None


def test_bias_score_swap_p_by_hand():
    """Three triplets, both sides 2 images each. Object 0: C_m 12, C_f 1, BS 12/13; only no swap and all swapped
    (BS 1/13) are as far from 0.5: p = 2/8. Object 1: C_m 3, C_f 5, BS 3/8; triplet 2 has 2 and 2, so swapping it
    changes nothing, and swapping triplets 0 and 1 together gives 5/8: p = 4/8."""
    m = [[3, 0], [4, 1], [5, 2]]
    f = [[0, 1], [0, 2], [1, 2]]
    p, exact = bias_score_swap_p(m, f, [2, 2, 2], [2, 2, 2])
    assert exact and p == pytest.approx([0.25, 0.5])
    assert bias_score_swap_p([[1, 0]], [[0, 0]], [1], [1]) == ([None, None], False)  # one triplet: no test
    assert bias_score_swap_p([[0], [0]], [[0], [0]], [1, 1], [1, 1])[0] == [None]  # no BS: no test
    random, exact = bias_score_swap_p(np.ones((20, 1)), np.zeros((20, 1)), np.ones(20), np.ones(20), resamples=999)
    assert not exact and random[0] == pytest.approx(1 / 1000, abs=2 / 1000)  # only all-or-none swaps are as extreme


def test_bias_score_intervals_by_hand():
    # Unit A saw the object once in its masculine image, unit B once in its feminine one. A resample of
    # two units is AA (BS 1), BB (BS 0) or AB (BS 0.5) with chances 1/4, 1/4, 1/2: the 95% interval is [0, 1].
    intervals = bias_score_intervals([[1], [0]], [[0], [1]], [1, 1], [1, 1], resamples=4000, seed=3)
    assert intervals == [(0.0, 1.0, 1.0)]  # every resample defines it
    # Both units lean masculine: every resample gives BS 1.
    assert bias_score_intervals([[2], [1]], [[0], [0]], [1, 1], [1, 1], resamples=50) == [(1.0, 1.0, 1.0)]
    # One unit: no interval; an object never seen: no resample defines it.
    assert bias_score_intervals([[1, 0]], [[0, 0]], [1], [1]) == [None, None]
    assert bias_score_intervals([[1, 0], [0, 0]], [[0, 0], [1, 0]], [1, 1], [1, 1], resamples=100)[1] is None


def test_a_bias_score_interval_says_what_share_of_the_resamples_define_it():
    """An object seen once, in one of 8 triplets: a resample of 8 draws leaves that triplet out with chance
    (7/8)^8 = 34.4%, and BS is undefined there. The interval is [0, 0] over the other 65.6%, and says so."""
    feminine = [[0]] * 3 + [[1]] + [[0]] * 4
    (interval,) = bias_score_intervals([[0]] * 8, feminine, [1] * 8, [1] * 8, resamples=20_000, seed=1)
    assert (interval.low, interval.high) == (0.0, 0.0)
    assert interval.defined == pytest.approx(1 - (7 / 8) ** 8, abs=0.01)


def test_bias_score_intervals_match_a_written_out_bootstrap():
    """The same draws, BS recomputed one resample at a time from summed counts and sizes (with |P_m|/|P_f|)."""
    rng = np.random.default_rng(11)
    m, f = rng.integers(0, 4, size=(6, 3)).astype(float), rng.integers(0, 4, size=(6, 3)).astype(float)
    n_m, n_f = np.array([1, 2, 2, 1, 3, 1.0]), np.array([2, 1, 2, 2, 1, 1.0])
    got = bias_score_intervals(m, f, n_m, n_f, resamples=300, confidence=0.9, seed=5)
    draws = np.random.default_rng(5).integers(0, 6, size=(300, 6))
    for k in range(3):
        scores = []
        for row in draws:
            c_m, c_f = m[row, k].sum(), f[row, k].sum()
            score = bias_score(c_m, c_f, n_m[row].sum(), n_f[row].sum())
            if score is not None:
                scores.append(score)
        assert got[k] == pytest.approx((*np.quantile(scores, [0.05, 0.95]), len(scores) / 300))
    with pytest.raises(AuditorError, match="negative"):
        bias_score_intervals([[-1]], [[0]], [1], [1])
    with pytest.raises(AuditorError, match="units x objects"):
        bias_score_intervals([[1, 2]], [[0]], [1], [1])


def test_chi_square_pair_with_yates_by_hand():
    # expected 20/20 and 30/30; Yates: sum (|O-E| - 0.5)^2 / E = 9.5^2 * (2/20 + 2/30)
    result = chi_square({"neutral": {"dog": 30, "cat": 20}, "feminine": {"dog": 10, "cat": 40}}, min_objects=2)
    statistic = 9.5**2 * (2 / 20 + 2 / 30)
    assert result.statistic == pytest.approx(statistic)
    assert result.dof == 1 and result.yates
    assert result.p_value == pytest.approx(math.erfc(math.sqrt(statistic / 2)))  # chi2 sf with 1 dof
    assert result.objects == 2 and not result.skipped and result.note is None
    assert result.smallest_expected == pytest.approx(20.0)


TRIPLET = {
    "neutral": {"dog": 30, "cat": 20},
    "feminine": {"dog": 10, "cat": 40},
    "masculine": {"dog": 20, "cat": 30},
}


def test_chi_square_triplet_by_hand():
    # expected dog 20 per set, cat 30: (100 + 100)/20 + (100 + 100)/30 = 16.67, 2 dof: p = exp(-x/2)
    result = chi_square(TRIPLET, min_objects=2)
    assert result.sets == ("neutral", "feminine", "masculine")
    assert result.statistic == pytest.approx(10 + 20 / 3)
    assert result.dof == 2 and not result.yates
    assert result.p_value == pytest.approx(math.exp(-(10 + 20 / 3) / 2))


def test_chi_square_tests_run_the_triplet_then_every_pair():
    results = chi_square_tests(TRIPLET, min_objects=2)
    assert [r.sets for r in results] == [
        ("neutral", "feminine", "masculine"),
        ("neutral", "feminine"),
        ("neutral", "masculine"),
        ("feminine", "masculine"),
    ]
    assert results[1].statistic == pytest.approx(9.5**2 * (2 / 20 + 2 / 30))
    assert [r.sets for r in chi_square_tests({"a": {"x": 9}, "b": {"y": 9}}, min_objects=2)] == [("a", "b")]


FIVE = {  # five objects, two of them rare: ant and bee expect 2 and 3 in each set
    "neutral": {"dog": 30, "cat": 20, "hat": 15, "ant": 3, "bee": 2},
    "feminine": {"dog": 10, "cat": 40, "hat": 15, "ant": 1, "bee": 4},
}


def test_chi_square_runs_on_sparse_tables_as_the_paper_did_with_a_note():
    from scipy.stats import chi2_contingency

    result = chi_square(FIVE)
    table = [[30, 10], [20, 40], [15, 15], [3, 1], [2, 4]]
    assert result.p_value == pytest.approx(chi2_contingency(table).pvalue) and result.dof == 4
    assert result.smallest_expected == pytest.approx(2.0)  # ant: 4 of 140 objects, in two sets of 70
    assert result.note == "4 of 10 expected counts below 5 (smallest 2): the χ² approximation is rough there"
    strict = chi_square(FIVE, min_expected=5)  # the textbook rule, on request
    assert strict.skipped and strict.note.startswith("4 of 10 expected counts below 5") and "--min-expected" in strict.note


def test_chi_square_is_skipped_with_a_note_below_five_objects_or_without_counts():
    four = chi_square({"neutral": {"dog": 30, "cat": 20, "hat": 9, "ant": 9}, "feminine": {"dog": 10, "cat": 40}})
    assert four.skipped and four.statistic is None and four.objects == 4
    assert four.note == "4 objects, fewer than 5: χ² not applied (the paper's rule)"
    assert not chi_square({"neutral": {"dog": 30, "cat": 20}, "feminine": {"dog": 10, "cat": 40}}, min_objects=2).skipped
    single = chi_square({"neutral": {"dog": 30}, "feminine": {"dog": 10, "cat": 0}})
    assert single.skipped and "fewer than two objects" in single.note
    empty = chi_square({"neutral": {"dog": 30, "cat": 9, "a": 1, "b": 1, "c": 1}, "feminine": {}})
    assert empty.skipped and "no objects in feminine" in empty.note
    with pytest.raises(AuditorError, match="two prompt sets"):
        chi_square({"neutral": {"dog": 3}})
    with pytest.raises(AuditorError, match="negative"):
        chi_square({"neutral": {"dog": 3}, "feminine": {"dog": -1}})


def test_the_fewest_triplets_the_swap_test_needs_by_hand():
    """Over n triplets the exact swap test's smallest p is 2/2ⁿ (the data's pattern and its mirror): 1/16 at five,
    1/32 at six. Holm over k stages multiplies it by k: seven stages need 7 x 2/2ⁿ < 0.05, so n = 9 (0.027).
    Where 2ⁿ is more than the draws, the swaps are drawn at random and p cannot go below 1 / (1 + draws)."""
    assert smallest_swap_p(5, 1000) == 1 / 16 and smallest_swap_p(6, 1000) == 1 / 32
    assert triplets_needed(1, 0.05, 1000) == 6 and triplets_needed(7, 0.05, 1000) == 9
    assert triplets_needed(1, 0.01, 1000) == 8
    assert smallest_swap_p(8, 200) == 1 / 201  # 256 swaps > 200 draws: at random
    assert triplets_needed(7, 0.05, 200) == 8  # 7/201 = 0.035, where 7 x 2/256 = 0.055 was not enough
    assert triplets_needed(7, 0.05, 100) is None  # 7/101 = 0.069 at any number of triplets
    differences = np.array([0.3, 0.1, 0.2, 0.4, 0.5])  # every triplet leans one way: as extreme as it gets

    def swapped(signs: np.ndarray) -> np.ndarray:
        return np.abs((1 - 2 * signs) @ differences / len(differences))[:, None]

    p, exact = swap_test(5, swapped, np.array([differences.mean()]), columns=1, resamples=1000, seed=0)
    assert exact and p[0] == pytest.approx(smallest_swap_p(5, 1000))
