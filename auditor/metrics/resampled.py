"""TIBET and T2IAT statistics for many bootstrap resamples at once (rows of weights).

Each function takes the ``(rows, seeds)`` weights of :mod:`auditor.metrics.bootstrap`
(how often each seed index is drawn; a row of ones is the data itself) and per-image
arrays, and returns one statistic per row: concept counts and floored frequencies, CAS
with synonym groups, BAV and its relatives, the lean, the embedding similarity and
T2IAT's S and d. Missing values are NaN, by the None rules of :mod:`auditor.metrics.tibet`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from auditor.core.choices import EffectSpread
from auditor.metrics.t2iat import RELATIVE_TOLERANCE, check_same_dimension, unit_rows
from auditor.metrics.tibet import BAV_NOISE, MAD_NOISE, CasNormalization, Gender
from auditor.metrics.ties import same_scores

# --------------------------------------------------------------------------- concepts and CAS


def resampled_counts(weights: np.ndarray, counts: np.ndarray, available: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(concept counts, images used)`` of one prompt set in every resample.

    ``counts`` is (seeds, concepts): each image's concept-word counts, zero rows for the
    seeds the set has no usable image of; ``available`` (seeds,) marks the usable ones.
    An index gather and a sum per resample, done as one matrix product of the weights.
    """
    counts = np.asarray(counts, dtype=np.float64)
    available = np.asarray(available, dtype=bool)
    if counts.shape[0] != weights.shape[1] or available.shape != (weights.shape[1],):
        raise ValueError(
            f"{weights.shape[1]} seed indices, but counts for {counts.shape[0]} and a mask for {available.shape}"
        )
    if (counts[~available] != 0).any():
        raise ValueError("an image that does not count has concept counts")
    # Small integers: float32 products and sums are exact below 2**24 and twice as fast.
    exact = weights.sum(axis=1).max(initial=0.0) * counts.max(initial=0.0) < 2**24
    dtype = np.float32 if exact and (weights == np.round(weights)).all() else np.float64
    resampled = (weights.astype(dtype) @ counts.astype(dtype)).astype(np.float64)
    return resampled, weights @ available.astype(np.float64)


def floored_frequencies(counts: np.ndarray, images: np.ndarray, min_frequency: float) -> np.ndarray:
    """Per-image frequencies ``count / images`` with every entry below ``min_frequency`` set to 0.

    Exactly :func:`auditor.scoring.concepts.histogram` per resample: the floor is applied
    to the frequencies of *that* resample, before any normalisation, so a word seen once
    in the data can pass the floor in a resample that draws its image twice, and a set
    without images in a resample has no concepts there.
    """
    images = np.asarray(images, dtype=np.float64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        frequency = counts / images
    kept = (counts > 0) & (images > 0) & (frequency >= min_frequency)
    return np.where(kept, frequency, 0.0)


@dataclass(frozen=True)
class ConceptGroup:
    """Columns of a pair's joint vocabulary that synonym merging joins into one concept.

    ``split`` is None when the members always merge, whichever of them are present (every
    two are linked: the group is a clique). Otherwise merging depends on which members a
    resample has: "male" and "men" are joined only through "man", so without "man" they
    are two concepts. ``split`` then gets the positions (into ``columns``) of the present
    members and returns their partition into merged concepts, as the point estimate's
    merging would on that vocabulary.
    """

    columns: tuple[int, ...]
    split: Callable[[tuple[int, ...]], Sequence[Sequence[int]]] | None = None


def cas_samples(
    p: np.ndarray,
    q: np.ndarray,
    groups: Sequence[ConceptGroup],
    normalization: CasNormalization = "distribution",
    *,
    p_rest: np.ndarray | float = 0.0,
    q_rest: np.ndarray | float = 0.0,
) -> np.ndarray:
    """CAS (:func:`auditor.metrics.tibet.cas`) of one pair in every resample: (rows,), NaN without mass.

    ``p`` and ``q`` are (rows, columns) floored frequencies of the initial and the
    counterfactual set over the same columns (0 = absent), and ``groups`` partition the
    columns into concepts that may merge. ``p_rest``/``q_rest`` are the (rows,) masses of
    concepts that have no counterpart on the other side in any row: they enter the union
    and the normalisation, never the intersection, so passing their total instead of
    their columns keeps the work to the concepts the two sets can share.

    Σ min and Σ max are both summed over merged concepts (not Σ max = total − Σ min), so
    identical histograms give exactly 1, as the point estimate does.
    """
    if normalization not in ("distribution", "frequency"):
        raise ValueError(f"unknown CAS normalisation {normalization!r}: use 'distribution' or 'frequency'")
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    rows = p.shape[0]
    p_rest = np.broadcast_to(np.asarray(p_rest, dtype=np.float64), (rows,))
    q_rest = np.broadcast_to(np.asarray(q_rest, dtype=np.float64), (rows,))
    p_total, q_total = p.sum(axis=1) + p_rest, q.sum(axis=1) + q_rest
    has_mass = (p_total > 0) & (q_total > 0)
    if normalization == "distribution":
        p_scale = np.where(p_total > 0, p_total, 1.0)
        q_scale = np.where(q_total > 0, q_total, 1.0)
    else:
        p_scale = q_scale = np.ones(rows)
    intersection = np.zeros(rows)
    union = p_rest / p_scale + q_rest / q_scale
    single = [group.columns[0] for group in groups if group.split is None and len(group.columns) == 1]
    merged = [group.columns for group in groups if group.split is None and len(group.columns) > 1]
    parts = [(p[:, single], q[:, single])]
    if merged:  # members of a clique always merge: sum them (reduceat over contiguous runs)
        order = np.fromiter((column for columns in merged for column in columns), dtype=np.intp)
        starts = np.cumsum([0] + [len(columns) for columns in merged[:-1]])
        parts.append((np.add.reduceat(p[:, order], starts, axis=1), np.add.reduceat(q[:, order], starts, axis=1)))
    for p_part, q_part in parts:
        p_part, q_part = p_part / p_scale[:, None], q_part / q_scale[:, None]
        intersection += np.minimum(p_part, q_part).sum(axis=1)
        union += np.maximum(p_part, q_part).sum(axis=1)
    for group in groups:
        if group.split is not None:
            shared, joined = _split_group_masses(p, q, group, p_scale, q_scale)
            intersection += shared
            union += joined
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(has_mass, intersection / union, np.nan)


def _split_group_masses(
    p: np.ndarray, q: np.ndarray, group: ConceptGroup, p_scale: np.ndarray, q_scale: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Σ min and Σ max over the concepts a non-clique group merges into, per row.

    Rows with the same present members merge the same way, so ``split`` is asked once
    per distinct presence pattern (a handful: the bridging words are usually frequent).
    """
    columns = np.asarray(group.columns, dtype=np.intp)
    p_cols, q_cols = p[:, columns], q[:, columns]
    present = (p_cols > 0) | (q_cols > 0)
    if len(columns) <= 62:  # one int64 code per row: a 1-D unique instead of sorting rows
        codes = present.astype(np.int64) @ (np.int64(1) << np.arange(len(columns), dtype=np.int64))
        _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
        patterns = present[first]
    else:
        patterns, inverse = np.unique(present, axis=0, return_inverse=True)
    labels = np.full(patterns.shape, -1, dtype=np.intp)
    for row, pattern in enumerate(patterns):
        for label, members in enumerate(group.split(tuple(np.flatnonzero(pattern).tolist()))):
            labels[row, list(members)] = label
    labels = labels[inverse.ravel()]
    shared, joined = np.zeros(p.shape[0]), np.zeros(p.shape[0])
    for label in range(len(columns)):
        member = labels == label
        p_mass = np.where(member, p_cols, 0.0).sum(axis=1) / p_scale
        q_mass = np.where(member, q_cols, 0.0).sum(axis=1) / q_scale
        shared += np.minimum(p_mass, q_mass)
        joined += np.maximum(p_mass, q_mass)
    return shared, joined


# --------------------------------------------------------------------------- BAV and its relatives


def bav_samples(cas: np.ndarray) -> np.ndarray:
    """Population variance (ddof=0) of each row's non-NaN CAS values, 0 at or below
    :data:`~auditor.metrics.tibet.BAV_NOISE`; NaN with fewer than two (:func:`tibet.bav`)."""
    cas = np.asarray(cas, dtype=np.float64)
    known = ~np.isnan(cas)
    count = known.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(known, cas, 0.0).sum(axis=1) / count
        variance = np.where(known, (cas - mean[:, None]) ** 2, 0.0).sum(axis=1) / count
    return np.where(count >= 2, np.where(variance <= BAV_NOISE, 0.0, variance), np.nan)


def bav_mad_samples(cas: np.ndarray) -> np.ndarray:
    """The authors' normalised √(mean |x − mean x|) of x = CAS / Σ CAS per row (:func:`tibet.bav_mad`).

    NaN with fewer than two CAS values, 0 when they sum to 0 or their shares' spread is at
    most :data:`~auditor.metrics.tibet.MAD_NOISE` (float noise: CAS summed in another order
    than the point estimate's may differ in the last bit, and the root would make that ~1e-8).
    """
    cas = np.asarray(cas, dtype=np.float64)
    known = ~np.isnan(cas)
    count = known.sum(axis=1)
    values = np.where(known, cas, 0.0)
    total = values.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = values / total[:, None]
        mean = np.where(known, share, 0.0).sum(axis=1) / count
        deviation = np.where(known, np.abs(share - mean[:, None]), 0.0).sum(axis=1) / count
        one_hot = 2.0 * (count - 1) / count**2  # mean |x - 1/n| of (1, 0, ..., 0)
        result = np.sqrt(deviation / one_hot)
    result = np.where((total == 0) | (deviation <= MAD_NOISE), 0.0, result)
    return np.where(count >= 2, result, np.nan)


def relative_bav_samples(bavs: np.ndarray) -> np.ndarray:
    """Each axis's BAV over the row's largest (:func:`tibet.relative_bav`); rows = resamples, columns = axes."""
    bavs = np.asarray(bavs, dtype=np.float64)
    largest = np.where(np.isnan(bavs), -np.inf, bavs).max(axis=1, initial=-np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(largest[:, None] > 0, bavs / largest[:, None], 0.0)
    return np.where(np.isnan(bavs), np.nan, relative)


def lean_samples(cas: np.ndarray, genders: Sequence[Gender | None]) -> np.ndarray:
    """CAS(male) − CAS(female) per row (:func:`tibet.occupation_lean`), ``genders`` from the prompts.

    As in the point estimate, only counterfactuals with a CAS count, and the lean needs
    exactly one male and one female among them (so it may exist in some rows only).
    """
    cas = np.asarray(cas, dtype=np.float64)
    if cas.shape[1] != len(genders):
        raise ValueError(f"{len(genders)} counterfactuals but {cas.shape[1]} CAS columns")
    known = ~np.isnan(cas)
    male = known & np.array([gender == "male" for gender in genders], dtype=bool)
    female = known & np.array([gender == "female" for gender in genders], dtype=bool)
    difference = np.where(male, cas, 0.0).sum(axis=1) - np.where(female, cas, 0.0).sum(axis=1)
    return np.where((male.sum(axis=1) == 1) & (female.sum(axis=1) == 1), difference, np.nan)


def first_rank_shares(bavs: np.ndarray) -> np.ndarray:
    """Per axis (column), the share of rows in which its BAV alone is the largest.

    A row where axes tie for the largest (every BAV 0, say, or BAVs equal but for float noise:
    :mod:`~auditor.metrics.ties`) credits none of them: each is not shown to lean
    most there, and a share split between them would say "largest in half the resamples" of an axis that
    never is. Rows where no axis has a BAV credit none either. This is "how sure is it that this axis leans
    most"; what the shares leave of 1 is the rows with a tie or without a BAV.
    """
    bavs = np.asarray(bavs, dtype=np.float64)
    if not bavs.shape[0]:
        return np.zeros(bavs.shape[1])
    filled = np.where(np.isnan(bavs), -np.inf, bavs)
    first = same_scores(filled, filled.max(axis=1, keepdims=True)) & ~np.isnan(bavs)
    alone = first & (first.sum(axis=1, keepdims=True) == 1)
    return alone.mean(axis=0)


# --------------------------------------------------------------------------- embeddings and T2IAT


@dataclass(frozen=True)
class _SeedPairs:
    """Every target's cosines with a member set in every resample, the pairs of the target's own seed apart.

    Image *i* of every prompt set comes from seed *i*, so a target and the members of its seed share their
    starting noise and are more alike than the other pairs. The design pairs each target with each member
    once, so those pairs have their share of the pairs. A resample that paired every draw with every draw
    would give them more: a seed drawn c times would pair its images c² times, c of them as the design pairs
    them and the rest where two draws of the seed stand for two seeds (about 2/n of the weight instead of
    1/n). These sums are what a mean that keeps the design's share needs (:func:`mean_cosine_samples`,
    :func:`_seed_kept_means`).
    """

    #: (rows, members) how often each member is drawn.
    weights: np.ndarray
    #: (members, targets) the cosine where member and target share a seed, else 0.
    same_cosines: np.ndarray
    #: (targets,) members of the target's seed.
    same_counts: np.ndarray
    #: (rows, targets) Σ_m w_m cos(m, t) over every member, and over the target's seed's members alone.
    everything: np.ndarray
    same_drawn: np.ndarray
    #: (rows, targets) Σ_m w_m over the target's seed's members.
    same_weight: np.ndarray


def _seed_pairs(
    members: np.ndarray, weights: np.ndarray, member_seeds: np.ndarray, targets: np.ndarray, target_seeds: np.ndarray
) -> _SeedPairs:
    """:class:`_SeedPairs` of unit-row ``members`` (drawn by ``weights``: rows x members) against unit-row ``targets``.

    Through the (members, targets) Gram matrix rather than (rows, dim) mean embeddings: the work per
    resample is then members x targets, whatever the embedding dimension.
    """
    weights = _weights(weights, members)
    cosines = members @ targets.T
    same = np.asarray(member_seeds)[:, None] == np.asarray(target_seeds)[None, :]
    same_cosines = np.where(same, cosines, 0.0)
    return _SeedPairs(
        weights=weights,
        same_cosines=same_cosines,
        same_counts=same.sum(axis=0),
        everything=weights @ cosines,
        same_drawn=weights @ same_cosines,
        same_weight=weights @ same,
    )


def _seed_kept_means(
    members: np.ndarray,
    weights: np.ndarray,
    member_seeds: np.ndarray,
    targets: np.ndarray,
    target_seeds: np.ndarray,
    *,
    same_seed_pairs: bool = True,
) -> np.ndarray:
    """(rows, targets): each target's mean cosine with the resampled members, the same-seed pairs at the design's share.

    Asc of an image is such a mean (T2IAT Eq. 2), and the members include the images of its seed. Each draw
    of the target meets each member of its seed once, as in the design, and the members of other seeds by
    their draws, rescaled to the design's count of them; a resample that drew only the target's seed has no
    other-seed member and no value (NaN) where the design has some. ``same_seed_pairs=False`` is for a set
    scored against itself with the target left out (leave-one-out): there the target's seed's one member is
    the target, so the design has no same-seed pair, and a seed drawn c times must not leave c − 1 copies of
    the target (cosine 1) among the others either.

    Written as the plain weighted sum plus two corrections that are exactly 0 where every weight is 1, so
    the identity row is the plain mean bit for bit: the point estimate does not move.
    """
    pairs = _seed_pairs(members, weights, member_seeds, targets, target_seeds)
    others = len(members) - pairs.same_counts  # the design's members of other seeds, per target
    drawn_others = pairs.weights.sum(axis=1)[:, None] - pairs.same_weight
    # the same-seed cosines as the design counts them (once, or not at all) minus as the resample does
    same_seed = (float(same_seed_pairs) - pairs.weights) @ pairs.same_cosines
    with np.errstate(divide="ignore", invalid="ignore"):
        # rescales the drawn other-seed pairs to the design's count: (others / drawn_others) − 1
        stretch = np.where(drawn_others > 0, (others - drawn_others) / drawn_others, np.nan)
        stretch = np.where(others > 0, stretch, -1.0)
        total = pairs.everything + same_seed + stretch * (pairs.everything - pairs.same_drawn)
        return total / (others + (pairs.same_counts if same_seed_pairs else 0))


def mean_cosine_samples(
    u: np.ndarray, u_weights: np.ndarray, u_seeds: np.ndarray, v: np.ndarray, v_weights: np.ndarray, v_seeds: np.ndarray
) -> np.ndarray:
    """:func:`auditor.metrics.t2iat.mean_cosine` of two image sets in every resample (weights: rows x images;
    seeds: each image's seed index).

    The mean over all pairs gives the pairs of one seed their share of the pairs, 1/n of them with n seeds
    in both sets, and each resample keeps that share (:class:`_SeedPairs` says why): the same-seed pairs'
    mean (each pair weighted by its seed's draws) and the mean over pairs of different seeds (weighted by
    both draws), combined in the proportions of the whole data. With every weight 1 that is exactly the mean
    over all pairs; a resample that drew one seed only has no pair of different seeds, and no value (NaN)
    where the sets share seeds and differ in others.
    """
    u, v = unit_rows(u, "first set"), unit_rows(v, "second set")
    check_same_dimension({"first set": u, "second set": v})
    u_weights = _weights(u_weights, u)
    pairs = _seed_pairs(v, v_weights, v_seeds, u, u_seeds)
    with np.errstate(divide="ignore", invalid="ignore"):
        pairs_weight = u_weights.sum(axis=1) * pairs.weights.sum(axis=1)
        everything = (u_weights * pairs.everything).sum(axis=1)
        if not pairs.same_counts.any():
            return everything / pairs_weight
        same_share = pairs.same_counts.sum() / pairs.same_cosines.size
        same_mean = (u_weights @ pairs.same_cosines.sum(axis=0)) / (u_weights @ pairs.same_counts)
        if same_share == 1:
            return same_mean
        doubled = (u_weights * pairs.same_drawn).sum(axis=1)
        doubled_weight = (u_weights * pairs.same_weight).sum(axis=1)
        other_mean = (everything - doubled) / (pairs_weight - doubled_weight)
        return same_share * same_mean + (1 - same_share) * other_mean


def association_samples(
    asc_x: np.ndarray,
    x_weights: np.ndarray,
    asc_y: np.ndarray,
    y_weights: np.ndarray,
    spread: EffectSpread = "pooled",
) -> tuple[np.ndarray, np.ndarray]:
    """``(S, d)`` per resample from per-image Asc values: (rows, images) each, with multiplicities.

    S and Cohen's d exactly as :func:`auditor.metrics.t2iat.differential_association` and
    :func:`~auditor.metrics.t2iat.effect_size` compute them on the resampled images
    (a duplicated image counts as many times as it was drawn): S = weighted mean of X's
    Asc − Y's; d = S / sd (pooled, or combined as ``spread`` says), NaN where fewer than
    three images were drawn or the sd is within :data:`~auditor.metrics.t2iat.RELATIVE_TOLERANCE`
    of the largest |Asc| drawn.
    """
    n_x, n_y = x_weights.sum(axis=1), y_weights.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_x = np.where(x_weights > 0, x_weights * asc_x, 0.0).sum(axis=1) / n_x
        mean_y = np.where(y_weights > 0, y_weights * asc_y, 0.0).sum(axis=1) / n_y
        if spread == "pooled":  # each group around its own mean, over n - 2 degrees of freedom
            centre_x, centre_y, divisor = mean_x, mean_y, n_x + n_y - 2
        else:  # every value around the mean of all of them, over n (the population sd)
            centre_x = centre_y = (mean_x * n_x + mean_y * n_y) / (n_x + n_y)
            divisor = n_x + n_y
        squares = np.where(x_weights > 0, x_weights * (asc_x - centre_x[:, None]) ** 2, 0.0).sum(axis=1)
        squares += np.where(y_weights > 0, y_weights * (asc_y - centre_y[:, None]) ** 2, 0.0).sum(axis=1)
        sd = np.sqrt(squares / divisor)
        scale = np.maximum(
            np.where(x_weights > 0, np.abs(asc_x), 0.0).max(axis=1, initial=0.0),
            np.where(y_weights > 0, np.abs(asc_y), 0.0).max(axis=1, initial=0.0),
        )
        association = np.where((n_x > 0) & (n_y > 0), mean_x - mean_y, np.nan)
        three_or_more = n_x + n_y > 2  # either sd needs three images drawn (the pooled one, a degree of freedom)
        effect = np.where(three_or_more & (sd > RELATIVE_TOLERANCE * scale), association / sd, np.nan)
    return association, effect


def single_concept_association_samples(
    neutral: np.ndarray,
    neutral_weights: np.ndarray,
    neutral_seeds: np.ndarray,
    attribute_a: np.ndarray,
    a_weights: np.ndarray,
    a_seeds: np.ndarray,
    attribute_b: np.ndarray,
    b_weights: np.ndarray,
    b_seeds: np.ndarray,
    spread: EffectSpread = "pooled",
) -> tuple[np.ndarray, np.ndarray]:
    """``(S, d)`` of :func:`auditor.metrics.t2iat.single_concept_association` in every resample (seeds: each
    image's seed index).

    X = the neutral images with ``Asc(x) = mean_a cos(x, a) − mean_b cos(x, b)``; Y = the attribute images
    scored against both sets with themselves left out. Every one of these means keeps the design's share of
    same-seed pairs (:func:`_seed_kept_means`): an initial image and the counterfactuals' images of its seed
    share their noise, and a seed drawn twice would otherwise pair them four times. The leave-one-out leaves
    out the image's seed, so a drawn copy of ``a_j`` does not meet its twin (cosine 1). NaN where a resample
    draws fewer than two seeds of an attribute set (leave-one-out needs another image).
    """
    x = unit_rows(neutral, "targets")
    a = unit_rows(attribute_a, "attribute A")
    b = unit_rows(attribute_b, "attribute B")
    check_same_dimension({"targets": x, "attribute A": a, "attribute B": b})
    sets = {"x": (x, neutral_weights, neutral_seeds), "a": (a, a_weights, a_seeds), "b": (b, b_weights, b_seeds)}

    def mean(members: str, targets: str, same_seed_pairs: bool = True) -> np.ndarray:
        (m, weights, m_seeds), (t, _, t_seeds) = sets[members], sets[targets]
        return _seed_kept_means(m, weights, m_seeds, t, t_seeds, same_seed_pairs=same_seed_pairs)

    asc_x = mean("a", "x") - mean("b", "x")
    asc_a = mean("a", "a", same_seed_pairs=False) - mean("b", "a")
    asc_b = mean("a", "b") - mean("b", "b", same_seed_pairs=False)
    wx, wa, wb = (_weights(weights, rows) for rows, weights, _ in sets.values())
    return association_samples(asc_x, wx, np.hstack([asc_a, asc_b]), np.hstack([wa, wb]), spread)


def association_test_samples(
    groups: Sequence[np.ndarray],
    weights: Sequence[np.ndarray],
    seeds: Sequence[np.ndarray],
    spread: EffectSpread = "pooled",
) -> tuple[np.ndarray, np.ndarray]:
    """``(S, d)`` of :func:`auditor.metrics.t2iat.association_test` in every resample.

    ``groups`` are the six embedding sets G(X), G(Y), G(X^A), G(X^B), G(Y^A), G(Y^B) in that order,
    ``weights`` their (rows, images) multiplicities and ``seeds`` each image's seed index. When image *i*
    of every prompt shares seed *i*, pass weights from one draw of seeds to each (paired); every Asc then
    keeps the design's share of same-seed pairs (:func:`_seed_kept_means`), since an image of X and the
    images of X^A and X^B from its seed share their noise.
    """
    if not len(groups) == len(weights) == len(seeds) == 6:
        raise ValueError("the T2IAT test has six embedding groups: X, Y, XA, XB, YA, YB")
    names = ("X", "Y", "XA", "XB", "YA", "YB")
    units = {name: unit_rows(group, name) for name, group in zip(names, groups)}
    check_same_dimension(units)
    w = {name: _weights(weight, units[name]) for name, weight in zip(names, weights)}
    seed_of = dict(zip(names, seeds))

    def mean(members: str, target: str) -> np.ndarray:
        return _seed_kept_means(units[members], w[members], seed_of[members], units[target], seed_of[target])

    def asc(target: str, a: str, b: str) -> np.ndarray:
        return mean(a, target) - mean(b, target)

    return association_samples(asc("X", "XA", "XB"), w["X"], asc("Y", "YA", "YB"), w["Y"], spread)


def _weights(weights: np.ndarray, rows: np.ndarray) -> np.ndarray:
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 2 or weights.shape[1] != rows.shape[0]:
        raise ValueError(f"weights of shape {weights.shape} do not fit {rows.shape[0]} images")
    return weights
