"""T2IAT statistics (Wang et al., ACL 2023, §3.2): association, effect size, permutation p-value.

Pure functions over embedding arrays (rows = images or texts); no model imports, so
cached embeddings can be rescored anywhere. With concepts X, Y and attributes A, B:

- ``Asc(x) = mean_a cos(x, a) - mean_b cos(x, b)`` over the attribute-guided images
  G(X^A), G(X^B) of x's own concept (Eq. 2);
- ``S = mean_x Asc(x) - mean_y Asc(y)`` (Eq. 1);
- Cohen's ``d = S / s`` with ``s`` the pooled standard deviation of the Asc values from
  sample variances (Eq. 4), undefined (None, labelled "undefined") when ``s`` is ~0; or, as the
  authors' released notebook computes it (``spread="combined"``), ``s`` the population standard
  deviation of all Asc values of X and Y together, the WEAT convention behind the paper's Table 1
  (it holds the spread between the groups too, so ``|d| <= 2`` for groups of equal size);
- a two-sided permutation p-value after Eq. 3: the Asc values are reassigned to two groups of the
  original sizes and ``p`` is the share of splits with ``|S~| >= |S|``, the observed split among
  them (Eq. 3 writes ``>`` over equal halves; ``>=`` keeps p above 0 and the test exact), by exact
  enumeration when there are at most :data:`EXACT_SPLIT_LIMIT` splits, else Monte Carlo
  with a seeded generator reporting ``(1 + hits) / (1 + n)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain, combinations

import numpy as np

from auditor.core.choices import EffectLabel, EffectSpread
from auditor.core.errors import AuditorError

#: Enumerate every split when there are at most this many; sample splits above it.
EXACT_SPLIT_LIMIT = 200_000
#: Differences below this share of the largest |Asc| are float rounding, not data: used for
#: ties in the permutation test and for a pooled sd that is "zero" (see :func:`effect_size`).
RELATIVE_TOLERANCE = 1e-10
#: Cohen's thresholds on |d|, largest first.
EFFECT_THRESHOLDS: tuple[tuple[float, EffectLabel], ...] = ((0.8, "large"), (0.5, "medium"), (0.2, "small"))
#: Rows drawn per Monte Carlo batch are capped so one batch holds about this many values.
_MC_BATCH_VALUES = 1 << 20


# --------------------------------------------------------------------------- embeddings


def unit_rows(embeddings: np.ndarray, name: str = "embeddings") -> np.ndarray:
    """``embeddings`` as float64 rows of unit length; a one-line error for unusable input.

    Cosine similarity needs unit rows; normalising here makes the statistics correct for
    embeddings stored unnormalised, and is a no-op (up to rounding) for CLIP's.
    """
    array = np.asarray(embeddings)
    if array.ndim != 2:
        raise AuditorError(f"{name} must be a 2-D array (rows = embeddings), got shape {array.shape}")
    if array.shape[0] == 0:
        raise AuditorError(f"{name} is empty: every group needs at least one embedding")
    if array.shape[1] == 0:
        raise AuditorError(f"{name} has embeddings of dimension 0")
    if not np.issubdtype(array.dtype, np.number) or np.iscomplexobj(array):
        raise AuditorError(f"{name} must hold real numbers, got dtype {array.dtype}")
    array = array.astype(np.float64)
    if not np.isfinite(array).all():
        raise AuditorError(f"{name} contains NaN or infinite values")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    if (norms == 0).any():
        raise AuditorError(f"{name} has an all-zero row (row {int(np.argmin(norms[:, 0]))}); its cosine is undefined")
    return array / norms


def check_same_dimension(groups: dict[str, np.ndarray]) -> None:
    """All groups must embed into the same space (same number of columns)."""
    dims = {name: array.shape[1] for name, array in groups.items()}
    if len(set(dims.values())) > 1:
        listed = ", ".join(f"{name}={dim}" for name, dim in dims.items())
        raise AuditorError(f"embedding dimensions differ: {listed}")


def mean_cosine(u: np.ndarray, v: np.ndarray) -> float:
    """Mean cosine similarity over all pairs (row of ``u``, row of ``v``)."""
    u, v = unit_rows(u, "first set"), unit_rows(v, "second set")
    check_same_dimension({"first set": u, "second set": v})
    # mean_ij <u_i, v_j> = <mean_i u_i, mean_j v_j>: O((n + m) d) instead of O(n m d).
    return float(u.mean(axis=0) @ v.mean(axis=0))


# --------------------------------------------------------------------------- Asc, S, d


def association_scores(targets: np.ndarray, attribute_a: np.ndarray, attribute_b: np.ndarray) -> np.ndarray:
    """Per-target ``Asc(x) = mean_a cos(x, a) - mean_b cos(x, b)`` (T2IAT Eq. 2).

    ``targets`` are the neutral images of one concept; ``attribute_a``/``attribute_b`` are
    that concept's attribute-guided images G(X^A) and G(X^B).
    """
    x = unit_rows(targets, "targets")
    a = unit_rows(attribute_a, "attribute A")
    b = unit_rows(attribute_b, "attribute B")
    check_same_dimension({"targets": x, "attribute A": a, "attribute B": b})
    # mean_a <x, a> = <x, mean_a a>, so Asc is one matrix-vector product.
    return x @ (a.mean(axis=0) - b.mean(axis=0))


def self_association_scores(attribute_a: np.ndarray, attribute_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Asc of the attribute images themselves, each left out of its own set.

    ``Asc(a_j) = mean_{a != a_j} cos(a_j, a) - mean_b cos(a_j, b)`` and symmetrically for
    ``b_j``. Leaving the image out matters: its cosine with itself is 1 and would inflate
    the within-set term. Needs at least two images per set.
    """
    a = unit_rows(attribute_a, "attribute A")
    b = unit_rows(attribute_b, "attribute B")
    check_same_dimension({"attribute A": a, "attribute B": b})
    if len(a) < 2 or len(b) < 2:
        raise AuditorError("leave-one-out association needs at least two images in each attribute set")

    def leave_one_out_mean(rows: np.ndarray) -> np.ndarray:
        # mean over k != j of <r_j, r_k> = (<r_j, sum_k r_k> - <r_j, r_j>) / (n - 1)
        return (rows @ rows.sum(axis=0) - np.einsum("ij,ij->i", rows, rows)) / (len(rows) - 1)

    asc_a = leave_one_out_mean(a) - a @ b.mean(axis=0)
    asc_b = b @ a.mean(axis=0) - leave_one_out_mean(b)
    return asc_a, asc_b


def _as_scores(values: np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise AuditorError(f"{name} must be a non-empty 1-D array of association scores")
    if not np.isfinite(array).all():
        raise AuditorError(f"{name} contains NaN or infinite values")
    return array


def quartiles(values: np.ndarray | list[float]) -> tuple[float, float, float]:
    """25th, 50th and 75th percentiles of Asc values (numpy's linear interpolation): the paper's Fig. 3 boxes."""
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return float(q1), float(median), float(q3)


def differential_association(asc_x: np.ndarray, asc_y: np.ndarray) -> float:
    """``S = mean Asc over X's images - mean Asc over Y's images`` (T2IAT Eq. 1)."""
    return float(_as_scores(asc_x, "Asc of X").mean() - _as_scores(asc_y, "Asc of Y").mean())


def pooled_standard_deviation(asc_x: np.ndarray, asc_y: np.ndarray) -> float | None:
    """``sqrt(((n_x-1) s_x^2 + (n_y-1) s_y^2) / (n_x + n_y - 2))`` with sample variances (ddof=1).

    ``(n-1) s^2`` is written as the sum of squared deviations, so a group of one image
    contributes 0 instead of an undefined variance. None when ``n_x + n_y < 3``.
    """
    x, y = _as_scores(asc_x, "Asc of X"), _as_scores(asc_y, "Asc of Y")
    dof = len(x) + len(y) - 2
    if dof <= 0:
        return None
    squares = float(((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum())
    return math.sqrt(squares / dof)


def combined_standard_deviation(asc_x: np.ndarray, asc_y: np.ndarray) -> float | None:
    """The population standard deviation (ddof=0) of every Asc value of X and Y together: the ``s`` of the
    authors' released notebook (``np.concatenate((X, Y)).std()``). None below three values, as the pooled sd."""
    x, y = _as_scores(asc_x, "Asc of X"), _as_scores(asc_y, "Asc of Y")
    if len(x) + len(y) < 3:
        return None
    return float(np.concatenate([x, y]).std())


def effect_size(asc_x: np.ndarray, asc_y: np.ndarray, spread: EffectSpread = "pooled") -> float | None:
    """Cohen's ``d = S / s`` (T2IAT Eq. 4), ``s`` as ``spread`` says; None when ``s`` is undefined or ~0.

    ``s`` counts as 0 when ``s <= RELATIVE_TOLERANCE * max |Asc|`` (0 included, and an
    all-zero Asc). Why relative: Asc values are differences of mean cosines, computed in
    float64 over hundreds of embedding dimensions, so groups whose images are the same
    up to rounding still differ by a few ulps, ~1e-16 to 1e-13 of the values' magnitude.
    Dividing S by such an ``s`` gives a d of 1e13 that measures rounding, not images, and
    an absolute cut-off would misjudge Asc values that are all tiny. Real spreads between
    generated images are many orders of magnitude above 1e-10 of the scale. With no
    spread within them, identical groups and perfectly separated ones alike have no pooled
    effect size; the combined sd also holds the gap between the groups, so only values that
    are all equal leave it without one.
    """
    x, y = _as_scores(asc_x, "Asc of X"), _as_scores(asc_y, "Asc of Y")
    s = pooled_standard_deviation(x, y) if spread == "pooled" else combined_standard_deviation(x, y)
    if s is None or s <= RELATIVE_TOLERANCE * float(np.abs(np.concatenate([x, y])).max()):
        return None
    return differential_association(x, y) / s


def effect_label(d: float | None) -> EffectLabel:
    """Cohen's label of ``|d|``: small >= 0.2, medium >= 0.5, large >= 0.8, else negligible.

    An undefined ``d`` (no spread within the groups) is "undefined": a size it does not
    have is never claimed, however different the two groups' means are.
    """
    if d is None:
        return "undefined"
    for threshold, label in EFFECT_THRESHOLDS:
        if abs(d) >= threshold:
            return label
    return "negligible"


# --------------------------------------------------------------------------- permutation test


@dataclass(frozen=True)
class PermutationTest:
    """Outcome of the permutation test."""

    p_value: float
    exact: bool
    permutations: int


def split_count(n_x: int, n_y: int) -> int:
    """Number of ways to reassign ``n_x + n_y`` values to groups of sizes ``n_x`` and ``n_y``."""
    return math.comb(n_x + n_y, n_x)


def _split_association(group_sums: np.ndarray, total: float, n_x: int, n_y: int) -> np.ndarray:
    """S~ of splits whose X~ group sums to ``group_sums``: ``T/n_x - (total - T)/n_y``."""
    return group_sums / n_x - (total - group_sums) / n_y


def permutation_test(
    asc_x: np.ndarray,
    asc_y: np.ndarray,
    *,
    permutations: int = 10_000,
    seed: int = 0,
    exact_limit: int = EXACT_SPLIT_LIMIT,
) -> PermutationTest:
    """Two-sided permutation p-value: the share of splits with ``|S~| >= |S|``.

    Exact when ``C(n_x + n_y, n_x) <= exact_limit``: every split is enumerated (the
    observed one included, so ``p >= 1 / C``). Otherwise ``permutations`` random splits
    from ``numpy.random.default_rng(seed)`` give ``p = (1 + hits) / (1 + permutations)``.
    S~ and S are computed with the same formula; ties within :data:`RELATIVE_TOLERANCE`
    of the scores' scale count as hits, so rounding never drops the observed split.
    """
    x, y = _as_scores(asc_x, "Asc of X"), _as_scores(asc_y, "Asc of Y")
    if permutations < 1:
        raise AuditorError("permutations must be at least 1")
    values = np.concatenate([x, y])
    n_x, n_y = len(x), len(y)
    total = float(values.sum())
    observed = abs(float(_split_association(np.array(x.sum()), total, n_x, n_y)))
    tolerance = RELATIVE_TOLERANCE * float(np.abs(values).max())
    count = split_count(n_x, n_y)

    if count <= exact_limit:
        # Enumerate the smaller group's members; S~ of the complementary split follows.
        k, enumerate_x = (n_x, True) if n_x <= n_y else (n_y, False)
        flat = np.fromiter(chain.from_iterable(combinations(range(n_x + n_y), k)), dtype=np.intp, count=count * k)
        sums = values[flat.reshape(count, k)].sum(axis=1)
        x_sums = sums if enumerate_x else total - sums
        hits = int((np.abs(_split_association(x_sums, total, n_x, n_y)) >= observed - tolerance).sum())
        return PermutationTest(p_value=hits / count, exact=True, permutations=count)

    rng = np.random.default_rng(seed)
    batch = max(1, _MC_BATCH_VALUES // len(values))
    hits = 0
    remaining = permutations
    while remaining:
        rows = min(batch, remaining)
        shuffled = rng.permuted(np.broadcast_to(values, (rows, len(values))), axis=1)
        association = _split_association(shuffled[:, :n_x].sum(axis=1), total, n_x, n_y)
        hits += int((np.abs(association) >= observed - tolerance).sum())
        remaining -= rows
    return PermutationTest(p_value=(1 + hits) / (1 + permutations), exact=False, permutations=permutations)


# --------------------------------------------------------------------------- the whole test


@dataclass(frozen=True)
class Association:
    """The outcome of a T2IAT test: S, d with its label, the permutation p-value and the group sizes."""

    association: float
    effect_size: float | None
    effect_label: EffectLabel
    effect_size_sd: EffectSpread
    p_value: float
    exact: bool
    permutations: int
    n_x: int
    n_y: int


def association_result(
    asc_x: np.ndarray,
    asc_y: np.ndarray,
    *,
    permutations: int = 10_000,
    seed: int = 0,
    spread: EffectSpread = "pooled",
) -> Association:
    """S, d (its ``s`` as ``spread`` says) with its label, and the permutation p-value from per-image Asc values."""
    x, y = _as_scores(asc_x, "Asc of X"), _as_scores(asc_y, "Asc of Y")
    association = differential_association(x, y)
    d = effect_size(x, y, spread)
    test = permutation_test(x, y, permutations=permutations, seed=seed)
    return Association(
        association=association,
        effect_size=d,
        effect_label=effect_label(d),
        effect_size_sd=spread,
        p_value=test.p_value,
        exact=test.exact,
        permutations=test.permutations,
        n_x=len(x),
        n_y=len(y),
    )


def association_test(
    x: np.ndarray,
    y: np.ndarray,
    xa: np.ndarray,
    xb: np.ndarray,
    ya: np.ndarray,
    yb: np.ndarray,
    *,
    permutations: int = 10_000,
    seed: int = 0,
    spread: EffectSpread = "pooled",
) -> Association:
    """The full T2IAT test from the six embedding groups G(X), G(Y), G(X^A), G(X^B), G(Y^A), G(Y^B)."""
    groups = {"X": x, "Y": y, "XA": xa, "XB": xb, "YA": ya, "YB": yb}
    units = {name: unit_rows(array, name) for name, array in groups.items()}
    check_same_dimension(units)
    asc_x = association_scores(units["X"], units["XA"], units["XB"])
    asc_y = association_scores(units["Y"], units["YA"], units["YB"])
    return association_result(asc_x, asc_y, permutations=permutations, seed=seed, spread=spread)


def single_concept_association(
    neutral: np.ndarray,
    attribute_a: np.ndarray,
    attribute_b: np.ndarray,
    *,
    permutations: int = 10_000,
    seed: int = 0,
    spread: EffectSpread = "pooled",
) -> tuple[np.ndarray, Association]:
    """T2IAT for one concept with two attribute image sets (a prompt and its two counterfactuals).

    The neutral images play X, with ``Asc(x)`` against G(A) and G(B) as in Eq. 2. Y is the
    pooled attribute images themselves, each scored against both sets with itself left
    out (:func:`self_association_scores`): a balanced mix of A and B is what an unbiased
    model's neutral images would look like. Comparing with that mix rather than with 0
    cancels a difference in how tight the two sets are (if A's images resemble each other
    more than B's do, every image's Asc leans to A, the mix's included). So ``S > 0``
    means the neutral images sit closer to A than a balanced A/B mix does, and the
    permutation test asks whether the neutral images' Asc values could be a draw from the
    mix's. Returns the neutral images' Asc values (for distributions) and the result.
    """
    asc_neutral = association_scores(neutral, attribute_a, attribute_b)
    asc_a, asc_b = self_association_scores(attribute_a, attribute_b)
    mix = np.concatenate([asc_a, asc_b])
    result = association_result(asc_neutral, mix, permutations=permutations, seed=seed, spread=spread)
    return asc_neutral, result
