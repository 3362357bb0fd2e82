"""Prompt-to-image tracing numbers (Wu et al., J. Imaging 2025, §§4-5): pure arithmetic.

Representation similarity per stage (§4.1, Eq. 1-2): the cosine of paired embeddings of a
triplet's neutral prompt and its feminine or masculine counterpart (text-encoder output,
final latent z₀, image embeddings), and the mean SSIM of the paired images. The question
is whether the neutral prompt is closer to one gender: per pair d = s(n,m) − s(n,f), a
percentile bootstrap interval of its mean over resampled units (triplets) from a seeded
generator, a two-sided sign test over the units, and a two-sided swap test (below);
"closer to masculine" only when the interval lies above 0 and the swap test's p is below
1 − confidence (below 0: feminine).

The swap test is the claims' guard. With few triplets a percentile bootstrap interval is far
too narrow (with two triplets it is their two differences, so any two of one sign "exclude 0"
half the time when there is no effect), while swapping the masculine and feminine prompts of
any triplet is exact under the null: if the model treats the genders alike, each triplet's
labels could be either way round. Every one of the 2ⁿ swaps is tried when that is at most the
resamples asked for, else that many at random; p is the share at least as extreme as the data.

Objects (§5.2): C(o, P) = Σ_p cnt(o, p); the co-occurrence similarity s_O (Eq. 4), the
mean cosine of paired count vectors (:func:`count_cosine` per pair, averaged by
:func:`compare_closeness` like every other stage's similarity); the bias score BS(o) = C(o,P_m) / (C(o,P_m) +
(|P_m|/|P_f|)·C(o,P_f)) (Eq. 5; 1 masculine, 0 feminine, 0.5 neither) with percentile
bootstrap intervals over resampled units and the swap test's p of BS ≠ 0.5. The χ² tests of
the object × prompt-set tables are in :mod:`auditor.metrics.contingency`.

No models, no records, no I/O; sums over objects run in sorted order, so a result never
depends on dict iteration order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np

from auditor.core.errors import AuditorError

Closer = Literal["masculine", "feminine", "undecided"]

#: SSIM as Wang et al. (2004) define it, with the settings that change its value.
SSIM_SETTINGS: dict[str, float | str | bool] = {
    "window": "gaussian",
    "sigma": 1.5,
    "window_size": 11,
    "k1": 0.01,
    "k2": 0.03,
    "sample_covariance": False,
    "channels": "mean of per-channel SSIM",
    "border": "pixels closer than 5 to the edge left out of the mean",
}
#: Bootstrap means drawn per batch are capped so one batch holds about this many indices.
_BOOTSTRAP_BATCH_VALUES = 1 << 22


# --------------------------------------------------------------------------- representations


def _rows(array: object, name: str) -> np.ndarray:
    values = np.asarray(array)
    if values.ndim < 2 or values.shape[0] == 0:
        raise AuditorError(f"{name} must have one row per pair (at least 2-D and not empty), got shape {values.shape}")
    if not np.issubdtype(values.dtype, np.number) or np.iscomplexobj(values):
        raise AuditorError(f"{name} must hold real numbers, got dtype {values.dtype}")
    values = values.reshape(values.shape[0], -1).astype(np.float64)
    if not np.isfinite(values).all():
        raise AuditorError(f"{name} contains NaN or infinite values")
    return values


def paired_cosines(first: object, second: object) -> np.ndarray:
    """cos(first[i], second[i]) for every row i (rows flattened: latents of shape (n, 4, 64, 64) are fine).

    A row of zeros has no direction: its cosine is NaN, and :func:`compare_closeness`
    leaves that pair out and counts it.
    """
    a, b = _rows(first, "first embeddings"), _rows(second, "second embeddings")
    if a.shape != b.shape:
        raise AuditorError(f"paired embeddings differ in shape: {a.shape} vs {b.shape}")
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), np.nan)


@dataclass(frozen=True)
class Closeness:
    """Is the neutral prompt closer to the masculine or to the feminine one, at one stage?"""

    mean_neutral_feminine: float
    """Mean s(n,f) over the pairs used."""
    mean_neutral_masculine: float
    """Mean s(n,m) over the pairs used."""
    difference: float
    """Mean over units of the unit's mean s(n,m) − s(n,f): > 0 means closer to masculine."""
    interval: tuple[float, float] | None
    """Percentile bootstrap interval of ``difference``; None with fewer than two units."""
    confidence: float
    resamples: int
    seed: int
    units: int
    """Units (triplets) with at least one usable pair: the bootstrap resamples these."""
    pairs: int
    """Pairs used."""
    dropped_pairs: int
    """Pairs left out because a similarity was undefined (NaN)."""
    masculine_closer: int
    """Units whose mean difference is > 0."""
    feminine_closer: int
    """Units whose mean difference is < 0."""
    ties: int
    """Units whose mean difference is exactly 0: dropped from the sign test."""
    sign_p: float | None
    """Two-sided sign test (binomial, p = 0.5) over the units without ties; None when all tie."""
    swap_p: float | None
    """Two-sided swap test of ``difference`` (see the module); None with fewer than two units."""
    closer_to: Closer
    """"masculine"/"feminine" only when the interval excludes 0 and ``swap_p`` < 1 − confidence; otherwise
    "undecided"."""


def significance(confidence: float) -> float:
    """The p-value a claim must stay below at ``confidence``: 1 - confidence, without its float error (1 - 0.95 is
    0.050000000000000044, which a p of exactly 0.05 would pass)."""
    return round(1 - confidence, 12)


def every_swap_tried(units: int, resamples: int) -> bool:
    """Whether the swap test over ``units`` tries all 2ⁿ swaps (when that is at most ``resamples``) rather than
    drawing ``resamples`` at random."""
    return units < 63 and 1 << units <= resamples


def smallest_swap_p(units: int, resamples: int) -> float:
    """The smallest two-sided p the swap test can give over ``units`` triplets with ``resamples`` draws
    (:func:`swap_patterns`): trying all 2ⁿ swaps, 2 / 2ⁿ (the data's own pattern and its mirror image are the two
    most extreme); drawing at random, 1 / (1 + draws), as the data's own counts once more."""
    if every_swap_tried(units, resamples):
        return 2.0 / 2.0**units
    return 1.0 / (1 + resamples)


def triplets_needed(tests: int, alpha: float, resamples: int) -> int | None:
    """The fewest triplets at which the smallest swap p, Holm-adjusted over ``tests`` tests (its first step
    multiplies the smallest p by their number), falls below ``alpha``: 6 for one test at 0.05, 9 for seven (with
    1000 draws). None when no number does: with too few draws, p cannot go below 1 / (1 + draws)."""
    for units in range(1, 64):
        if tests * smallest_swap_p(units, resamples) < alpha:
            return units
    return None


def swap_patterns(units: int, resamples: int, seed: int) -> tuple[np.ndarray, bool]:
    """Which units' masculine and feminine sides each draw of the swap test swaps (draws x units, bool), and
    whether they are all 2ⁿ swaps (when that is at most ``resamples``) rather than ``resamples`` random ones."""
    if every_swap_tried(units, resamples):
        codes = np.arange(1 << units, dtype=np.int64)
        return (codes[:, None] >> np.arange(units)) & 1 == 1, True
    return np.random.default_rng(seed).integers(0, 2, size=(resamples, units)) == 1, False


def swap_test(
    units: int,
    statistic: Callable[[np.ndarray], np.ndarray],
    observed: np.ndarray,
    *,
    columns: int,
    resamples: int,
    seed: int,
) -> tuple[np.ndarray, bool]:
    """Two-sided swap-test p of each of ``columns`` numbers, and whether every swap was tried.

    ``statistic(swapped)`` takes draws x units (1.0 where a unit's sides are swapped) and gives
    draws x columns of how far from "no difference" each number lands; ``observed`` is the data's
    own. A NaN draw counts as less extreme. Exact draws include the data's own pattern; random
    ones count it once more ((1 + k) / (1 + draws)), so p is never 0. Draws go in batches, so
    memory stays bounded at any number of units.
    """
    swaps, exact = swap_patterns(units, resamples, seed)
    tolerance = 1e-12 * np.maximum(1.0, np.abs(observed))  # the data's own draw, summed in another order
    extreme = np.zeros(columns)
    batch = max(1, _BOOTSTRAP_BATCH_VALUES // max(units, columns))
    for start in range(0, len(swaps), batch):
        far = statistic(swaps[start : start + batch].astype(np.float64))
        extreme += (far >= observed - tolerance).sum(axis=0)
    return (extreme / len(swaps) if exact else (1 + extreme) / (1 + len(swaps))), exact


def _bootstrap_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Means of ``resamples`` resamples (with replacement) of ``values``, from ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    n = len(values)
    batch = max(1, _BOOTSTRAP_BATCH_VALUES // n)
    means = np.empty(resamples)
    for start in range(0, resamples, batch):
        rows = min(batch, resamples - start)
        means[start : start + rows] = values[rng.integers(0, n, size=(rows, n))].mean(axis=1)
    return means


def compare_closeness(
    neutral_feminine: Sequence[float] | np.ndarray,
    neutral_masculine: Sequence[float] | np.ndarray,
    units: Sequence[str] | None = None,
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Closeness:
    """The paired comparison of s(n,f) and s(n,m) at one stage.

    ``neutral_feminine[i]`` and ``neutral_masculine[i]`` belong to pair i (one triplet, one
    seed); ``units[i]`` names its triplet (default: every pair its own unit). Pairs with
    a NaN on either side are dropped. A unit's difference is the mean of its pairs' d, so
    a triplet generated with 5 seeds weighs as one; the bootstrap resamples units and the
    sign test counts them (ties, d exactly 0, dropped: they favour neither side).
    """
    nf = np.asarray(neutral_feminine, dtype=np.float64).ravel()
    nm = np.asarray(neutral_masculine, dtype=np.float64).ravel()
    if nf.shape != nm.shape:
        raise AuditorError(f"s(n,f) and s(n,m) must pair up: {nf.size} vs {nm.size} values")
    labels = np.asarray(list(units) if units is not None else [str(i) for i in range(nf.size)], dtype=object)
    if labels.size != nf.size:
        raise AuditorError(f"one unit per pair: {labels.size} units for {nf.size} pairs")
    if resamples < 1:
        raise AuditorError("resamples must be at least 1")
    if not 0 < confidence < 1:
        raise AuditorError(f"confidence must be between 0 and 1, got {confidence}")
    usable = np.isfinite(nf) & np.isfinite(nm)
    if not usable.any():
        raise AuditorError("no pair has both similarities defined")
    nf, nm, labels = nf[usable], nm[usable], labels[usable]
    _, unit_index = np.unique(labels, return_inverse=True)
    counts = np.bincount(unit_index)
    unit_differences = np.bincount(unit_index, weights=nm - nf) / counts

    interval: tuple[float, float] | None = None
    if len(unit_differences) >= 2:
        means = _bootstrap_means(unit_differences, resamples, seed)
        alpha = 1 - confidence
        low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
        interval = (float(low), float(high))
    swap_p = None
    if len(unit_differences) >= 2:

        def swapped_means(swapped: np.ndarray) -> np.ndarray:
            """|mean difference| of each draw (a column): a swapped triplet's difference changes sign."""
            return np.abs((1 - 2 * swapped) @ unit_differences / len(unit_differences))[:, None]

        observed = np.array([abs(unit_differences.mean())])
        p, _exact = swap_test(
            len(unit_differences), swapped_means, observed, columns=1, resamples=resamples, seed=seed
        )
        swap_p = float(p[0])
    closer: Closer = "undecided"
    if interval is not None and swap_p is not None and swap_p < significance(confidence):
        if interval[0] > 0:
            closer = "masculine"
        elif interval[1] < 0:
            closer = "feminine"

    positive = int((unit_differences > 0).sum())
    negative = int((unit_differences < 0).sum())
    sign_p = None
    if positive + negative:
        from scipy.stats import binomtest

        sign_p = float(binomtest(positive, positive + negative, 0.5, alternative="two-sided").pvalue)
    return Closeness(
        mean_neutral_feminine=float(nf.mean()),
        mean_neutral_masculine=float(nm.mean()),
        difference=float(unit_differences.mean()),
        interval=interval,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        units=len(unit_differences),
        pairs=int(nf.size),
        dropped_pairs=int((~usable).sum()),
        masculine_closer=positive,
        feminine_closer=negative,
        ties=len(unit_differences) - positive - negative,
        sign_p=sign_p,
        swap_p=swap_p,
        closer_to=closer,
    )


def ssim(first: np.ndarray, second: np.ndarray, *, data_range: float | None = None) -> float:
    """Mean SSIM of two images of the same shape (H×W or H×W×C), as in :data:`SSIM_SETTINGS`.

    Wang et al. (2004): an 11×11 Gaussian window (σ = 1.5), K1 = 0.01, K2 = 0.03,
    population (co)variances; for colour, the mean of the per-channel SSIM. Integer images
    take their dtype's range (255 for 8-bit); float images need ``data_range``.
    Computed by scikit-image (the ``trace`` extra).
    """
    a, b = np.asarray(first), np.asarray(second)
    if a.shape != b.shape:
        raise AuditorError(f"SSIM needs images of the same shape: {a.shape} vs {b.shape}")
    if a.ndim not in (2, 3):
        raise AuditorError(f"SSIM needs H×W or H×W×C images, got shape {a.shape}")
    if min(a.shape[:2]) < SSIM_SETTINGS["window_size"]:
        raise AuditorError(f"SSIM needs images of at least 11×11 pixels, got {a.shape[1]}×{a.shape[0]}")
    if data_range is None:
        if not (np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer)):
            raise AuditorError("SSIM of float images needs data_range (e.g. 1.0 for values in [0, 1])")
        info = np.iinfo(a.dtype)
        data_range = float(info.max - info.min)
    try:
        from skimage.metrics import structural_similarity
    except ImportError:
        raise AuditorError("SSIM needs scikit-image: pip install 'auditor[trace]'") from None
    return float(
        structural_similarity(
            a.astype(np.float64),
            b.astype(np.float64),
            data_range=data_range,
            channel_axis=-1 if a.ndim == 3 else None,
            gaussian_weights=True,
            sigma=SSIM_SETTINGS["sigma"],
            use_sample_covariance=SSIM_SETTINGS["sample_covariance"],
            K1=SSIM_SETTINGS["k1"],
            K2=SSIM_SETTINGS["k2"],
        )
    )


# --------------------------------------------------------------------------- objects


def co_occurrence(image_counts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """C(o, P) = Σ_p cnt(o, p) over the images of one prompt set (Eq. 3), objects sorted by name."""
    totals: dict[str, float] = {}
    for counts in image_counts:
        for name, count in counts.items():
            if count < 0:
                raise AuditorError(f"negative count {count} for {name!r}")
            totals[name] = totals.get(name, 0) + count
    return dict(sorted(totals.items()))


def count_cosine(first: Mapping[str, float], second: Mapping[str, float]) -> float:
    """cos(v, v′) of two images' object counts; missing objects count 0.

    One image without objects shares nothing with the other: 0. Neither has an object:
    the cosine is undefined (NaN), and the pair is left out of s_O.
    """
    keys = sorted(first.keys() | second.keys())
    dot = math.fsum(first.get(key, 0) * second.get(key, 0) for key in keys)
    norm_first = math.sqrt(math.fsum(first.get(key, 0) ** 2 for key in keys))
    norm_second = math.sqrt(math.fsum(second.get(key, 0) ** 2 for key in keys))
    if norm_first == 0 and norm_second == 0:
        return math.nan
    if norm_first == 0 or norm_second == 0:
        return 0.0
    return dot / (norm_first * norm_second)


def bias_score(masculine: float, feminine: float, n_masculine: int, n_feminine: int) -> float | None:
    """BS(o) = C(o,P_m) / (C(o,P_m) + (|P_m|/|P_f|)·C(o,P_f)) (Eq. 5); None when both counts are 0.

    The factor |P_m|/|P_f| puts the feminine count on the masculine set's scale, so sets
    of different sizes (images that failed or were filtered) do not tilt the score.
    """
    if n_masculine <= 0 or n_feminine <= 0:
        raise AuditorError("|P_m| and |P_f| must be positive")
    if masculine < 0 or feminine < 0:
        raise AuditorError("co-occurrence counts cannot be negative")
    denominator = masculine + (n_masculine / n_feminine) * feminine
    return None if denominator == 0 else masculine / denominator


@dataclass(frozen=True)
class ObjectBias:
    """One object of the bias ranking."""

    name: str
    score: float
    masculine: float
    """C(o, P_m)."""
    feminine: float
    """C(o, P_f)."""
    neutral: float | None
    """C(o, P_n), when the neutral counts were given."""


def bias_ranking(
    masculine: Mapping[str, float],
    feminine: Mapping[str, float],
    *,
    n_masculine: int,
    n_feminine: int,
    min_count: float = 1,
    neutral: Mapping[str, float] | None = None,
) -> list[ObjectBias]:
    """BS of every object whose largest count reaches ``min_count``, most masculine first.

    "Largest count" is the largest of C(o,P_m), C(o,P_f) and, when given, C(o,P_n): the
    paper drops objects whose maximum co-occurrence is below 5-20 (§5.3). An object seen
    only in the neutral set has no BS and is not ranked. Ties: by name.
    """
    sets = [masculine, feminine] + ([neutral] if neutral is not None else [])
    names = sorted(set().union(*(counts.keys() for counts in sets)))
    ranking = []
    for name in names:
        m, f = masculine.get(name, 0), feminine.get(name, 0)
        n = neutral.get(name, 0) if neutral is not None else None
        if max(m, f, n or 0) < min_count:
            continue
        score = bias_score(m, f, n_masculine, n_feminine)
        if score is not None:
            ranking.append(ObjectBias(name=name, score=score, masculine=m, feminine=f, neutral=n))
    return sorted(ranking, key=lambda item: (-item.score, item.name))


def _drawn_bias_scores(
    kept: np.ndarray, swapped: np.ndarray, m: np.ndarray, f: np.ndarray, size_m: np.ndarray, size_f: np.ndarray
) -> np.ndarray:
    """BS of every object in every draw (draws x objects): draw r takes ``kept[r, u]`` copies of unit u as it is
    and ``swapped[r, u]`` with its masculine and feminine sides swapped; NaN where BS is undefined."""
    c_m, c_f = kept @ m + swapped @ f, kept @ f + swapped @ m
    total_m, total_f = kept @ size_m + swapped @ size_f, kept @ size_f + swapped @ size_m
    ratio = np.divide(total_m, total_f, out=np.full(len(kept), np.nan), where=total_f > 0)
    denominator = c_m + ratio[:, None] * c_f  # NaN where a draw has no feminine image
    positive = denominator > 0
    return np.where(positive, c_m / np.where(positive, denominator, 1.0), np.nan)


def _unit_counts(masculine, feminine, n_masculine, n_feminine) -> tuple[np.ndarray, ...]:
    """The (units x objects) counts and per-unit image counts as float arrays, checked."""
    m = np.asarray(masculine, dtype=np.float64)
    f = np.asarray(feminine, dtype=np.float64)
    size_m = np.asarray(n_masculine, dtype=np.float64).ravel()
    size_f = np.asarray(n_feminine, dtype=np.float64).ravel()
    if m.ndim != 2 or m.shape != f.shape or size_m.shape != size_f.shape or size_m.size != m.shape[0]:
        raise AuditorError("bias scores by unit need (units x objects) counts and one image count per unit and side")
    if (m < 0).any() or (f < 0).any() or (size_m < 0).any() or (size_f < 0).any():
        raise AuditorError("co-occurrence counts cannot be negative")
    return m, f, size_m, size_f


def bias_score_swap_p(
    masculine: np.ndarray | Sequence[Sequence[float]],
    feminine: np.ndarray | Sequence[Sequence[float]],
    n_masculine: np.ndarray | Sequence[float],
    n_feminine: np.ndarray | Sequence[float],
    *,
    resamples: int = 10_000,
    seed: int = 0,
) -> tuple[list[float | None], bool]:
    """The swap test's two-sided p of BS(o) ≠ 0.5 for every object (arguments as :func:`bias_score_intervals`),
    and whether it tried every swap: how often swapping the masculine and feminine sides of triplets puts BS at
    least as far from 0.5. None for an object with fewer than two units or no BS."""
    m, f, size_m, size_f = _unit_counts(masculine, feminine, n_masculine, n_feminine)
    if resamples < 1:
        raise AuditorError("resamples must be at least 1")
    units, objects = m.shape
    if units < 2:
        return [None] * objects, False
    observed = np.abs(_drawn_bias_scores(np.ones((1, units)), np.zeros((1, units)), m, f, size_m, size_f)[0] - 0.5)
    p, exact = swap_test(
        units, lambda swapped: np.abs(_drawn_bias_scores(1.0 - swapped, swapped, m, f, size_m, size_f) - 0.5),
        observed, columns=objects, resamples=resamples, seed=seed,
    )  # fmt: skip
    return [None if math.isnan(o) else float(v) for o, v in zip(observed, p, strict=True)], exact


class BiasScoreInterval(NamedTuple):
    """A percentile interval of BS(o), over the resamples that define it."""

    low: float
    high: float
    #: The share of resamples in which BS(o) is defined: one that leaves out every unit where o was seen has none.
    defined: float


def bias_score_intervals(
    masculine: np.ndarray | Sequence[Sequence[float]],
    feminine: np.ndarray | Sequence[Sequence[float]],
    n_masculine: np.ndarray | Sequence[float],
    n_feminine: np.ndarray | Sequence[float],
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[BiasScoreInterval | None]:
    """Percentile bootstrap intervals of BS(o) for every object, resampling units (triplets).

    ``masculine[u, o]`` and ``feminine[u, o]`` are unit u's counts of object o in its
    masculine and feminine images, ``n_masculine[u]`` and ``n_feminine[u]`` its numbers of
    images. A resample draws units with replacement (from ``default_rng(seed)``) and
    recomputes BS from the summed counts and sizes; resamples where BS is undefined (both
    counts 0, or no image on a side) are left out, and each interval says what share of the
    resamples it is over. None for an object with fewer than two units, or no resample that
    defines it.
    """
    m, f, size_m, size_f = _unit_counts(masculine, feminine, n_masculine, n_feminine)
    if resamples < 1 or not 0 < confidence < 1:
        raise AuditorError("resamples must be at least 1 and confidence between 0 and 1")
    units, objects = m.shape
    if units < 2:
        return [None] * objects
    rng = np.random.default_rng(seed)
    alpha = 1 - confidence
    batch = max(1, _BOOTSTRAP_BATCH_VALUES // max(units, objects))
    scores = np.empty((resamples, objects))
    for start in range(0, resamples, batch):
        rows = min(batch, resamples - start)
        draws = rng.integers(0, units, size=(rows, units))
        weights = np.zeros((rows, units))
        np.add.at(weights, (np.repeat(np.arange(rows), units), draws.ravel()), 1.0)
        scores[start : start + rows] = _drawn_bias_scores(weights, np.zeros_like(weights), m, f, size_m, size_f)
    intervals: list[BiasScoreInterval | None] = []
    for column in scores.T:
        defined = column[np.isfinite(column)]
        if defined.size == 0:
            intervals.append(None)
            continue
        low, high = np.quantile(defined, [alpha / 2, 1 - alpha / 2])
        intervals.append(BiasScoreInterval(float(low), float(high), defined.size / resamples))
    return intervals
