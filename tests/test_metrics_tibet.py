"""TIBET metrics against hand computations (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import pytest

from auditor.metrics import tibet

# Two merged histograms with different totals, so the normalisations disagree.
P = {"a": 1.0, "b": 0.5}  # sum 1.5
Q = {"a": 0.5, "c": 0.5}  # sum 1.0


def test_cas_frequency_by_hand():
    # min: a min(1, .5) = .5; b, c min with 0 = 0            -> .5
    # max: a 1 + b .5 + c .5                                  -> 2
    assert tibet.cas(P, Q, "frequency") == pytest.approx(0.25)


def test_cas_distribution_by_hand():
    # P / 1.5 = {a: 2/3, b: 1/3};  Q / 1 = {a: 1/2, c: 1/2}
    # min: a 1/2 -> 1/2;  max: a 2/3 + b 1/3 + c 1/2 = 3/2  -> 1/3
    assert tibet.cas(P, Q, "distribution") == pytest.approx(1 / 3)
    assert tibet.cas(P, Q) == tibet.cas(P, Q, "distribution")  # the default


def test_cas_distribution_ignores_scale_frequency_does_not():
    doubled = {key: 2 * value for key, value in Q.items()}
    assert tibet.cas(P, doubled, "distribution") == pytest.approx(tibet.cas(P, Q, "distribution"))
    # frequency: min a 1 -> 1; max a 1 + b .5 + c 1 = 2.5 -> 0.4
    assert tibet.cas(P, doubled, "frequency") == pytest.approx(0.4)


@pytest.mark.parametrize("normalization", ["distribution", "frequency"])
def test_cas_edges(normalization):
    assert tibet.cas(P, P, normalization) == 1.0
    assert tibet.cas(P, {"z": 3.0}, normalization) == 0.0  # concepts on both sides, none shared: 0


@pytest.mark.parametrize("normalization", ["distribution", "frequency"])
def test_cas_of_a_set_without_concepts_is_none(normalization):
    # nothing to compare is not "nothing in common": no number, never 0 and never a division error
    assert tibet.cas(P, {}, normalization) is None
    assert tibet.cas({}, Q, normalization) is None
    assert tibet.cas({}, {}, normalization) is None
    assert tibet.cas(P, {"z": 0.0}, normalization) is None  # a histogram without mass has no concept either


def test_cas_rejects_unknown_normalization():
    with pytest.raises(ValueError, match="unknown CAS normalisation"):
        tibet.cas(P, Q, "softmax")  # type: ignore[arg-type]


def test_bav_is_population_variance():
    # mean .4; squared deviations .04, 0, .04; / 3 (ddof=0) -> 0.08/3
    assert tibet.bav([0.2, 0.4, 0.6]) == pytest.approx(0.08 / 3)
    # two values: ((a - b) / 2)^2 = (0.3 / 2)^2 = 0.0225
    assert tibet.bav([0.1, 0.4]) == pytest.approx(0.0225)



def test_bav_leaves_out_missing_cas_and_needs_two_values():
    # None (a counterfactual without concepts) is left out: the variance of .1 and .4 as above
    assert tibet.bav([0.1, None, 0.4]) == pytest.approx(0.0225)
    # a variance of one value says nothing: no BAV, not 0
    assert tibet.bav([0.7]) is None
    assert tibet.bav([0.7, None]) is None
    assert tibet.bav([None, None]) is None
    assert tibet.bav([]) is None
    assert tibet.bav([0.3, 0.3]) == 0.0  # two equal values: a real 0


def test_bav_mad_by_hand():
    # x = [.2, .4, .6] / 1.2 = [1/6, 1/3, 1/2]; mean 1/3; mean |x - 1/3| = (1/6 + 0 + 1/6) / 3 = 1/9 -> sqrt 1/3
    # one-hot [1, 0, 0]: mean 1/3; mean |dev| = (2/3 + 1/3 + 1/3) / 3 = 4/9 -> sqrt 2/3;  1/3 / (2/3) = 1/2
    assert tibet.bav_mad([0.2, 0.4, 0.6]) == pytest.approx(0.5)
    # x = [.1, .3] / .4 = [1/4, 3/4]; mean |dev| = 1/4 -> sqrt 1/2; one-hot [1, 0]: 1/2 -> sqrt(1/2); ratio 1/sqrt 2
    assert tibet.bav_mad([0.1, 0.3]) == pytest.approx(1 / math.sqrt(2))
    # a one-hot CAS vector is the largest spread: exactly 1, whatever its scale
    assert tibet.bav_mad([0.0, 0.7, 0.0, 0.0]) == pytest.approx(1.0)
    assert tibet.bav_mad([0.3, 0.3, 0.3]) == 0.0


def test_bav_mad_reads_float_noise_as_no_spread_in_the_point_estimate_and_its_resamples():
    """0.1 + 0.2 and 0.3 are one CAS summed in two orders (1 ulp apart): the square root would make that
    ~1e-8. Both paths give 0 there, and agree on a real spread just above the noise floor."""
    from auditor.metrics.resampled import bav_mad_samples

    equal = [0.1 + 0.2, 0.3]
    assert equal[0] != equal[1]
    assert tibet.bav_mad(equal) == 0.0 and bav_mad_samples([equal]).tolist() == [0.0]
    # x = [1/2 + e, 1/2 - e] has mean |dev| e, one-hot 1/2: sqrt(2e); e = 1e-9 is above the floor
    close = [0.5 + 1e-9, 0.5 - 1e-9]
    assert tibet.bav_mad(close) == pytest.approx(math.sqrt(2e-9), rel=1e-6)
    assert bav_mad_samples([close])[0] == pytest.approx(tibet.bav_mad(close), rel=1e-6)


def test_bav_mad_defined_without_division_by_zero():
    assert tibet.bav_mad([0.0, 0.0, 0.0]) == 0.0  # all zero: no counterfactual favoured
    assert tibet.bav_mad([0.8]) is None  # one value: no spread to measure
    assert tibet.bav_mad([0.8, None]) is None
    assert tibet.bav_mad([]) is None
    # None is left out: [.1, .3] as in test_bav_mad_by_hand
    assert tibet.bav_mad([None, 0.1, 0.3]) == pytest.approx(1 / math.sqrt(2))
    with pytest.raises(ValueError):
        tibet.bav_mad([0.5, -0.1])


def test_relative_bav():
    assert tibet.relative_bav([0.02, 0.01, 0.0]) == pytest.approx([1.0, 0.5, 0.0])
    assert tibet.relative_bav([0.0, 0.0]) == [0.0, 0.0]
    assert tibet.relative_bav([]) == []
    # an axis without BAV stays without; the others are divided by the largest BAV there is
    assert tibet.relative_bav([0.01, None, 0.02]) == pytest.approx([0.5, None, 1.0])
    assert tibet.relative_bav([None, None]) == [None, None]


def test_top_k_orders_by_frequency_then_alphabet():
    histogram = {"nurse": 0.5, "coat": 0.9, "apron": 0.5, "lab": 0.1}
    assert tibet.top_k(histogram, 3) == [("coat", 0.9), ("apron", 0.5), ("nurse", 0.5)]
    assert tibet.top_k(histogram, 10) == [("coat", 0.9), ("apron", 0.5), ("nurse", 0.5), ("lab", 0.1)]
    assert tibet.top_k({}, 5) == []


@pytest.mark.parametrize(
    ("prompt", "gender"),
    [
        ("a photo of a male nurse", "male"),
        ("A photo of a Woman nurse.", "female"),
        ("two women doctors", "female"),  # 'women' is not read as 'men'
        ("a boy", "male"),
        ("a photo of a nurse", None),
        ("a man and a woman", None),  # both: not one-sided
    ],
)
def test_prompt_gender(prompt, gender):
    assert tibet.prompt_gender(prompt) == gender


def test_occupation_lean():
    prompts = ["a photo of a female nurse", "a photo of a male nurse", "a photo of a non-binary nurse"]
    # CAS(male) - CAS(female) = 0.45 - 0.6
    assert tibet.occupation_lean(prompts, [0.6, 0.45, 0.2]) == pytest.approx(-0.15)
    assert tibet.occupation_lean(["a young nurse", "an old nurse"], [0.5, 0.2]) is None
    # two male counterfactuals: which pair to compare is ambiguous
    assert tibet.occupation_lean(["a man", "a boy", "a woman"], [0.1, 0.2, 0.3]) is None
    with pytest.raises(ValueError):
        tibet.occupation_lean(prompts, [0.1])


def test_occupation_lean_uses_only_counterfactuals_with_a_cas():
    prompts = ["a photo of a female nurse", "a photo of a male nurse"]
    assert tibet.occupation_lean(prompts, [None, 0.45]) is None  # the female side has no CAS
    assert tibet.occupation_lean(prompts, [0.6, None]) is None
    # two male counterfactuals, one without CAS: the pair among the scored ones is clear
    assert tibet.occupation_lean(["a man", "a boy", "a woman"], [0.1, None, 0.3]) == pytest.approx(-0.2)
