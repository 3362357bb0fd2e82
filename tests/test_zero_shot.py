"""CLIP zero-shot two-way classification: softmax of logit_scale * cos, and the confidence threshold."""

from __future__ import annotations

import math

import numpy as np
import pytest

from auditor.core.errors import AuditorError
from auditor.perception.zero_shot import (
    AMBIGUOUS,
    TwoWayTexts,
    classify,
    decide,
    zero_shot_probabilities,
)

GENDER = ("man", "woman")


def test_builtin_gender_axis_is_the_papers():
    axis = TwoWayTexts.builtin()
    assert axis.axis == "gender"
    assert axis.classes == GENDER
    assert axis.texts == ("A photo of a man", "A photo of a woman")
    with pytest.raises(AuditorError, match="no built-in zero-shot axis 'age'"):
        TwoWayTexts.builtin("age")
    with pytest.raises(AuditorError, match="two classes and two texts"):
        TwoWayTexts.from_data("age", {"classes": ["young"], "texts": ["a"]}, "axes.yaml")


def test_probabilities_by_hand():
    # Unit image rows and text rows in 2-d: cosines are plain dot products.
    texts = np.array([[1.0, 0.0], [0.0, 1.0]])
    images = np.array([[0.6, 0.8], [1.0, 0.0], [3.0, 3.0]])  # the last is normalised here
    p = zero_shot_probabilities(images, texts, logit_scale=100.0)
    # Image 0: logits 60 and 80 -> P(second) = 1 / (1 + e^-20).
    assert p[0, 1] == pytest.approx(1 / (1 + math.exp(-20)))
    # Image 1: logits 100 and 0 -> P(second) = e^-100 / (1 + e^-100), no overflow.
    assert p[1, 1] == pytest.approx(math.exp(-100) / (1 + math.exp(-100)), rel=1e-9)
    assert p[2] == pytest.approx([0.5, 0.5])
    assert p.sum(axis=1) == pytest.approx(np.ones(3))
    # A small scale softens: cosines 0.2 and 0.25 at scale 10 -> 1 / (1 + e^-0.5).
    soft = zero_shot_probabilities(np.array([[0.2, 0.25]]) / 1.0, texts, logit_scale=10.0)
    cos = np.array([0.2, 0.25]) / np.linalg.norm([0.2, 0.25])
    assert soft[0, 1] == pytest.approx(1 / (1 + math.exp(-10 * (cos[1] - cos[0]))))
    assert zero_shot_probabilities(np.zeros((0, 2)), texts, 100.0).shape == (0, 2)


def test_probability_errors():
    texts = np.eye(2)
    with pytest.raises(AuditorError, match="logit scale"):
        zero_shot_probabilities(np.eye(2), texts, 0.0)
    with pytest.raises(AuditorError, match="dimensions differ"):
        zero_shot_probabilities(np.ones((1, 3)), texts, 100.0)
    with pytest.raises(AuditorError, match="all-zero row"):
        zero_shot_probabilities(np.zeros((1, 2)), texts, 100.0)
    with pytest.raises(AuditorError, match="two text embeddings"):
        classify(np.eye(3), np.eye(3), 100.0, GENDER)


def test_threshold_rule_at_its_boundaries():
    probabilities = [0.95, 0.9, 0.8999, 0.5, 0.1001, 0.1, 0.0]
    assert decide(probabilities, GENDER) == ["woman", "woman", AMBIGUOUS, AMBIGUOUS, AMBIGUOUS, "man", "man"]
    assert decide(probabilities, GENDER, threshold=0.8) == ["woman", "woman", "woman", AMBIGUOUS, "man", "man", "man"]
    # At 0.5 nothing is ambiguous; exactly 0.5 goes to the second class (checked first).
    assert decide([0.5, 0.49], GENDER, threshold=0.5) == ["woman", "man"]
    for bad in (0.4, 1.01):
        with pytest.raises(AuditorError, match="--threshold must be between 0.5 and 1"):
            decide([0.5], GENDER, threshold=bad)


@pytest.mark.slow
def test_tiny_clip_matches_clipmodel_logits_per_image(tiny_models):
    """Our classification from cached-style embeddings equals CLIPModel's own zero-shot softmax."""
    import torch
    from PIL import Image
    from transformers import CLIPModel, CLIPProcessor

    from auditor.perception.registry import EMBEDDERS

    embedder = EMBEDDERS.load(f"clip:{tiny_models.clip}")
    model = CLIPModel.from_pretrained(tiny_models.clip).eval()
    processor = CLIPProcessor.from_pretrained(tiny_models.clip)
    # The tiny model keeps its initial temperature, exp(logit_scale_init_value).
    assert embedder.logit_scale == pytest.approx(float(model.logit_scale.detach().exp()))
    assert embedder.logit_scale == pytest.approx(math.exp(model.config.logit_scale_init_value))
    # A larger scale spreads the tiny model's small cosine differences over the thresholds.
    with torch.no_grad():
        for clip in (model, embedder.model):
            clip.logit_scale.fill_(math.log(30.0))
    rng = np.random.default_rng(0)
    images = [Image.new("RGB", (32, 32), colour) for colour in ("red", "green", "blue", "white", "black", "yellow")]
    images += [Image.fromarray(rng.integers(0, 255, size=(32, 32, 3), dtype=np.uint8)) for _ in range(2)]
    image_rows = embedder.embed_images(images)
    # The paper's texts, and bare words (with which the tiny model leans the other way on some images).
    axes = (TwoWayTexts.builtin(), TwoWayTexts("gender", GENDER, GENDER))
    seen = set()
    for texts, classes in ((axis.texts, axis.classes) for axis in axes):
        with torch.no_grad():
            reference = model(**processor(text=list(texts), images=images, return_tensors="pt", padding=True))
        expected = reference.logits_per_image.softmax(dim=1)[:, 1].numpy()
        second, decisions = classify(image_rows, embedder.embed_texts(list(texts)), embedder.logit_scale, classes)
        assert second == pytest.approx(expected, abs=1e-5)
        assert decisions == decide(expected, classes)
        seen.update(decisions)
    assert seen == {"man", "woman", AMBIGUOUS}
