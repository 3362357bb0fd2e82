"""T2IAT's S and d in one bootstrap resample, image by image: the reference for the vectorised resamples.

Image *i* of every prompt set comes from seed *i*, and the design pairs an image with each image of its seed
once. A resample draws seed indices with replacement (positions); every Asc mean keeps the design's share of
same-seed pairs: the images of the target's seed once each, the drawn images of other seeds by their draws.
Sets are lists of ``(seed index, vector)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from auditor.metrics.t2iat import differential_association, effect_size

ImageSet = list[tuple[int, np.ndarray]]


def unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


def drawn(images: ImageSet, seeds: Sequence[int]) -> ImageSet:
    """The images of the drawn seeds, one per draw, in draw order."""
    return [(seed, vector) for s in seeds for seed, vector in images if seed == s]


def design_mean(
    target: tuple[int, np.ndarray], members: ImageSet, seeds: Sequence[int], leave_out: bool = False
) -> float:
    """The target's mean cosine with the members in the resample ``seeds``; ``leave_out``: the members are the
    target's own set, so its seed's member is the target itself and the design has no same-seed pair."""
    seed, vector = target
    same = [] if leave_out else [unit(vector) @ unit(m) for s, m in members if s == seed]
    others = [unit(vector) @ unit(m) for s, m in drawn(members, seeds) if s != seed]
    share = len(same) / (len(members) - (1 if leave_out else 0))
    if share == 1:
        return float(np.mean(same))
    if not others:
        return float("nan")
    return share * (np.mean(same) if same else 0.0) + (1 - share) * np.mean(others)


def association(asc_x: list[float], asc_y: list[float], spread: str = "pooled") -> tuple[float, float]:
    """S and d (its sd as ``spread`` says) of the Asc values, NaN where undefined (the point estimate's None)."""
    if np.isnan(asc_x).any() or np.isnan(asc_y).any():
        return float("nan"), float("nan")
    d = effect_size(np.array(asc_x), np.array(asc_y), spread)
    return differential_association(np.array(asc_x), np.array(asc_y)), float("nan") if d is None else d


def single_concept(x: ImageSet, a: ImageSet, b: ImageSet, seeds: Sequence[int]) -> tuple[float, float]:
    """An audit axis's (S, d): X = the initial images, Y = the attribute images scored with themselves left out."""
    asc_x = [design_mean(t, a, seeds) - design_mean(t, b, seeds) for t in drawn(x, seeds)]
    asc_a = [design_mean(t, a, seeds, leave_out=True) - design_mean(t, b, seeds) for t in drawn(a, seeds)]
    asc_b = [design_mean(t, a, seeds) - design_mean(t, b, seeds, leave_out=True) for t in drawn(b, seeds)]
    return association(asc_x, asc_a + asc_b)


def six_groups(groups: Sequence[ImageSet], seeds: Sequence[int], spread: str = "pooled") -> tuple[float, float]:
    """The T2IAT test's (S, d) from G(X), G(Y), G(X^A), G(X^B), G(Y^A), G(Y^B)."""
    x, y, xa, xb, ya, yb = groups
    asc_x = [design_mean(t, xa, seeds) - design_mean(t, xb, seeds) for t in drawn(x, seeds)]
    asc_y = [design_mean(t, ya, seeds) - design_mean(t, yb, seeds) for t in drawn(y, seeds)]
    return association(asc_x, asc_y, spread)
