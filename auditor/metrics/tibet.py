"""TIBET's numbers (paper §3.4, Eq. 1-5; issue 3 for the exact definitions).

Pure functions over concept histograms (``concept -> frequency``) and lists of scores.
Sums use :func:`math.fsum` over a sorted key order, so a result never depends on dict or
set iteration order (and so not on ``PYTHONHASHSEED``).

A set without concepts (every image flagged, or every answer a stopword) has no CAS
(None), never 0: 0 would claim its images share nothing with the others, when there is
simply nothing to compare. BAV and its relatives use only the CAS values that exist.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from auditor.core.choices import CasNormalization
from auditor.metrics.ties import ABSOLUTE_TIE

Gender = Literal["male", "female"]

#: Prompt words that make a counterfactual the "male" or "female" one of an axis.
MALE_WORDS = frozenset({"male", "males", "man", "men", "boy", "boys"})
FEMALE_WORDS = frozenset({"female", "females", "woman", "women", "girl", "girls"})


def normalized(histogram: Mapping[str, float]) -> dict[str, float]:
    """``histogram`` rescaled to sum 1 (the authors' code does this before the IoU); empty stays empty."""
    total = math.fsum(histogram[key] for key in sorted(histogram))
    if total <= 0:
        return {}
    return {key: value / total for key, value in histogram.items()}


def cas(
    p: Mapping[str, float], q: Mapping[str, float], normalization: CasNormalization = "distribution"
) -> float | None:
    """Concept Association Score: Σ min(p, q) / Σ max(p, q), a missing concept counting as 0.

    ``p`` and ``q`` are synonym-merged histograms of the initial and the counterfactual set.
    ``distribution`` rescales each to sum 1 first; ``frequency`` uses per-image frequencies
    as they are (paper Eq. 1-3). When either histogram has no concept (no mass), there is
    nothing to compare, which is not the same as "nothing in common" (0): the result is
    None, and the caller leaves the pair out of BAV and says why.
    """
    if normalization not in ("distribution", "frequency"):
        raise ValueError(f"unknown CAS normalisation {normalization!r}: use 'distribution' or 'frequency'")
    if not (_has_mass(p) and _has_mass(q)):
        return None
    if normalization == "distribution":
        p, q = normalized(p), normalized(q)
    keys = sorted(p.keys() | q.keys())
    union = math.fsum(max(p.get(key, 0.0), q.get(key, 0.0)) for key in keys)
    intersection = math.fsum(min(p.get(key, 0.0), q.get(key, 0.0)) for key in keys)
    return intersection / union


def _has_mass(histogram: Mapping[str, float]) -> bool:
    return any(value > 0 for value in histogram.values())


def known(values: Sequence[float | None]) -> list[float]:
    """The values that exist (a CAS is None for a set without concepts, a BAV for an axis without two CAS values)."""
    return [value for value in values if value is not None]


#: BAV at or below which it is 0: the variance of CAS values no further apart than two scores that are the same
#: (:data:`~auditor.metrics.ties.ABSOLUTE_TIE`). Equal CAS values whose mean is not exact in binary (three of 0.1)
#: have a variance of ~1e-34, which would make that axis's relative BAV 1 beside an axis of exactly 0.
BAV_NOISE = ABSOLUTE_TIE**2


def bav(cas_values: Sequence[float | None]) -> float | None:
    """Bias Axis Variance (Eq. 5): population variance (ddof=0) of an axis's CAS values.

    None values are left out; with fewer than two values left there is no BAV (None):
    the variance of one value is 0 whatever the images show, so it would read as "no lean".
    A variance at or below :data:`BAV_NOISE` is 0: CAS values equal but for float noise.
    """
    values = known(cas_values)
    if len(values) < 2:
        return None
    variance = float(np.var(np.asarray(values, dtype=float)))
    return 0.0 if variance <= BAV_NOISE else variance


#: Mean absolute deviation of CAS shares at or below which :func:`bav_mad` reads no spread. Its square root
#: would turn float noise of CAS values that are equal (summed in another order, ~1e-17) into ~1e-8 and make a
#: point estimate and its resamples disagree; a real spread this small (shares equal to 12 decimals) shows as 0
#: in every report anyway.
MAD_NOISE = 1e-12


def bav_mad(cas_values: Sequence[float | None]) -> float | None:
    """The authors' released-code BAV: normalised √(mean |x − mean x|) of x = CAS / Σ CAS.

    Divided by the same quantity for a one-hot vector of the same length (the largest
    spread a vector on the simplex can have), so the result lies in [0, 1] whatever the
    number of counterfactuals. None values are left out, and with fewer than two left
    there is no spread to measure (None), as for :func:`bav`. All CAS values 0 gives 0
    (no counterfactual is favoured over another), and so does a spread of the shares at or
    below :data:`MAD_NOISE` (float noise, not a lean).
    """
    values = known(cas_values)
    if any(value < 0 for value in values):
        raise ValueError("CAS values are never negative")
    if len(values) < 2:
        return None
    total = math.fsum(values)
    if total == 0:
        return 0.0
    shares = [value / total for value in values]
    mean = math.fsum(shares) / len(shares)
    deviation = math.fsum(abs(share - mean) for share in shares) / len(shares)
    if deviation <= MAD_NOISE:
        return 0.0
    one_hot = 2 * (len(values) - 1) / len(values) ** 2  # mean |x - 1/n| of (1, 0, ..., 0)
    return math.sqrt(deviation / one_hot)


def relative_bav(bavs: Sequence[float | None]) -> list[float | None]:
    """Each axis's BAV divided by the largest of the prompt (paper Appendix 11.1).

    An axis without BAV (None) stays None and does not count towards the largest; all 0
    when the largest is 0.
    """
    largest = max(known(bavs), default=0.0)
    if largest <= 0:
        return [None if value is None else 0.0 for value in bavs]
    return [None if value is None else value / largest for value in bavs]


def top_k(histogram: Mapping[str, float], k: int) -> list[tuple[str, float]]:
    """The ``k`` most frequent concepts, highest first; ties in alphabetical order."""
    return sorted(histogram.items(), key=lambda item: (-item[1], item[0]))[:k]


def prompt_gender(prompt: str) -> Gender | None:
    """'male' / 'female' when the prompt names only one of them (e.g. 'a photo of a male nurse'), else None."""
    tokens = set(re.findall(r"[a-z]+", prompt.lower()))
    male, female = bool(tokens & MALE_WORDS), bool(tokens & FEMALE_WORDS)
    if male == female:
        return None
    return "male" if male else "female"


def occupation_lean(counterfactuals: Sequence[str], cas_values: Sequence[float | None]) -> float | None:
    """CAS(male counterfactual) − CAS(female counterfactual) (paper Fig. 4); positive leans male.

    Only counterfactuals with a CAS count (None values are left out, as for :func:`bav`).
    Defined when exactly one of them is male and exactly one is female; with several of
    either, which pair to compare is ambiguous, and with none there is no pair: None.
    """
    if len(counterfactuals) != len(cas_values):
        raise ValueError(f"{len(counterfactuals)} counterfactuals but {len(cas_values)} CAS values")
    pairs = [(prompt_gender(prompt), value) for prompt, value in zip(counterfactuals, cas_values) if value is not None]
    male = [value for gender, value in pairs if gender == "male"]
    female = [value for gender, value in pairs if gender == "female"]
    if len(male) != 1 or len(female) != 1:
        return None
    return male[0] - female[0]
