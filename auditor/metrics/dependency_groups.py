"""Prompt-image dependency groups (Wu et al., J. Imaging 2025, §6): pure functions over masks.

Per image: the prompt's noun set, the detected objects with their regions m_o (a box or a
segmentation mask), and one binary attention mask a_n per prompt word (its cross-attention
map normalised to [0, 1] and thresholded at θ = 0.35). Then (§6.2):

* **explicitly**: the object's name is in the noun set (Definition 1);
* **guided**: coverage(m_o, a) = |m_o ∩ a| / |m_o| > σ for at least one word's mask a,
  with σ = 0.25 when both the object and the word are human words and σ = 0.7 otherwise
  (Definition 2; a human word's attention often covers only the face);

and five groups: explicitly guided, implicitly guided (guided, not named), explicitly
independent (named, not guided), implicitly independent (neither), and hidden: the nouns
of the prompt that no detected object is named after. Object and noun names are compared
in lower case with "_" read as a space, so "bow_tie" meets "bow tie".
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from auditor.core.choices import Group
from auditor.core.errors import AuditorError
from auditor.core.text import single_spaced

#: The five groups, in the paper's order of definition.
GROUPS: tuple[Group, ...] = (
    "explicitly_guided",
    "implicitly_guided",
    "explicitly_independent",
    "implicitly_independent",
    "hidden",
)
#: θ: a word's normalised attention above this is its mask (§6.1).
ATTENTION_THRESHOLD = 0.35
#: σ when both the object and the word are human words, and otherwise (§6.2).
SIGMA_HUMAN = 0.25
SIGMA_OTHER = 0.7


def _key(name: str) -> str:
    return single_spaced(name.lower().replace("_", " "))


def attention_mask(heatmap: np.ndarray, threshold: float = ATTENTION_THRESHOLD) -> np.ndarray:
    """a_n: the map min-max normalised to [0, 1], then ``> threshold`` (as DAAM does).

    A constant map has no region the word attends to more than elsewhere: empty mask.
    The map must already have the image's size (resizing is the model side's job).
    """
    values = np.asarray(heatmap, dtype=np.float64)
    if values.ndim != 2 or values.size == 0:
        raise AuditorError(f"an attention map must be a non-empty 2-D array, got shape {values.shape}")
    if not np.isfinite(values).all():
        raise AuditorError("attention map contains NaN or infinite values")
    low, high = values.min(), values.max()
    if high == low:
        return np.zeros(values.shape, dtype=bool)
    return (values - low) / (high - low) > threshold


def box_mask(box: Sequence[float], shape: tuple[int, int]) -> np.ndarray:
    """The pixels of an (x0, y0, x1, y1) box in an image of ``shape`` = (height, width).

    Pixel (row r, column c) belongs to the box when its centre (c + 0.5, r + 0.5) lies in
    [x0, x1) × [y0, y1): detector boxes in pixel coordinates, edges clipped to the image.
    """
    if len(box) != 4:
        raise AuditorError(f"a box is (x0, y0, x1, y1), got {tuple(box)}")
    x0, y0, x1, y1 = (float(v) for v in box)
    height, width = shape
    columns = np.arange(width) + 0.5
    rows = np.arange(height) + 0.5
    return np.outer((rows >= y0) & (rows < y1), (columns >= x0) & (columns < x1))


def coverage(region: np.ndarray, mask: np.ndarray) -> float:
    """coverage(m_o, a) = |m_o ∩ a| / |m_o| (Eq. 7) for boolean masks of one image's size."""
    m, a = np.asarray(region, dtype=bool), np.asarray(mask, dtype=bool)
    if m.shape != a.shape:
        raise AuditorError(f"object region and attention mask differ in size: {m.shape} vs {a.shape}")
    size = int(m.sum())
    if size == 0:
        raise AuditorError("an object region without pixels has no coverage")
    return int((m & a).sum()) / size


@dataclass(frozen=True)
class DetectedObject:
    """One detected object: its name (a noun lemma) and its region m_o (box or segmentation mask)."""

    name: str
    region: np.ndarray


@dataclass(frozen=True)
class ObjectAssignment:
    """The group of one detected object, and the evidence for it."""

    name: str
    """The object's name in lower case, "_" written as a space."""
    group: Group
    guided_by: str | None
    """The word whose mask covers the object most among those above their σ; None when not guided."""
    coverage: float | None
    """Coverage by ``guided_by``, or the best coverage by any word when not guided (None: no word masks)."""
    sigma: float | None
    """The threshold that coverage was compared with."""


@dataclass(frozen=True)
class DependencyGroups:
    """The groups of one image."""

    objects: tuple[ObjectAssignment, ...]
    hidden: tuple[str, ...]
    """Nouns of the prompt that no detected object is named after."""

    def counts(self) -> dict[Group, dict[str, int]]:
        """Group -> name -> occurrences in this image (objects per detection; hidden nouns once each)."""
        result: dict[Group, dict[str, int]] = {group: {} for group in GROUPS}
        for item in self.objects:
            result[item.group][item.name] = result[item.group].get(item.name, 0) + 1
        for noun in self.hidden:
            result["hidden"][noun] = 1
        return result


def dependency_groups(
    noun_set: Iterable[str],
    objects: Sequence[DetectedObject],
    word_masks: Mapping[str, np.ndarray] | Sequence[tuple[str, np.ndarray]],
    *,
    human_words: Collection[str],
    sigma_human: float = SIGMA_HUMAN,
    sigma_other: float = SIGMA_OTHER,
) -> DependencyGroups:
    """Classify one image's detected objects and the prompt's nouns into the five groups.

    ``word_masks`` holds a binary mask per prompt word (a sequence of pairs when a word
    repeats); ``human_words`` are the words σ = ``sigma_human`` applies to when both the
    object's name and the word are among them (the paper: person, people, woman, women,
    man, men). Guided means coverage strictly above σ.
    """
    nouns = list(dict.fromkeys(_key(noun) for noun in noun_set))
    noun_keys = set(nouns)
    humans = {_key(word) for word in human_words}
    masks = list(word_masks.items()) if isinstance(word_masks, Mapping) else list(word_masks)
    assignments = []
    for item in objects:
        name = _key(item.name)
        explicit = name in noun_keys
        best: tuple[float, str, float] | None = None  # coverage, word, sigma of the guiding word
        best_any: tuple[float, float] | None = None  # best coverage and its sigma, guided or not
        for word, mask in masks:
            sigma = sigma_human if name in humans and _key(word) in humans else sigma_other
            value = coverage(item.region, mask)
            if best_any is None or value > best_any[0]:
                best_any = (value, sigma)
            if value > sigma and (best is None or value > best[0]):
                best = (value, word, sigma)
        guided = best is not None
        group: Group = (
            ("explicitly_guided" if guided else "explicitly_independent")
            if explicit
            else ("implicitly_guided" if guided else "implicitly_independent")
        )
        assignments.append(
            ObjectAssignment(
                name=name,
                group=group,
                guided_by=best[1] if best else None,
                coverage=best[0] if best else (best_any[0] if best_any else None),
                sigma=best[2] if best else (best_any[1] if best_any else None),
            )
        )
    detected = {_key(item.name) for item in objects}
    return DependencyGroups(objects=tuple(assignments), hidden=tuple(noun for noun in nouns if noun not in detected))
