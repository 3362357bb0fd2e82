"""Prompt-image dependency groups (Wu et al. 2025, §6.2) on hand-drawn 10x10 masks."""

from __future__ import annotations

import numpy as np
import pytest

from auditor.core.errors import AuditorError
from auditor.metrics.dependency_groups import (
    GROUPS,
    DetectedObject,
    ObjectAssignment,
    attention_mask,
    box_mask,
    coverage,
    dependency_groups,
)

SIGMA_WORDS = {"people", "person", "woman", "women", "man", "men"}


def block(rows: tuple[int, int], cols: tuple[int, int], shape=(10, 10)) -> np.ndarray:
    """Rows rows[0]..rows[1] and columns cols[0]..cols[1], inclusive."""
    mask = np.zeros(shape, dtype=bool)
    mask[rows[0] : rows[1] + 1, cols[0] : cols[1] + 1] = True
    return mask


def test_attention_mask_normalises_then_thresholds():
    # normalised: 0, 0.25, 0.5, 1 -> above 0.35: the bottom row
    assert attention_mask(np.array([[0.0, 1.0], [2.0, 4.0]])).tolist() == [[False, False], [True, True]]
    # exactly at θ is not above it
    assert attention_mask(np.array([[0.0, 35.0, 100.0]])).tolist() == [[False, False, True]]
    assert not attention_mask(np.full((3, 3), 7.0)).any()  # a constant map attends nowhere
    assert attention_mask(np.array([[0.0, 0.5, 1.0]]), threshold=0.6).tolist() == [[False, False, True]]
    with pytest.raises(AuditorError):
        attention_mask(np.zeros(4))


def test_box_mask_takes_pixels_whose_centre_is_inside():
    assert box_mask((1, 0, 3, 2), (3, 4)).astype(int).tolist() == [[0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0]]
    assert not box_mask((0.6, 0, 1.4, 1), (2, 2)).any()  # centres 0.5 and 1.5 are both outside
    assert box_mask((0.4, 0, 1.6, 1), (2, 2)).astype(int).tolist() == [[1, 1], [0, 0]]
    assert box_mask((-5, -5, 50, 50), (2, 3)).all()  # clipped to the image


def test_coverage_is_the_share_of_the_object_under_the_mask():
    region = block((0, 1), (0, 1))  # 4 pixels
    mask = block((0, 1), (0, 0)) | block((1, 1), (1, 1))  # covers 3 of them
    assert coverage(region, mask) == pytest.approx(0.75)
    assert coverage(region, np.zeros((10, 10), bool)) == 0.0
    with pytest.raises(AuditorError, match="without pixels"):
        coverage(np.zeros((10, 10), bool), mask)
    with pytest.raises(AuditorError, match="differ in size"):
        coverage(region, np.zeros((5, 5), bool))


def picnic_image():
    """The paper's Figure 5 prompt, "young women having a picnic at the park during daytime"."""
    nouns = ["woman", "picnic", "park", "daytime"]
    masks = {
        "women": block((0, 4), (0, 4)),
        "picnic": block((5, 9), (0, 4)),
        "park": block((0, 1), (5, 9)),
    }
    objects = [
        DetectedObject("woman", block((0, 9), (0, 3))),  # 40 px; "women" covers 20 -> 0.5 > σ 0.25 (human, human)
        DetectedObject("basket", block((6, 7), (1, 2))),  # inside "picnic": 1.0 > 0.7
        DetectedObject("park", block((0, 9), (5, 9))),  # 50 px; "park" covers 10 -> 0.2
        DetectedObject("grass", block((8, 9), (5, 9))),  # no mask touches it
        DetectedObject("girl", block((3, 6), (0, 1))),  # 8 px: "women" 4 -> 0.5, but "girl" is not a σ word: 0.7
    ]
    return nouns, objects, masks


def test_the_five_groups_by_hand():
    nouns, objects, masks = picnic_image()
    result = dependency_groups(nouns, objects, masks, human_words=SIGMA_WORDS)
    assert result.objects == (
        ObjectAssignment("woman", "explicitly_guided", "women", 0.5, 0.25),
        ObjectAssignment("basket", "implicitly_guided", "picnic", 1.0, 0.7),
        ObjectAssignment("park", "explicitly_independent", None, 0.2, 0.7),
        ObjectAssignment("grass", "implicitly_independent", None, 0.0, 0.7),
        ObjectAssignment("girl", "implicitly_independent", None, 0.5, 0.7),
    )
    assert result.hidden == ("picnic", "daytime")
    assert result.counts() == {
        "explicitly_guided": {"woman": 1},
        "implicitly_guided": {"basket": 1},
        "explicitly_independent": {"park": 1},
        "implicitly_independent": {"grass": 1, "girl": 1},
        "hidden": {"picnic": 1, "daytime": 1},
    }
    assert list(result.counts()) == list(GROUPS)


def test_human_sigma_needs_both_sides_human():
    nouns, objects, masks = picnic_image()
    # the woman's 0.5 coverage by a non-human word would not be enough (σ = 0.7)
    result = dependency_groups(nouns, objects[:1], {"picnic": masks["women"]}, human_words=SIGMA_WORDS)
    assert result.objects[0].group == "explicitly_independent"
    assert (result.objects[0].coverage, result.objects[0].sigma) == (0.5, 0.7)
    # nor with the paper's σ words left out
    assert dependency_groups(nouns, objects[:1], masks, human_words=set()).objects[0].group == "explicitly_independent"
    # a larger σ for humans is a parameter
    assert (
        dependency_groups(nouns, objects[:1], masks, human_words=SIGMA_WORDS, sigma_human=0.5).objects[0].group
        == "explicitly_independent"
    )


def test_coverage_must_be_strictly_above_sigma():
    region = block((0, 0), (0, 9))  # 10 px
    exactly = block((0, 0), (0, 6))  # 7 of them: 0.7, not above σ
    result = dependency_groups([], [DetectedObject("kite", region)], {"sky": exactly}, human_words=SIGMA_WORDS)
    assert result.objects[0].group == "implicitly_independent"
    more = block((0, 0), (0, 7))  # 0.8
    result = dependency_groups([], [DetectedObject("kite", region)], {"sky": more}, human_words=SIGMA_WORDS)
    assert result.objects[0] == ObjectAssignment("kite", "implicitly_guided", "sky", 0.8, 0.7)


def test_the_best_word_guides_and_repeated_words_and_detections_count():
    region = block((0, 1), (0, 4))  # 10 px
    masks = [("dog", block((0, 1), (0, 3))), ("dog", block((0, 1), (0, 4))), ("ball", block((0, 1), (0, 2)))]
    objects = [DetectedObject("Dog", region), DetectedObject("dog", block((5, 5), (5, 5)))]
    result = dependency_groups(["dogs", "dog"], objects, masks, human_words=SIGMA_WORDS)
    assert result.objects[0] == ObjectAssignment("dog", "explicitly_guided", "dog", 1.0, 0.7)
    assert result.objects[1].group == "explicitly_independent"
    assert result.counts()["explicitly_guided"] == {"dog": 1}
    assert result.hidden == ("dogs",)  # names are compared as given: lemmatise both sides first


def test_names_compare_case_and_underscores_aside():
    region = block((0, 0), (0, 0))
    result = dependency_groups(
        ["Bow tie"], [DetectedObject("bow_tie", region)], {}, human_words=SIGMA_WORDS
    )
    assert result.objects == (ObjectAssignment("bow tie", "explicitly_independent", None, None, None),)
    assert result.hidden == ()
