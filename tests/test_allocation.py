"""The exploration's allocation arithmetic, its bootstrap p-value and the held-out difference test, by hand."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from auditor.metrics import bootstrap
from auditor.metrics.allocation import Bounds, eliminated, elimination_threshold, folded_interval, separated, top_arms
from auditor.records import Arm, ArmScore, ExploreRecord, Interval
from auditor.studies.explore_standings import top_separated

ARMS = [
    Bounds(0.10, 0.06, 0.14),  # 0: leads
    Bounds(0.05, 0.03, 0.07),  # 1: second
    Bounds(0.02, 0.00, 0.05),  # 2: upper 0.05 >= 0.03, stays
    Bounds(0.01, 0.00, 0.025),  # 3: upper 0.025 < 0.03, out
    Bounds(None, None, None),  # 4: not scored yet
    Bounds(0.04, None, None),  # 5: scored, no interval: never out
]


def test_top_arms_are_the_highest_values_and_ties_go_to_the_earlier_arm():
    assert top_arms(ARMS, 2) == [0, 1]
    assert top_arms(ARMS, 10) == [0, 1, 5, 2, 3]  # the unscored arm never leads
    assert top_arms([Bounds(0.2, 0, 1), Bounds(0.2, 0, 1), Bounds(0.3, 0, 1)], 2) == [2, 0]
    with pytest.raises(ValueError):
        top_arms(ARMS, 0)


def test_an_arm_is_out_when_its_upper_bound_is_below_every_leaders_lower_bound():
    assert elimination_threshold(ARMS, [0, 1]) == 0.03
    assert eliminated(ARMS, [0, 1]) == [3]
    assert eliminated(ARMS, [0, 5]) == []  # a leader without a lower bound decides nothing


def test_the_top_is_separated_only_when_every_other_upper_bound_is_below_every_leaders_lower_bound():
    assert not separated(ARMS, [0, 1], 2)  # arm 2 reaches 0.05 > 0.03, arm 5 has no bounds
    clear = [Bounds(0.10, 0.06, 0.14), Bounds(0.05, 0.04, 0.07), Bounds(0.01, 0.0, 0.035), Bounds(None, None, None)]
    assert separated(clear, [0, 1], 2)  # the unscored arm is not in the way
    assert not separated(clear[:2], [0, 1], 2)  # nothing to separate from
    assert not separated(clear, [0], 2)  # fewer than K leaders


@pytest.mark.parametrize(
    "low, high, folded",
    [
        (0.1, 0.3, (0.1, 0.3)),
        (-0.3, -0.1, (0.1, 0.3)),
        (-0.2, 0.3, (0.0, 0.3)),
        (-0.4, 0.1, (0.0, 0.4)),
        (None, 0.2, (None, None)),
    ],
)
def test_the_interval_of_an_absolute_value_is_the_folded_interval(low, high, folded):
    assert folded_interval(low, high) == folded


def test_p_value_above_zero_by_hand():
    samples = np.array([[0.3, -0.1], [0.2, 0.0], [-0.1, np.nan], [0.4, 0.5]])
    # column 0: one resample of four at or below 0 -> (1 + 1) / (1 + 4); column 1: two of three defined -> 3 / 4
    assert bootstrap.p_value_above(samples) == pytest.approx([0.4, 0.75])
    assert np.isnan(bootstrap.p_value_above(np.full((3, 1), np.nan))[0])
    assert bootstrap.p_value_above(np.array([[1.0], [2.0]]), value=1.5) == pytest.approx([2 / 3])


def test_difference_test_against_a_direct_bootstrap():
    """CAS(first) - CAS(second) and its p-value: the same resamples as the CAS intervals give."""
    from auditor.records import ImageAnswers, ScoringSettings
    from auditor.scoring.counts import answer_counts
    from auditor.scoring.uncertainty import BootstrapSettings, difference_test, score_intervals

    seeds = 12
    rng = np.random.default_rng(5)

    def images(p_female: float) -> list[ImageAnswers]:
        return [
            ImageAnswers(image_index=i, answers={"gender": "female" if rng.random() < p_female else "male"})
            for i in range(seeds)
        ]

    answers = {"initial": images(0.9), "gender/0": images(0.0), "gender/1": images(1.0)}
    axes = [("gender", ["a photo of a male nurse", "a photo of a female nurse"])]
    settings = ScoringSettings(include_captions=False)
    counts = answer_counts(answers, ["gender"], include_captions=False, seeds=seeds)
    boot = BootstrapSettings(resamples=400, seed=3)
    test = difference_test(axes, counts, settings, "gender/1", "gender/0", boot, alpha=0.1)
    found = test.interval
    lean = score_intervals(axes, counts, settings, boot).axes[0].lean  # CAS(male) - CAS(female): the opposite
    assert found.estimate == pytest.approx(-lean.estimate)
    assert (found.low, found.high) == pytest.approx((-lean.high, -lean.low))
    assert found.low > 0 and test.p_value == pytest.approx(1 / 401)  # no resample at or below 0
    # the one-sided 90% lower bound is the 10% quantile of the same resamples; the two-sided 95% one is the 2.5% one
    assert found.low <= test.lower_bound <= found.estimate
    other_way = difference_test(axes, counts, settings, "gender/0", "gender/1", boot, alpha=0.1)
    assert other_way.p_value == pytest.approx(1.0) and other_way.lower_bound < 0


def test_difference_test_with_bca_corrects_its_p_value_and_bound_as_the_interval():
    """With BCa intervals the test inverts BCa's one-sided bound: where p is below alpha, that bound is above 0."""
    from auditor.records import ImageAnswers, ScoringSettings
    from auditor.scoring.counts import answer_counts
    from auditor.scoring.uncertainty import BootstrapSettings, difference_test

    seeds, rng = 16, np.random.default_rng(11)
    settings = ScoringSettings(include_captions=False)
    axes = [("gender", ["a photo of a male nurse", "a photo of a female nurse"])]
    methods, moved = [], 0
    for p_female in (0.3, 0.4, 0.5, 0.6, 0.7):
        answers = {
            prompt_id: [
                ImageAnswers(image_index=i, answers={"gender": "female" if rng.random() < p else "male"})
                for i in range(seeds)
            ]
            for prompt_id, p in (("initial", p_female), ("gender/0", 0.2), ("gender/1", 0.8))
        }
        counts = answer_counts(answers, ["gender"], include_captions=False, seeds=seeds)
        for alpha in (0.05, 0.2):
            bca, plain = (
                difference_test(axes, counts, settings, "gender/1", "gender/0", boot, alpha=alpha)
                for boot in (BootstrapSettings(400, method="bca", seed=3), BootstrapSettings(400, seed=3))
            )
            methods.append(bca.method)
            assert plain.method == "percentile"
            if bca.method == "bca":
                assert bca.p_value >= alpha or bca.lower_bound > 0
                moved += bca.p_value != plain.p_value
    assert methods.count("bca") >= 8 and moved >= 4  # BCa is defined on most of these, and it moves p


def test_an_exploration_is_never_separated_while_an_arm_in_contention_is_unscored():
    """A round the budget cut short leaves new arms unseen: the top K are not 'separated from every other arm'."""
    def arm(number: int, state: str = "alive", bounds: tuple[float, float, float] | None = None) -> Arm:
        score = None
        if bounds is not None:
            value, low, high = bounds
            score = ArmScore.model_construct(value=value, ci=Interval.model_construct(low=low, high=high))
        return Arm.model_construct(arm_id=f"c{number}/gender", state=state, score=score)

    scored = [arm(0, bounds=(0.10, 0.06, 0.14)), arm(1, bounds=(0.05, 0.04, 0.07)), arm(2, bounds=(0.01, 0.0, 0.035))]
    config = SimpleNamespace(top_k=2)
    assert top_separated(ExploreRecord.model_construct(arms=scored, config=config))
    assert top_separated(ExploreRecord.model_construct(arms=[*scored, arm(3, "undefined")], config=config))
    assert not top_separated(ExploreRecord.model_construct(arms=[*scored, arm(3)], config=config))  # never scored
