"""Paired bootstrap over seeds, vectorised: resample weights, intervals, and TIBET/T2IAT statistics.

Pure numpy/scipy over arrays; the scoring side (:mod:`auditor.scoring.uncertainty`) turns
answers into the count matrices these functions take.

**Why paired over seeds.** Image *i* of every prompt set is generated from seed *i*, so the
sets share noise through their seeds (composition, lighting, a face). Resampling seed
indices with replacement, and applying the same draw to every set, keeps that pairing: a
difference between two counterfactuals' CAS gets an interval that knows how they move
together, and CAS itself (a comparison of two sets) is resampled as the paired statistic
it is.

**A resample is a row of weights.** Every statistic here starts from sums over images
(concept counts, embedding sums), and gathering the drawn images and summing equals
multiplying a row of multiplicities (how often each seed index was drawn) by the
per-image matrix. Stacking rows computes many resamples in one matrix product: the
identity row (all ones) gives the point estimate, the bootstrap rows come from
:func:`resample_weights`, and BCa's leave-one-seed-out rows from :func:`jackknife_weights`.

**Sets with missing images** (flagged NSFW, or unanswered). Decision: resample seed indices
over *all* seeds, and inside each set drop the drawn seeds whose image that set lacks.
Why, rather than pairing over only the seeds every set has:

1. the identity resample is then exactly the point estimate, which uses every usable
   image of each set; restricting to common seeds would throw images away and put the
   interval around a different number than the one reported;
2. whether an image is usable is an outcome of (seed, prompt), so it belongs to the data
   being resampled: the number of usable images varies across resamples as it would
   across repeated audits, and frequencies divide by the images used *in that resample*;
3. the pairing is kept for every seed two sets both have.

The price: a resample may leave a set without usable images, so its statistics are
undefined there (NaN). Intervals are taken over the resamples where a statistic is
defined, and :class:`Bounds` says what share that was.

Missing values are NaN throughout (the point-estimate functions' None): CAS of a set
without concepts, BAV of an axis with fewer than two CAS values, and so on, by the same
rules as :mod:`auditor.metrics.tibet`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from auditor.core.choices import IntervalMethod

# --------------------------------------------------------------------------- resample weights


def resample_indices(seeds: int, resamples: int, seed: int) -> np.ndarray:
    """``(resamples, seeds)`` seed indices drawn with replacement by ``numpy.random.default_rng(seed)``.

    One row per resample, shared by every prompt set (the pairing). The same ``seed``
    gives the same rows on every machine (numpy's PCG64 stream is stable).
    """
    if seeds < 1:
        raise ValueError("a bootstrap needs at least one seed index")
    if resamples < 1:
        raise ValueError("a bootstrap needs at least one resample")
    return np.random.default_rng(seed).integers(0, seeds, size=(resamples, seeds))


def multiplicities(indices: np.ndarray, seeds: int) -> np.ndarray:
    """``(rows, seeds)`` float64 counts: how often each seed index occurs in each row of ``indices``."""
    indices = np.asarray(indices)
    if indices.ndim != 2:
        raise ValueError(f"indices must be a 2-D array (resamples x draws), got shape {indices.shape}")
    if indices.size and (indices.min() < 0 or indices.max() >= seeds):
        raise ValueError(f"seed indices must lie in [0, {seeds})")
    rows = indices.shape[0]
    flat = (indices + seeds * np.arange(rows)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * seeds).reshape(rows, seeds).astype(np.float64)


def resample_weights(seeds: int, resamples: int, seed: int) -> np.ndarray:
    """Bootstrap weight rows: :func:`multiplicities` of :func:`resample_indices`."""
    return multiplicities(resample_indices(seeds, resamples, seed), seeds)


def jackknife_weights(seeds: int) -> np.ndarray:
    """``(seeds, seeds)`` leave-one-seed-out rows (BCa's acceleration): all ones but a zero at ``i``."""
    return np.ones((seeds, seeds)) - np.eye(seeds)


# --------------------------------------------------------------------------- intervals


@dataclass(frozen=True)
class Bounds:
    """Intervals of many statistics at once; every array has the statistics' shape."""

    low: np.ndarray
    high: np.ndarray
    #: Per statistic, the method actually used ("bca" falls back to "percentile" where it degenerates).
    method: np.ndarray
    #: Per statistic, None or why BCa was not used (object array of str | None).
    note: np.ndarray
    #: Per statistic, the share of resamples in which it is defined (not NaN).
    defined: np.ndarray


def quantiles(samples: np.ndarray, q: np.ndarray | float) -> np.ndarray:
    """Per column of ``samples`` (axis 0 = resamples), its ``q`` quantile over the non-NaN values.

    ``q`` is a scalar or one level per column (BCa adjusts each statistic's levels).
    Linear interpolation between order statistics, numpy's default ("linear", type 7),
    so a zero-spread column gives exactly its value. NaN where a column has no value.
    """
    samples = np.asarray(samples, dtype=np.float64)
    flat = samples.reshape(samples.shape[0], -1)
    levels = np.broadcast_to(np.asarray(q, dtype=np.float64), samples.shape[1:]).ravel()
    ordered = np.sort(flat, axis=0)  # NaN sorts last
    counts = (~np.isnan(flat)).sum(axis=0)
    position = levels * np.maximum(counts - 1, 0)
    below = np.floor(position).astype(np.intp)
    above = np.minimum(below + 1, np.maximum(counts - 1, 0))
    columns = np.arange(flat.shape[1])
    lower, upper = ordered[below, columns], ordered[above, columns]
    fraction = position - below
    with np.errstate(invalid="ignore"):
        value = np.where(fraction == 0, lower, lower + fraction * (upper - lower))
    return np.where(counts > 0, value, np.nan).reshape(samples.shape[1:])


def percentile_bounds(samples: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of each statistic's resamples."""
    _check_level(level)
    tail = (1 - level) / 2
    return quantiles(samples, tail), quantiles(samples, 1 - tail)


def bca_bounds(
    estimate: np.ndarray, samples: np.ndarray, jackknife: np.ndarray, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bias-corrected and accelerated interval (Efron & Tibshirani 14.3, Eq. 14.15 and 15.36).

    As :func:`scipy.stats.bootstrap` computes it: the bias correction
    ``z0 = Φ⁻¹(share of resamples below the estimate, ties counting half)`` and the
    acceleration ``a = Σ d³ / (6 (Σ d²)^1.5)`` with ``d`` = jackknife mean − jackknife
    value; the interval is the resamples' quantiles at
    ``Φ(z0 + (z0 + z) / (1 − a (z0 + z)))`` for ``z = Φ⁻¹((1 ∓ level) / 2)``.
    ``jackknife`` holds the statistics with each seed left out in turn (axis 0).

    Returns ``(low, high, note)``: where BCa is not defined, ``low``/``high`` are NaN and
    ``note`` (object array) says why; :func:`intervals` then uses the percentile interval.
    """
    _check_level(level)
    samples = np.asarray(samples, dtype=np.float64)
    z0, acceleration, note = _bca_correction(estimate, samples, jackknife)
    tail = (1 - level) / 2
    low = _corrected_quantile(samples, z0, acceleration, note, tail)
    high = _corrected_quantile(samples, z0, acceleration, note, 1 - tail)
    usable = np.equal(note, None)
    return np.where(usable, low, np.nan), np.where(usable, high, np.nan), note


def bca_quantile(
    estimate: np.ndarray, samples: np.ndarray, jackknife: np.ndarray, q: float
) -> tuple[np.ndarray, np.ndarray]:
    """BCa's ``q`` quantile: the bound :func:`bca_bounds` puts at the tail ``q``, alone (a one-sided bound at level
    ``1 − q``, for any ``q`` in (0, 1)). Returns ``(value, note)``, NaN and the reason where BCa is not defined."""
    if not 0 < q < 1:
        raise ValueError(f"the quantile must lie strictly between 0 and 1, got {q}")
    samples = np.asarray(samples, dtype=np.float64)
    z0, acceleration, note = _bca_correction(estimate, samples, jackknife)
    value = _corrected_quantile(samples, z0, acceleration, note, q)
    return np.where(np.equal(note, None), value, np.nan), note


def _corrected_quantile(
    samples: np.ndarray, z0: np.ndarray, acceleration: np.ndarray, note: np.ndarray, q: float
) -> np.ndarray:
    """The resamples' quantile at ``Φ(z0 + (z0 + z) / (1 − a (z0 + z)))``, ``z = Φ⁻¹(q)``; notes (in place) where
    the denominator is not positive. Values where ``note`` is set are meaningless."""
    from scipy.special import ndtr, ndtri  # here, not at import: records import this module's types

    with np.errstate(divide="ignore", invalid="ignore"):
        z = ndtri(q)
        denominator = 1 - acceleration * (z0 + z)
        note[np.equal(note, None) & ~(denominator > 0)] = "the acceleration is too large for the requested level"
        level = ndtr(z0 + (z0 + z) / denominator)
    return quantiles(samples, np.where(np.equal(note, None), level, q))


def bca_p_value_above(
    estimate: np.ndarray, samples: np.ndarray, jackknife: np.ndarray, value: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """One-sided BCa p-value of "the statistic is above ``value``": :func:`p_value_above` with BCa's correction.

    Test inversion, as :func:`p_value_above` does for the percentile interval: the smallest
    one-sided level ``α`` at which BCa's lower bound (the quantile at
    ``Φ(z0 + (z0 + z_α) / (1 − a (z0 + z_α)))``, :func:`bca_bounds`) still lies above
    ``value``. That bound passes ``value`` where its quantile level reaches ``F``, the
    percentile p-value (:func:`p_value_above`: the smoothed share of resamples at or below
    ``value``, or the level where the interpolated quantile passes it, whichever is larger),
    so with ``d = Φ⁻¹(F) − z0``, ``p = Φ(d / (1 + a d) − z0)``; with ``z0 = a = 0`` it is ``F``.

    Where every resample lies at or below ``value`` (``F = 1``) so does every bound: p is 1.

    Returns ``(p, note)``: NaN and the reason where BCa is not defined (:func:`bca_bounds`'s
    reasons), or where ``1 + a d <= 0`` (the acceleration keeps every BCa bound on one side of
    ``value``, at any level).
    """
    from scipy.special import ndtr, ndtri

    samples = np.asarray(samples, dtype=np.float64)
    z0, acceleration, note = _bca_correction(estimate, samples, jackknife)
    share = p_value_above(samples, value)  # F: the level at which the percentile lower bound passes ``value``
    below_all = share >= 1
    with np.errstate(divide="ignore", invalid="ignore"):
        d = ndtri(share) - z0
        reach = 1 + acceleration * d
        note[np.equal(note, None) & ~below_all & ~(reach > 0)] = "the acceleration is too large for this test"
        p = np.where(below_all, 1.0, ndtr(d / reach - z0))
    return np.where(np.equal(note, None), p, np.nan), note


def _bca_correction(
    estimate: np.ndarray, samples: np.ndarray, jackknife: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BCa's bias correction ``z0`` and acceleration ``a`` per statistic (:func:`bca_bounds`), and a note (object
    array) saying why BCa is not defined, None where it is."""
    from scipy.special import ndtri

    estimate = np.asarray(estimate, dtype=np.float64)
    jackknife = np.asarray(jackknife, dtype=np.float64)
    defined = ~np.isnan(samples)
    count = defined.sum(axis=0)
    below = ((samples < estimate) & defined).sum(axis=0) + ((samples <= estimate) & defined).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z0 = ndtri(below / (2.0 * count))
        deviation = jackknife.mean(axis=0) - jackknife
        spread = (deviation**2).sum(axis=0)
        acceleration = (deviation**3).sum(axis=0) / (6.0 * spread**1.5)
    note = np.full(estimate.shape, None, dtype=object)
    # The last matching reason wins, so the list runs from the least to the most basic.
    reasons = [
        (spread == 0, "the leave-one-seed-out values do not vary"),
        (np.isnan(jackknife).any(axis=0), "a leave-one-seed-out value is undefined"),
        (~np.isfinite(z0), "every resample lies on one side of the estimate"),
        (np.all(samples[:1] == samples, axis=0) & (count == samples.shape[0]), "every resample is equal"),
        (count == 0, "no resample defines it"),
        (~np.isfinite(estimate), "the estimate is undefined"),
    ]
    for mask, reason in reasons:
        note[mask] = reason
    return z0, acceleration, note


def intervals(
    estimate: np.ndarray,
    samples: np.ndarray,
    *,
    level: float = 0.95,
    method: IntervalMethod = "percentile",
    jackknife: np.ndarray | None = None,
) -> Bounds:
    """Intervals for the statistics ``estimate`` (any shape) from ``samples`` (resamples first).

    ``method="bca"`` needs ``jackknife``; statistics where BCa is not defined get the
    percentile interval, with ``method`` "percentile" and a ``note`` saying why. A
    statistic whose estimate is NaN (undefined on the data) gets no interval (NaN): there
    is no number to put one around.
    """
    estimate = np.asarray(estimate, dtype=np.float64)
    samples = np.asarray(samples, dtype=np.float64)
    if samples.shape[1:] != estimate.shape:
        raise ValueError(f"samples {samples.shape} do not match the estimate's shape {estimate.shape}")
    low, high = percentile_bounds(samples, level)
    used = np.full(estimate.shape, "percentile", dtype=object)
    note = np.full(estimate.shape, None, dtype=object)
    if method == "bca":
        if jackknife is None:
            raise ValueError("BCa intervals need the leave-one-seed-out (jackknife) statistics")
        bca_low, bca_high, note = bca_bounds(estimate, samples, jackknife, level)
        ok = np.equal(note, None)
        low, high = np.where(ok, bca_low, low), np.where(ok, bca_high, high)
        used[ok] = "bca"
    elif method != "percentile":
        raise ValueError(f"unknown interval method {method!r}: use 'percentile' or 'bca'")
    undefined = np.isnan(estimate)
    defined = (~np.isnan(samples)).mean(axis=0) if samples.shape[0] else np.zeros(estimate.shape)
    return Bounds(
        low=np.where(undefined, np.nan, low),
        high=np.where(undefined, np.nan, high),
        method=used,
        note=note,
        defined=defined,
    )


def p_value_above(samples: np.ndarray, value: float = 0.0) -> np.ndarray:
    """One-sided bootstrap p-value of "the statistic is above ``value``", per column of ``samples``.

    ``(1 + #resamples <= value) / (1 + #defined resamples)``: the one-sided level at which the
    percentile interval's lower bound passes ``value`` (test inversion), with the +1 that keeps
    a finite number of resamples from claiming p = 0. The bound is the resamples' interpolated
    quantile (:func:`quantiles`), which can pass ``value`` at a higher level than that share
    when most resamples lie at or below ``value``; p is then that level. So at any level
    above p the lower bound lies above ``value``. NaN resamples (statistic undefined there)
    are left out; a column with none gives NaN.
    """
    samples = np.asarray(samples, dtype=np.float64)
    defined = ~np.isnan(samples)
    count = defined.sum(axis=0)
    at_or_below = (defined & (samples <= value)).sum(axis=0)
    share = (1.0 + at_or_below) / (1.0 + count)
    return np.where(count > 0, np.maximum(share, _level_passing(samples, value)), np.nan)


def _level_passing(samples: np.ndarray, value: float) -> np.ndarray:
    """Per column, the level from which :func:`quantiles` lies above ``value``: with ``k`` of ``n`` defined
    resamples at or below it and ``s`` sorted, ``(k - 1 + f) / (n - 1)`` where the interpolation between
    ``s[k-1] <= value < s[k]`` passes it at fraction ``f``; 0 when none is at or below it, 1 when all are."""
    ordered = np.sort(samples, axis=0)  # NaN sorts last
    count = (~np.isnan(samples)).sum(axis=0)
    k = (ordered <= value).sum(axis=0)
    inside = (k > 0) & (k < count)
    below = np.take_along_axis(ordered, np.clip(k - 1, 0, None)[None], axis=0)[0]
    above = np.take_along_axis(ordered, np.minimum(k, np.maximum(count - 1, 0))[None], axis=0)[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        level = (k - 1 + (value - below) / (above - below)) / (count - 1)
    return np.where(inside, level, np.where(k >= count, 1.0, 0.0))


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"the confidence level must lie strictly between 0 and 1, got {level}")
