"""T2IAT statistics against hand computations (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from auditor.core.errors import AuditorError
from auditor.metrics import t2iat


def test_association_scores_by_hand_and_normalises_rows():
    # x1 = (1, 0); x2 = (3, 4) -> unit (0.6, 0.8). A = {(2, 0)} -> unit (1, 0); B = {(0, 5), (0, 1)} -> (0, 1) twice.
    # Asc(x1) = cos(x1, a) - mean_b cos(x1, b) = 1 - 0 = 1
    # Asc(x2) = 0.6 - 0.8 = -0.2
    asc = t2iat.association_scores(np.array([[1.0, 0], [3, 4]]), np.array([[2.0, 0]]), np.array([[0.0, 5], [0, 1]]))
    np.testing.assert_allclose(asc, [1.0, -0.2], atol=1e-12)


def test_association_scores_average_over_attribute_images():
    # x = (1, 0); A = {(1, 0), (0, 1)}: mean cos = (1 + 0) / 2 = 0.5; B = {(0.6, 0.8)}: cos = 0.6
    # Asc = 0.5 - 0.6 = -0.1
    asc = t2iat.association_scores(np.array([[1.0, 0]]), np.array([[1.0, 0], [0, 1]]), np.array([[0.6, 0.8]]))
    np.testing.assert_allclose(asc, [-0.1], atol=1e-12)


def test_s_d_and_exact_p_by_hand():
    asc_x, asc_y = np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0])
    # S = mean(1, 2, 3) - mean(0, 1) = 2 - 0.5 = 1.5
    assert t2iat.differential_association(asc_x, asc_y) == pytest.approx(1.5)
    # (n_x - 1) s_x^2 = (1-2)^2 + 0 + (3-2)^2 = 2; (n_y - 1) s_y^2 = 0.25 + 0.25 = 0.5
    # s = sqrt((2 + 0.5) / (3 + 2 - 2)) = sqrt(0.8333...) = 0.912870929...
    assert t2iat.pooled_standard_deviation(asc_x, asc_y) == pytest.approx(math.sqrt(2.5 / 3))
    # d = 1.5 / 0.912870929 = 1.643167672
    assert t2iat.effect_size(asc_x, asc_y) == pytest.approx(1.643167672, abs=1e-9)
    # Splits of {1, 2, 3, 0, 1} into 3 + 2: C(5, 3) = 10. With T the X~ sum (total 7),
    # S~ = T/3 - (7 - T)/2 = (5T - 21)/6, so |S~| >= 1.5 <=> T >= 6 or T <= 2.4.
    # X~ sums: {1,2,3}=6 {1,2,0}=3 {1,2,1}=4 {1,3,0}=4 {1,3,1}=5 {1,0,1}=2 {2,3,0}=5 {2,3,1}=6 {2,0,1}=3 {3,0,1}=4
    # hits: 6, 6 and 2 -> p = 3/10
    test = t2iat.permutation_test(asc_x, asc_y)
    assert test == t2iat.PermutationTest(p_value=0.3, exact=True, permutations=10)


def test_full_association_test_from_six_groups_by_hand():
    # X = {(1,0), (0.6,0.8)}, Y = {(0,1), (0.8,0.6)}; XA = YA = {(1,0)}, XB = YB = {(0,1)}.
    # Asc(x) = x[0] - x[1]: Asc_X = [1, -0.2] (mean 0.4), Asc_Y = [-1, 0.2] (mean -0.4); S = 0.8
    # SS_x = 0.6^2 + 0.6^2 = 0.72 = SS_y; s = sqrt(1.44 / 2) = 0.848528; d = 0.8 / 0.848528 = 0.942809 (large)
    # Splits of {1, -0.2, -1, 0.2} into 2 + 2 (total 0, so S~ = T/2 - (0 - T)/2 = T):
    # X~ sums 0.8, 0, 1.2, -1.2, 0, -0.8 -> 4 of 6 with |S~| >= 0.8
    e1, e2 = np.array([[1.0, 0]]), np.array([[0.0, 1]])
    result = t2iat.association_test(
        np.array([[1.0, 0], [0.6, 0.8]]), np.array([[0.0, 1], [0.8, 0.6]]), e1, e2, e1, e2, permutations=100, seed=3
    )
    assert result.association == pytest.approx(0.8)
    assert result.effect_size == pytest.approx(0.8 / math.sqrt(0.72))
    assert result.effect_label == "large"
    assert result.p_value == pytest.approx(4 / 6)
    assert (result.exact, result.permutations, result.n_x, result.n_y) == (True, 6, 2, 2)


def test_effect_labels_follow_cohen_thresholds_on_absolute_d():
    assert t2iat.effect_label(0.19) == "negligible"
    assert t2iat.effect_label(0.2) == "small"
    assert t2iat.effect_label(-0.49) == "small"
    assert t2iat.effect_label(-0.5) == "medium"
    assert t2iat.effect_label(0.8) == "large"
    assert t2iat.effect_label(-3.0) == "large"
    # d undefined (no spread within the groups): no size can be named, whatever S is.
    assert t2iat.effect_label(None) == "undefined"


def test_pooled_sd_handles_a_single_image_group_and_zero_spread():
    # asc_x = [1]: contributes 0; asc_y = [0, 2]: (0-1)^2 + (2-1)^2 = 2; s = sqrt(2 / (1 + 2 - 2)) = sqrt(2)
    assert t2iat.pooled_standard_deviation([1.0], [0.0, 2.0]) == pytest.approx(math.sqrt(2))
    # S = 1 - 1 = 0 -> d = 0
    assert t2iat.effect_size([1.0], [0.0, 2.0]) == pytest.approx(0.0)
    assert t2iat.pooled_standard_deviation([1.0], [2.0]) is None  # n_x + n_y - 2 = 0
    assert t2iat.effect_size([0.5, 0.5], [0.1, 0.1]) is None  # every value equal within its group


def test_the_combined_sd_is_the_population_sd_of_both_groups_as_the_authors_notebook_computes_it():
    asc_x, asc_y = np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0])
    # all five values: mean 7/5 = 1.4; squared deviations 0.16 + 0.36 + 2.56 + 1.96 + 0.16 = 5.2; / 5 -> 1.04
    assert t2iat.combined_standard_deviation(asc_x, asc_y) == pytest.approx(math.sqrt(1.04))
    assert t2iat.effect_size(asc_x, asc_y, "combined") == pytest.approx(1.5 / math.sqrt(1.04))  # 1.4708, pooled 1.6432
    # Separated groups with no spread within them: S = 0.4 over the gap's sd 0.2 (values 0.5, 0.5, 0.1, 0.1) -> 2.
    assert t2iat.effect_size([0.5, 0.5], [0.1, 0.1], "combined") == pytest.approx(2.0)
    assert t2iat.effect_size([0.5, 0.5], [0.1, 0.1]) is None
    assert t2iat.effect_size([0.2, 0.2], [0.2], "combined") is None  # every value equal: no spread at all
    assert t2iat.combined_standard_deviation([1.0], [2.0]) is None  # fewer than three values, as the pooled sd
    result = t2iat.association_result(asc_x, asc_y, spread="combined")
    assert result.effect_size_sd == "combined" and result.effect_label == "large"


def _ulps(value: float, steps: int) -> float:
    """``value`` moved ``steps`` representable doubles up (down when negative): float rounding noise."""
    for _ in range(abs(steps)):
        value = float(np.nextafter(value, math.inf if steps > 0 else -math.inf))
    return value


@pytest.mark.parametrize(
    ("asc_x", "asc_y"),
    [
        ([0.2, 0.2, 0.2], [0.2, 0.2]),  # identical groups: S = 0, s = 0
        ([0.5, 0.5], [0.1, 0.1]),  # perfectly separated constant groups: S = 0.4, s = 0
        # the same groups with rounding noise of one or two ulps (~1e-17): s ~ 3e-17, so
        # d = S / s would be ~1e16, "large"; relative to max |Asc| = 0.5, s is 6e-17 -> undefined
        ([0.5, _ulps(0.5, 1), _ulps(0.5, -2)], [0.1, _ulps(0.1, 1), 0.1]),
        ([_ulps(0.2, 1), 0.2, 0.2], [0.2, _ulps(0.2, -1)]),
    ],
)
def test_d_is_undefined_when_the_pooled_sd_is_zero_relative_to_the_asc_scale(asc_x, asc_y):
    assert t2iat.effect_size(asc_x, asc_y) is None
    result = t2iat.association_result(np.array(asc_x), np.array(asc_y))
    assert result.effect_size is None and result.effect_label == "undefined"


def test_a_small_spread_on_a_small_scale_still_gives_d():
    # The tolerance is relative to max |Asc|: Asc values around 1e-6 with a spread of 1e-9
    # are a real (if tiny) association. SS_x = 2 * (0.5e-9)^2 = SS_y; s = sqrt(1e-18 / 2) = 7.0711e-10;
    # S = 1.0005e-6 - 0.0005e-6 = 1e-6 -> d = 1e-6 / 7.0711e-10 = 1414.2 (large)
    asc_x, asc_y = np.array([1e-6, 1.001e-6]), np.array([0.0, 1e-9])
    assert t2iat.effect_size(asc_x, asc_y) == pytest.approx(1e-6 / math.sqrt(0.5e-18), rel=1e-6)
    assert t2iat.association_result(asc_x, asc_y).effect_label == "large"
    # fewer than three values: s itself is undefined
    assert t2iat.association_result(np.array([0.3]), np.array([0.1])).effect_label == "undefined"


def test_monte_carlo_p_is_within_its_standard_error_of_the_exact_value():
    rng = np.random.default_rng(7)
    asc_x, asc_y = rng.normal(0.3, 1, size=10), rng.normal(0.0, 1, size=10)
    exact = t2iat.permutation_test(asc_x, asc_y)  # C(20, 10) = 184,756 <= 200,000 -> enumerated
    assert exact.exact and exact.permutations == 184_756
    n = 20_000
    sampled = t2iat.permutation_test(asc_x, asc_y, permutations=n, seed=11, exact_limit=0)
    assert not sampled.exact and sampled.permutations == n
    standard_error = math.sqrt(exact.p_value * (1 - exact.p_value) / n)
    assert 0.05 < exact.p_value < 0.95  # an informative case, not a trivially 0 or 1 p
    assert abs(sampled.p_value - exact.p_value) <= 3 * standard_error
    # The reported value is (1 + hits) / (1 + n) for an integer hits count.
    hits = sampled.p_value * (n + 1) - 1
    assert hits == pytest.approx(round(hits), abs=1e-6)


def test_monte_carlo_is_used_above_the_split_limit_and_is_seeded():
    rng = np.random.default_rng(0)
    asc_x, asc_y = rng.normal(size=11), rng.normal(size=11)  # C(22, 11) = 705,432 > 200,000
    first = t2iat.permutation_test(asc_x, asc_y, permutations=500, seed=5)
    assert not first.exact and first.permutations == 500
    assert t2iat.permutation_test(asc_x, asc_y, permutations=500, seed=5) == first
    assert first.p_value >= 1 / 501


def test_clear_separation_gives_the_smallest_exact_p():
    # All 4 X values above all 4 Y values: only the observed split and its mirror reach |S|: p = 2 / C(8, 4) = 2/70
    test = t2iat.permutation_test([10.0, 11, 12, 13], [0.0, 1, 2, 3])
    assert test.exact and test.p_value == pytest.approx(2 / 70)


def test_self_association_leaves_each_image_out_of_its_own_set():
    # A = {a1=(1,0), a2=(0.6,0.8)}, B = {b1=(0,1), b2=(0.8,0.6)}
    # Asc(a1) = cos(a1,a2) - mean(cos(a1,b1), cos(a1,b2)) = 0.6 - (0 + 0.8)/2 = 0.2
    # Asc(a2) = cos(a2,a1) - mean(cos(a2,b1), cos(a2,b2)) = 0.6 - (0.8 + 0.96)/2 = -0.28
    # Asc(b1) = mean(cos(b1,a1), cos(b1,a2)) - cos(b1,b2) = (0 + 0.8)/2 - 0.6 = -0.2
    # Asc(b2) = mean(cos(b2,a1), cos(b2,a2)) - cos(b2,b1) = (0.8 + 0.96)/2 - 0.6 = 0.28
    asc_a, asc_b = t2iat.self_association_scores(np.array([[1.0, 0], [0.6, 0.8]]), np.array([[0.0, 1], [0.8, 0.6]]))
    np.testing.assert_allclose(asc_a, [0.2, -0.28], atol=1e-12)
    np.testing.assert_allclose(asc_b, [-0.2, 0.28], atol=1e-12)
    with pytest.raises(AuditorError, match="at least two"):
        t2iat.self_association_scores(np.array([[1.0, 0]]), np.array([[0.0, 1], [0.8, 0.6]]))


def test_single_concept_association_compares_neutral_images_with_the_balanced_mix():
    a, b = np.array([[1.0, 0], [0.6, 0.8]]), np.array([[0.0, 1], [0.8, 0.6]])
    neutral = np.array([[1.0, 0], [0.8, 0.6]])
    # mean A = (0.8, 0.4), mean B = (0.4, 0.8): Asc(x) = x . (0.4, -0.4) -> [0.4, 0.08]
    # The mix's Asc (above): [0.2, -0.28, -0.2, 0.28], mean 0. S = mean(0.4, 0.08) - 0 = 0.24
    asc, result = t2iat.single_concept_association(neutral, a, b, permutations=50, seed=0)
    np.testing.assert_allclose(asc, [0.4, 0.08], atol=1e-12)
    assert result.association == pytest.approx(0.24)
    assert (result.n_x, result.n_y, result.exact, result.permutations) == (2, 4, True, 15)  # C(6, 2) = 15


def test_mean_cosine_by_hand():
    # pairs: cos((1,0),(1,0)) = 1, cos((1,0),(0,1)) = 0, cos((0,2),(1,0)) = 0, cos((0,2),(0,1)) = 1 -> mean 0.5
    assert t2iat.mean_cosine(np.array([[1.0, 0], [0, 2]]), np.array([[1.0, 0], [0, 1]])) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ({"XA": np.zeros((0, 2))}, "XA is empty"),
        ({"Y": np.array([[np.nan, 1.0]])}, "Y contains NaN or infinite"),
        ({"YB": np.array([[np.inf, 1.0]])}, "YB contains NaN or infinite"),
        ({"X": np.ones((2, 3))}, "embedding dimensions differ: X=3, Y=2"),
        ({"XB": np.zeros((1, 2))}, "XB has an all-zero row"),
        ({"X": np.ones(2)}, "X must be a 2-D array"),
    ],
)
def test_bad_embeddings_are_one_line_errors(groups, message):
    arrays = {name: np.array([[1.0, 0.5]]) for name in ("X", "Y", "XA", "XB", "YA", "YB")} | groups
    with pytest.raises(AuditorError, match=message):
        t2iat.association_test(**{name.lower(): array for name, array in arrays.items()})


def test_bad_association_scores_are_refused():
    with pytest.raises(AuditorError, match="non-empty"):
        t2iat.association_result(np.array([]), np.array([1.0]))
    with pytest.raises(AuditorError, match="NaN"):
        t2iat.permutation_test(np.array([np.nan]), np.array([1.0]))


# --------------------------------------------------------------------------- embedding scores of a prompt audit


def _scores_for(plan):
    from auditor.records import AxisScore, CounterfactualScore, Scores

    axes = [
        AxisScore(
            axis=axis.name,
            counterfactuals=[
                CounterfactualScore(prompt_id=f"{axis.name}/{k}", prompt=cf, cas=0.5)
                for k, cf in enumerate(axis.counterfactuals)
            ],
            bav=0.0,
            bav_mad=0.0,
            relative_bav=0.0,
        )
        for axis in plan.axes
    ]
    return Scores(cas_normalization="distribution", axes=axes, top_concepts={}, axis_top_concepts={})


def test_embedding_scores_of_a_two_counterfactual_axis_by_hand():
    from auditor.records import ScoringSettings
    from auditor.scoring.embeddings import apply_embedding_scores, embedding_scores
    from tests.factories import make_plan

    plan = make_plan()  # gender axis: 'gender/0' male, 'gender/1' female
    embeddings = {
        "initial": np.array([[1.0, 0], [0.8, 0.6]]),
        "gender/0": np.array([[1.0, 0], [0.6, 0.8]]),
        "gender/1": np.array([[0.0, 1], [0.8, 0.6]]),
    }
    similarities, associations = embedding_scores(plan, embeddings, ScoringSettings())
    # mean cosine over all pairs = mean(initial) . mean(cf): (0.9, 0.3).(0.8, 0.4) = 0.84; (0.9, 0.3).(0.4, 0.8) = 0.6
    assert similarities == pytest.approx({"gender/0": 0.84, "gender/1": 0.60})
    # Same arrays as the single-concept test above: S = 0.24 (initial images lean to the male counterfactual)
    assert associations["gender"].association == pytest.approx(0.24)
    assert associations["gender"].n_x == 2 and associations["gender"].n_y == 4

    scores = apply_embedding_scores(_scores_for(plan), plan, embeddings, ScoringSettings())
    gender = scores.axes[0]
    assert [cf.embedding_similarity for cf in gender.counterfactuals] == pytest.approx([0.84, 0.60])
    assert gender.association == associations["gender"]
    assert scores.warnings == []


def test_apply_embedding_scores_warns_about_missing_sets():
    from auditor.records import ScoringSettings
    from auditor.scoring.embeddings import apply_embedding_scores
    from tests.factories import make_plan

    plan = make_plan()
    embeddings = {
        "initial": np.array([[1.0, 0], [0.8, 0.6]]),
        "gender/0": np.array([[1.0, 0]]),  # one image: similarity yes, leave-one-out association no
        "gender/1": np.zeros((0, 0), np.float32),  # every image flagged
    }
    scores = apply_embedding_scores(_scores_for(plan), plan, embeddings, ScoringSettings())
    gender = scores.axes[0]
    assert gender.counterfactuals[0].embedding_similarity == pytest.approx(0.9)  # (0.9, 0.3).(1, 0)
    assert gender.counterfactuals[1].embedding_similarity is None
    assert gender.association is None
    assert any("gender/1" in w for w in scores.warnings) and any("association" in w for w in scores.warnings)
    none = apply_embedding_scores(_scores_for(plan), plan, {}, ScoringSettings())
    assert none.warnings == ["no embeddings of the initial images: embedding scores left out"]


def test_embedding_scores_keep_a_missing_cas_and_its_warning():
    """A counterfactual whose images were all flagged has no CAS and no embeddings: both stay missing, warned about."""
    from auditor.records import Scores, ScoringSettings
    from auditor.scoring.embeddings import apply_embedding_scores
    from tests.factories import make_plan

    plan = make_plan()
    data = _scores_for(plan).model_dump()
    gender = data["axes"][0]
    gender["counterfactuals"][1] |= {"cas": None, "warnings": ["no concepts"]}
    gender |= {"bav": None, "bav_mad": None, "relative_bav": None}
    embeddings = {"initial": np.array([[1.0, 0], [0.8, 0.6]]), "gender/0": np.array([[1.0, 0], [0.6, 0.8]])}
    scores = apply_embedding_scores(Scores.model_validate(data), plan, embeddings, ScoringSettings())
    scored = Scores.model_validate(scores.model_dump()).axes[0]  # still a valid record
    assert [cf.cas for cf in scored.counterfactuals] == [0.5, None] and scored.bav is None
    flagged = scored.counterfactuals[1]
    assert flagged.warnings == ["no concepts"] and flagged.embedding_similarity is None
    assert "gender/1: no usable image embeddings, so no embedding similarity" in scores.warnings
