"""CLIP zero-shot classification of images between two texts, with a confidence threshold.

The bias-amplification study classifies gender with CLIP and the texts "A photo of a man"
/ "A photo of a woman" (Seshadri et al. 2023, §2.2; the authors' face_detection.py): the
probabilities are the softmax of ``CLIPModel``'s ``logits_per_image``, i.e. of
``logit_scale * cos(image, text)`` over the texts, and an image counts only when the model
is confident: P(second class) >= t -> second class, <= 1 - t -> first class, otherwise
ambiguous and left out (t = 0.9 in the paper; the authors' ``generate_images.py`` treats
``1 - t < p < t`` as ambiguous, the same boundaries).

These are pure functions over embeddings (unit rows from
:class:`auditor.perception.clip.ClipEmbedder` and its ``logit_scale``), so cached
embeddings can be reclassified at another threshold without running CLIP again. The
classes and texts are data (``prompts/amplification/classifier.yaml``), so other two-way
axes work the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from auditor.core.errors import AuditorError

#: Decision for an image whose probability falls between the thresholds.
AMBIGUOUS = "ambiguous"
#: The paper's confidence threshold.
THRESHOLD = 0.9


@dataclass(frozen=True)
class TwoWayTexts:
    """A zero-shot axis: two class names and the CLIP text of each (the second is the one counted)."""

    axis: str
    classes: tuple[str, str]
    texts: tuple[str, str]

    @classmethod
    def builtin(cls, axis: str = "gender") -> TwoWayTexts:
        """An axis of ``prompts/amplification/classifier.yaml`` (``gender``: man / woman)."""
        from auditor.core.resources import read_prompt_yaml

        data = read_prompt_yaml("amplification/classifier.yaml")
        if axis not in data:
            raise AuditorError(f"no built-in zero-shot axis {axis!r}; built in: {', '.join(sorted(data))}")
        return cls.from_data(axis, data[axis], "prompts/amplification/classifier.yaml")

    @classmethod
    def from_data(cls, axis: str, data: Any, where: str) -> TwoWayTexts:
        """From ``{classes: [a, b], texts: [text a, text b]}``."""
        classes = data.get("classes") if isinstance(data, dict) else None
        texts = data.get("texts") if isinstance(data, dict) else None
        if not (isinstance(classes, list) and isinstance(texts, list) and len(classes) == len(texts) == 2):
            raise AuditorError(f"{where}: axis {axis!r} needs two classes and two texts")
        classes_t = (str(classes[0]).strip(), str(classes[1]).strip())
        texts_t = (str(texts[0]).strip(), str(texts[1]).strip())
        if not all(classes_t + texts_t) or classes_t[0] == classes_t[1] or AMBIGUOUS in classes_t:
            raise AuditorError(f"{where}: axis {axis!r} needs two distinct, non-empty classes (not {AMBIGUOUS!r}) and texts")
        return cls(axis, classes_t, texts_t)


def zero_shot_probabilities(image_embeddings: np.ndarray, text_embeddings: np.ndarray, logit_scale: float) -> np.ndarray:
    """(n images, k texts) softmax over ``logit_scale * cos``, rows summing to 1.

    Embeddings are normalised here, so a cosine is a dot product whatever the caller
    passes (no images give an empty array); computed in float64 with the row maximum subtracted (a logit scale of 100
    makes exponentials overflow float32 otherwise).
    """
    from auditor.metrics.t2iat import check_same_dimension, unit_rows

    if not np.isfinite(logit_scale) or logit_scale <= 0:
        raise AuditorError(f"the logit scale must be a positive number (got {logit_scale})")
    texts = unit_rows(text_embeddings, "text embeddings")
    if np.asarray(image_embeddings).shape[0] == 0:
        return np.zeros((0, texts.shape[0]))
    images = unit_rows(image_embeddings, "image embeddings")
    check_same_dimension({"image embeddings": images, "text embeddings": texts})
    logits = logit_scale * images @ texts.T
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    return weights / weights.sum(axis=1, keepdims=True)


def decide(probabilities: Sequence[float] | np.ndarray, classes: tuple[str, str], threshold: float = THRESHOLD) -> list[str]:
    """Per image: ``classes[1]`` when P(classes[1]) >= threshold, ``classes[0]`` when it is
    <= 1 - threshold, otherwise :data:`AMBIGUOUS` (``threshold`` in [0.5, 1]).

    The second test is written ``1 - p >= threshold`` (P(classes[0]) >= threshold): in
    floating point ``1 - 0.9`` is just below 0.1, so ``p <= 1 - threshold`` would call
    p = 0.1 ambiguous.
    """
    if not 0.5 <= threshold <= 1.0:
        raise AuditorError(f"--threshold must be between 0.5 and 1 (got {threshold})")
    decisions = []
    for p in np.asarray(probabilities, dtype=np.float64).reshape(-1):
        if p >= threshold:
            decisions.append(classes[1])
        elif 1.0 - p >= threshold:
            decisions.append(classes[0])
        else:
            decisions.append(AMBIGUOUS)
    return decisions


def classify(
    image_embeddings: np.ndarray,
    text_embeddings: np.ndarray,
    logit_scale: float,
    classes: tuple[str, str],
    threshold: float = THRESHOLD,
) -> tuple[np.ndarray, list[str]]:
    """P(classes[1]) per image and the thresholded decisions, from embeddings of the two texts (in class order)."""
    texts = np.asarray(text_embeddings)
    if texts.ndim != 2 or texts.shape[0] != 2:
        raise AuditorError(f"two-way classification needs two text embeddings, got shape {texts.shape}")
    second = zero_shot_probabilities(image_embeddings, texts, logit_scale)[:, 1]
    return second, decide(second, classes, threshold)
