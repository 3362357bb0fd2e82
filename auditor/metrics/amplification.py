"""Bias amplification against the training data (Seshadri, Singh and Elazar, 2023, §3).

Pure functions over counts and per-occupation values; no models, no records. With G the
percentage of women among a model's (confidently classified, one-face) images for an
occupation's prompt and T the same percentage in the training examples selected for that
occupation:

- ``A = |G - 50| - |T - 50|`` per occupation (Eq. 1): positive when the model's images
  lean further from parity than the training data (amplification), negative when they
  lean less (de-amplification);
- the expected amplification over occupations is the plain mean (Eq. 2);
- an occupation *flips* when G and T lean to opposite sides of 50 (the paper leaves the
  eight occupations that flip on every prompt out of its analysis, §3.3);
- the paper tests "the null hypothesis that the expected amplification is equal to 0"
  with a one-sample t-test (§6.3 and footnote 10). It states neither the sidedness nor
  releases that analysis' code; a null of equality is tested two-sided (rejecting in
  either direction), which is also scipy's default, so :func:`summarize_amplification`
  reports the two-sided p-value of ``scipy.stats.ttest_1samp(A, 0)``.

Beyond the paper: every percentage carries a Wilson score interval, A per occupation a
bootstrap interval from resampling the images on both sides, and the mean a seeded
bootstrap interval over occupations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from auditor.core.errors import AuditorError

#: Parity: the percentage of a balanced binary split.
PARITY = 50.0
#: Default confidence level of every interval.
LEVEL = 0.95
#: Default bootstrap resamples.
RESAMPLES = 10_000


def _z(level: float) -> float:
    from scipy.stats import norm

    if not 0.0 < level < 1.0:
        raise AuditorError(f"the confidence level must be between 0 and 1 (got {level})")
    return float(norm.ppf(0.5 + level / 2.0))


def _check_counts(successes: int, total: int) -> None:
    if total < 0 or successes < 0 or successes > total:
        raise AuditorError(f"invalid counts: {successes} of {total}")


def wilson_interval(successes: int, total: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion, as fractions in [0, 1].

    Unlike the normal (Wald) interval it stays inside [0, 1] and is not empty at 0 or
    ``total`` successes, which matters for strongly skewed occupations. ``total`` must be
    positive: no images means no proportion.
    """
    _check_counts(successes, total)
    if total == 0:
        raise AuditorError("a proportion of zero items has no interval")
    z = _z(level)
    p = successes / total
    denominator = 1.0 + z * z / total
    centre = (p + z * z / (2.0 * total)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / total + z * z / (4.0 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Percentage:
    """``successes`` of ``total`` as a percentage with its Wilson interval (all None when ``total`` is 0)."""

    successes: int
    total: int
    percent: float | None
    low: float | None
    high: float | None


def percentage(successes: int, total: int, level: float = LEVEL) -> Percentage:
    """``100 * successes / total`` with its Wilson interval in percent; None values when ``total`` is 0."""
    _check_counts(successes, total)
    if total == 0:
        return Percentage(successes, total, None, None, None)
    low, high = wilson_interval(successes, total, level)
    return Percentage(successes, total, 100.0 * successes / total, 100.0 * low, 100.0 * high)


def amplification(generated: float, training: float) -> float:
    """``A = |G - 50| - |T - 50|`` for percentages G (generated) and T (training), Eq. 1."""
    return abs(generated - PARITY) - abs(training - PARITY)


def flipped(generated: float, training: float) -> bool:
    """Whether G and T lean to opposite sides of parity (exactly 50 leans to neither, so never flips)."""
    return (generated - PARITY) * (training - PARITY) < 0


def amplification_interval(
    generated: tuple[int, int],
    training: tuple[int, int],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = LEVEL,
) -> tuple[float, float]:
    """Percentile bootstrap interval of one occupation's A from ``(women, total)`` on each side.

    Resampling n binary labels with replacement draws the number of women from
    Binomial(n, k/n), so each side is resampled exactly that way, independently (the
    generated and training images are separate samples); A is recomputed per resample.
    A side with no women or no men resamples to itself: the interval then reflects only
    the other side's uncertainty (the Wilson intervals of G and T do not have that blind spot).
    """
    for name, (successes, total) in (("generated", generated), ("training", training)):
        _check_counts(successes, total)
        if total == 0:
            raise AuditorError(f"no {name} images to resample")
    _check_resamples(resamples)
    rng = np.random.default_rng(seed)
    g = 100.0 * rng.binomial(generated[1], generated[0] / generated[1], size=resamples) / generated[1]
    t = 100.0 * rng.binomial(training[1], training[0] / training[1], size=resamples) / training[1]
    values = np.abs(g - PARITY) - np.abs(t - PARITY)
    return _percentile_interval(values, level)


def bootstrap_mean_interval(
    values: Sequence[float], *, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (resampled with replacement, seeded)."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise AuditorError("the bootstrap needs a non-empty list of values")
    _check_resamples(resamples)
    rng = np.random.default_rng(seed)
    means = array[rng.integers(0, array.size, size=(resamples, array.size))].mean(axis=1)
    return _percentile_interval(means, level)


@dataclass(frozen=True)
class AmplificationSummary:
    """Mean amplification over occupations, its bootstrap interval and the paper's t-test."""

    #: Occupations averaged (after any exclusion).
    n: int
    #: Occupations left out because their direction flips (``exclude_flips``).
    n_excluded: int
    #: Mean A in percentage points (None when no occupation is left).
    mean: float | None
    #: Bootstrap interval of the mean (None with fewer than two occupations).
    low: float | None
    high: float | None
    #: One-sample t statistic and two-sided p-value for H0: E[A] = 0 (None with fewer than
    #: two occupations or when every A is the same).
    t_statistic: float | None
    p_value: float | None


def summarize_amplification(
    values: Sequence[float],
    flips: Sequence[bool] | None = None,
    *,
    exclude_flips: bool = False,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = LEVEL,
) -> AmplificationSummary:
    """Mean of the per-occupation A values (Eq. 2), its bootstrap interval over occupations and
    the one-sample t-test of §6.3; with ``exclude_flips`` the occupations flagged in ``flips``
    are left out first, as in the paper's analysis (§3.3). One occupation left has no interval:
    every resample of it is itself, a zero-width interval that would back any claim."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise AuditorError("amplification values must be a flat list")
    if not np.isfinite(array).all():
        raise AuditorError("amplification values must be finite numbers")
    if flips is not None and len(flips) != array.size:
        raise AuditorError(f"{len(flips)} flip flags for {array.size} amplification values")
    if exclude_flips and flips is None:
        raise AuditorError("excluding flips needs the flip flags")
    keep = ~np.asarray(flips, dtype=bool) if exclude_flips else np.ones(array.size, dtype=bool)
    kept = array[keep]
    excluded = int(array.size - kept.size)
    if kept.size == 0:
        return AmplificationSummary(0, excluded, None, None, None, None, None)
    low, high = (None, None)
    if kept.size > 1:
        low, high = bootstrap_mean_interval(kept, resamples=resamples, seed=seed, level=level)
    t_statistic, p_value = one_sample_t_test(kept)
    return AmplificationSummary(int(kept.size), excluded, float(kept.mean()), low, high, t_statistic, p_value)


def one_sample_t_test(values: Sequence[float]) -> tuple[float | None, float | None]:
    """``(t, two-sided p)`` of the one-sample t-test of H0: mean = 0; Nones when it is undefined.

    It is undefined with fewer than two values, and when every value is the same (zero
    standard error: scipy returns NaN there).
    """
    from scipy.stats import ttest_1samp

    array = np.asarray(values, dtype=np.float64)
    if array.size < 2 or np.ptp(array) == 0.0:
        return None, None
    result = ttest_1samp(array, 0.0, alternative="two-sided")
    return float(result.statistic), float(result.pvalue)


def _check_resamples(resamples: int) -> None:
    if resamples < 1:
        raise AuditorError(f"the bootstrap needs at least one resample (got {resamples})")


def _percentile_interval(values: np.ndarray, level: float) -> tuple[float, float]:
    _z(level)  # validates the level
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)
