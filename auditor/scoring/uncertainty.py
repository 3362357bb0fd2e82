"""Intervals on a prompt audit's scores: the paired bootstrap over seeds, from answers to intervals.

Image *i* of every prompt set shares seed *i*, so a resample draws seed indices with
replacement and uses the same draw for the initial set and every counterfactual
(:mod:`auditor.metrics.bootstrap` explains the pairing and how sets with flagged images
take part). Inside each resample everything is recomputed from the images drawn: concept
histograms with their frequency floor, synonym merging, CAS per counterfactual, BAV,
bav_mad and relative BAV per axis, which axis ranks first, the male − female lean, the
top − bottom CAS difference, and with embeddings the similarity and T2IAT S and d.

What makes it fast: each image's answers are tokenised once into a per-image concept count
matrix (:func:`answer_counts`, :func:`tibet_file_counts`), so a resample is a weighted sum
of rows. Synonym merging is prepared once per (initial, counterfactual) pair with the same
:meth:`SynonymIndex.components` the point estimate uses, over the pair's whole vocabulary;
the few groups whose members are not all linked to each other ("male" – "man" – "men",
joined only through "man") are split per resample exactly as merging that resample's
vocabulary would. The identity resample therefore reproduces :func:`score_axes`.

What the intervals say, and what they cannot. They show how much a score moves when the
same prompts are rerun with other seeds *at the same number of images*. CAS itself is a
biased estimate of its large-sample value whenever the two sets share concepts at
similar frequencies (min() of two noisy frequencies runs low); with long-tailed
vocabularies (captions) at 48 images that bias can exceed the interval's width, so the
interval of an absolute CAS may even lie below its own estimate, and no interval covers
the infinite-image CAS. A difference between two counterfactuals of the same initial set
(the lean, top − bottom) carries both biases, and they largely cancel: in simulations with
Zipf-like vocabularies of 5 to 100 concepts, the 95% percentile interval of CAS(a) − CAS(b)
covered the large-sample difference in 97-99% of data sets, while the CAS intervals
covered the large-sample CAS in 76% (5 concepts) down to 0% (30 or more). BAV, a
variance, ignores a bias common to an axis's CAS values as well. So claims should rest
on differences, BAV and the axis ranking, not on an absolute CAS.

The numbers here are plain dataclasses, each estimate beside its interval;
:mod:`auditor.scoring.intervals` writes them into a record's fields (``record_interval``),
where reports read them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from auditor.core.errors import AuditorError
from auditor.metrics import bootstrap, resampled
from auditor.metrics.bootstrap import IntervalMethod
from auditor.metrics.resampled import ConceptGroup
from auditor.metrics.tibet import prompt_gender
from auditor.records import INITIAL_PROMPT_ID, ScoringSettings, counterfactual_id
from auditor.scoring.concepts import SynonymIndex, default_synonym_index
from auditor.scoring.counts import ConceptCounts, SetCounts, SetEmbeddings
from auditor.scoring.tibet import AxisSpec

# --------------------------------------------------------------------------- statistics per resample


#: Fewest seeds an interval can rest on. A resample of n seeds draws one seed n times with chance n^(1-n): 1 in 2
#: at 2 seeds, 1 in 9 at 3, 1 in 64 at 4. Below 4 that is more than the 2.5% tail of a 95% interval, so the ends
#: would be single seeds' values (with no bias at all, 2 images per set claimed a difference about 1 run in 5).
MIN_SEEDS = 4


def too_few_seeds(seeds: int, seeded: bool = True) -> str:
    """Why ``seeds`` images per prompt set (fewer than :data:`MIN_SEEDS`) get no interval, for the warnings and
    reports (``seeded``: whether a seed made each image, else the resamples are of image positions)."""
    unit = "seed" if seeded else "image"
    if seeds <= 1:
        return f"one image per prompt set: no other {unit} to resample"
    return (
        f"{seeds} images per prompt set, fewer than the {MIN_SEEDS} an interval needs: a resample draws one {unit} "
        f"alone 1 time in {seeds ** (seeds - 1)}"
    )


def no_interval_reason(bootstrap: int, seeds: int, seeded: bool = True) -> str | None:
    """Why a run with these settings has no intervals (None when it gets them): ``--bootstrap 0`` asked for none, or
    :func:`too_few_seeds` images per prompt set. One wording for every report that says so."""
    if bootstrap == 0:
        return "--bootstrap 0"
    if seeds < MIN_SEEDS:
        return too_few_seeds(seeds, seeded)
    return None


def check_resamplable(seeds: int) -> None:
    """Refuse a bootstrap over fewer than :data:`MIN_SEEDS` seeds (callers skip the intervals and say why)."""
    if seeds < MIN_SEEDS:
        raise AuditorError(f"a bootstrap interval needs at least {MIN_SEEDS} seeds (images per prompt set), got {seeds}")


@dataclass(frozen=True)
class BootstrapSettings:
    """How the intervals are made; every field changes the numbers, so records keep them all."""

    #: Resamples B (the CLI's ``--bootstrap N``; 0 there means "no intervals", so no call here).
    resamples: int = 1000
    level: float = 0.95
    method: IntervalMethod = "percentile"
    #: Seed of the resampling generator (``--ci-seed``): the same seed gives the same intervals.
    seed: int = 0

    def __post_init__(self) -> None:
        if self.resamples < 1:
            raise AuditorError(f"the bootstrap needs at least one resample, got {self.resamples}")
        if not 0 < self.level < 1:
            raise AuditorError(f"the confidence level must lie strictly between 0 and 1, got {self.level}")
        if self.method not in ("percentile", "bca"):
            raise AuditorError(f"unknown interval method {self.method!r}: use 'percentile' or 'bca'")


def seed_weights(seeds: int, boot: BootstrapSettings) -> np.ndarray:
    """The rows every statistic is computed on, as weights over the seed indices: the identity (the point
    estimate), the B paired resamples, then for BCa one leave-one-seed-out row per seed."""
    check_resamplable(seeds)
    blocks = [np.ones((1, seeds)), bootstrap.resample_weights(seeds, boot.resamples, boot.seed)]
    if boot.method == "bca":
        blocks.append(bootstrap.jackknife_weights(seeds))
    return np.vstack(blocks)


@dataclass(frozen=True)
class TibetSamples:
    """Every statistic in every row of a weight matrix (row = resample; NaN = undefined there)."""

    #: Counterfactual prompt ids, axis by axis in plan order: the columns of ``cas`` and ``similarity``.
    counterfactual_ids: list[str]
    #: (rows, counterfactuals)
    cas: np.ndarray
    #: (rows, axes) each
    bav: np.ndarray
    bav_mad: np.ndarray
    relative_bav: np.ndarray
    lean: np.ndarray
    #: (rows, counterfactuals); None without embeddings.
    similarity: np.ndarray | None
    #: (rows, axes), NaN for axes without the test; None without embeddings.
    association: np.ndarray | None
    effect_size: np.ndarray | None


@dataclass(frozen=True)
class _Pair:
    """How one (initial, counterfactual) pair is compared, prepared once for every resample."""

    p_columns: np.ndarray  # joint column -> initial vocabulary position, -1 where the initial set lacks it
    q_columns: np.ndarray  # joint column -> counterfactual vocabulary position, -1 likewise
    groups: list[ConceptGroup]
    p_rest: np.ndarray  # (initial vocabulary,) 1.0 for words that can have no counterpart
    q_rest: np.ndarray


def _prepare_pair(initial: SetCounts, other: SetCounts, synonyms: SynonymIndex, cliques: dict[tuple, bool]) -> _Pair:
    """Synonym groups of the pair's joint vocabulary that both sets have a member of.

    Only those can share mass; every other word only adds to the union (``p_rest``).
    ``cliques`` remembers which groups are cliques across the pairs of a prompt (most
    groups recur: the initial set is in every pair).
    """
    p_position = {word: j for j, word in enumerate(initial.vocabulary)}
    q_position = {word: j for j, word in enumerate(other.vocabulary)}
    joint: list[str] = []
    groups = []
    for members in synonyms.components(p_position.keys() | q_position.keys()):
        if not (any(word in p_position for word in members) and any(word in q_position for word in members)):
            continue
        columns = tuple(range(len(joint), len(joint) + len(members)))
        joint += members
        key = tuple(members)
        if key not in cliques:
            cliques[key] = all(len(synonyms.components(pair)) == 1 for pair in combinations(members, 2))
        groups.append(ConceptGroup(columns=columns, split=None if cliques[key] else _splitter(members, synonyms)))
    shared = set(joint)
    return _Pair(
        p_columns=np.array([p_position.get(word, -1) for word in joint], dtype=np.intp),
        q_columns=np.array([q_position.get(word, -1) for word in joint], dtype=np.intp),
        groups=groups,
        p_rest=np.array([word not in shared for word in initial.vocabulary], dtype=np.float64),
        q_rest=np.array([word not in shared for word in other.vocabulary], dtype=np.float64),
    )


def _splitter(members: list[str], synonyms: SynonymIndex) -> Callable[[tuple[int, ...]], list[list[int]]]:
    """``ConceptGroup.split`` for a group: merge the present members as the point estimate would."""

    def split(present: tuple[int, ...]) -> list[list[int]]:
        position = {members[i]: i for i in present}
        return [[position[word] for word in component] for component in synonyms.components(position)]

    return split


def _gather(frequencies: np.ndarray, columns: np.ndarray) -> np.ndarray:
    out = np.zeros((frequencies.shape[0], len(columns)))
    have = columns >= 0
    out[:, have] = frequencies[:, columns[have]]
    return out


def tibet_samples(
    axes: Sequence[AxisSpec],
    counts: ConceptCounts,
    settings: ScoringSettings,
    weights: np.ndarray,
    *,
    synonyms: SynonymIndex | None = None,
    embeddings: Mapping[str, SetEmbeddings] | None = None,
) -> TibetSamples:
    """Every score of :func:`score_axes` (and of the embedding scores) for each row of ``weights``.

    ``weights`` is (rows, seeds): how often each seed index is drawn. A row of ones is
    the data itself, so it gives the point estimate. The CAS normalisation and frequency
    floor come from ``settings``, as for the point estimate.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 2 or weights.shape[1] != counts.seeds:
        raise AuditorError(f"resample weights of shape {weights.shape} do not fit {counts.seeds} seed indices")
    synonyms = synonyms or default_synonym_index()
    ids = [counterfactual_id(name, k) for name, cfs in axes for k in range(len(cfs))]
    for prompt_id in [INITIAL_PROMPT_ID, *ids]:
        if prompt_id not in counts.sets:
            raise AuditorError(f"no answers for prompt set {prompt_id!r}: every prompt set of the plan needs them")

    def frequencies(found: SetCounts) -> np.ndarray:
        counts, images = resampled.resampled_counts(weights, found.counts, found.available)
        return resampled.floored_frequencies(counts, images, settings.min_frequency)

    initial = counts.sets[INITIAL_PROMPT_ID]
    p_all = frequencies(initial)
    cas = np.empty((weights.shape[0], len(ids)))
    cliques: dict[tuple, bool] = {}
    for j, prompt_id in enumerate(ids):
        other = counts.sets[prompt_id]
        pair = _prepare_pair(initial, other, synonyms, cliques)
        q_all = frequencies(other)
        cas[:, j] = resampled.cas_samples(
            _gather(p_all, pair.p_columns),
            _gather(q_all, pair.q_columns),
            pair.groups,
            settings.cas_normalization,
            p_rest=p_all @ pair.p_rest,
            q_rest=q_all @ pair.q_rest,
        )
    slices = _axis_slices(axes)
    bav = np.column_stack([resampled.bav_samples(cas[:, s]) for s in slices])
    similarity = association = effect = None
    if embeddings is not None:
        similarity, association, effect = _embedding_samples(axes, ids, embeddings, weights)
    return TibetSamples(
        counterfactual_ids=ids,
        cas=cas,
        bav=bav,
        bav_mad=np.column_stack([resampled.bav_mad_samples(cas[:, s]) for s in slices]),
        relative_bav=resampled.relative_bav_samples(bav),
        lean=np.column_stack(
            [resampled.lean_samples(cas[:, s], [prompt_gender(cf) for cf in cfs]) for s, (_, cfs) in zip(slices, axes)]
        ),
        similarity=similarity,
        association=association,
        effect_size=effect,
    )


def _axis_slices(axes: Sequence[AxisSpec]) -> list[slice]:
    slices, start = [], 0
    for _, cfs in axes:
        slices.append(slice(start, start + len(cfs)))
        start += len(cfs)
    return slices


def _embedding_samples(
    axes: Sequence[AxisSpec], ids: list[str], embeddings: Mapping[str, SetEmbeddings], weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Similarity per counterfactual, T2IAT (S, d) per two-counterfactual axis: as :func:`embedding_scores` has them."""
    rows = weights.shape[0]

    def of(prompt_id: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The set's vectors, their weights in every row and their seed indices; None without embeddings."""
        found = embeddings.get(prompt_id)
        if found is None or len(found.vectors) == 0:
            return None
        indices = np.asarray(found.image_indices, dtype=np.intp)
        if len(indices) != len(found.vectors) or len(set(indices.tolist())) != len(indices):
            raise AuditorError(f"prompt set {prompt_id!r}: embeddings need one distinct seed index per row")
        if indices.min() < 0 or indices.max() >= weights.shape[1]:
            raise AuditorError(f"prompt set {prompt_id!r}: an embedding's seed index is out of range")
        return found.vectors, weights[:, indices], indices

    similarity = np.full((rows, len(ids)), np.nan)
    association = np.full((rows, len(axes)), np.nan)
    effect = np.full((rows, len(axes)), np.nan)
    initial = of(INITIAL_PROMPT_ID)
    if initial is None:
        return similarity, association, effect
    for j, prompt_id in enumerate(ids):
        other = of(prompt_id)
        if other is not None:
            similarity[:, j] = resampled.mean_cosine_samples(*initial, *other)
    for a, (name, cfs) in enumerate(axes):
        sets = [of(counterfactual_id(name, k)) for k in range(len(cfs))]
        if len(sets) == 2 and all(found is not None and len(found[0]) >= 2 for found in sets):
            association[:, a], effect[:, a] = resampled.single_concept_association_samples(*initial, *sets[0], *sets[1])
    return similarity, association, effect


# --------------------------------------------------------------------------- intervals


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap interval; all None where the data do not define it."""

    estimate: float | None
    low: float | None
    high: float | None
    #: The method actually used: "bca" falls back to "percentile" where BCa degenerates (see ``note``).
    method: IntervalMethod
    #: Share of resamples in which the statistic is defined; the interval is over those.
    defined: float
    #: Why BCa was not used, when it was asked for and could not be.
    note: str | None = None


@dataclass(frozen=True)
class Difference:
    """CAS(first) − CAS(second) of two counterfactuals of an axis, from the same resamples."""

    first: str
    second: str
    interval: Interval


@dataclass(frozen=True)
class CounterfactualIntervals:
    prompt_id: str
    prompt: str
    cas: Interval
    #: None without embeddings of both sets.
    embedding_similarity: Interval | None


@dataclass(frozen=True)
class AxisIntervals:
    axis: str
    counterfactuals: list[CounterfactualIntervals]
    bav: Interval
    bav_mad: Interval
    relative_bav: Interval
    #: Share of resamples in which this axis alone has the largest BAV (a tie credits none): how sure "leans
    #: most" is. None for a run of one axis, which leans most of one in every resample: no ranking.
    ranks_first: float | None
    #: CAS(male) − CAS(female); None when the prompts do not name exactly one male and one female
    #: counterfactual and the point estimate has no lean either.
    lean: Interval | None
    #: CAS(top) − CAS(bottom) of the counterfactuals with the highest and lowest CAS in the point
    #: estimate; None with fewer than two CAS values. Chosen on the same data, so the interval
    #: shows the resampling noise of this pair, not the selection (a top-minus-bottom tends high).
    spread: Difference | None
    #: T2IAT S and Cohen's d of a two-counterfactual axis; None without embeddings or another axis size.
    association: Interval | None
    effect_size: Interval | None


@dataclass(frozen=True)
class ScoreIntervals:
    """Intervals on every score of a prompt audit, and the settings that made them."""

    settings: BootstrapSettings
    #: Seed indices resampled (images generated per set).
    seeds: int
    axes: list[AxisIntervals]


def score_intervals(
    axes: Sequence[AxisSpec],
    counts: ConceptCounts,
    settings: ScoringSettings,
    bootstrap_settings: BootstrapSettings | None = None,
    *,
    synonyms: SynonymIndex | None = None,
    embeddings: Mapping[str, SetEmbeddings] | None = None,
) -> ScoreIntervals:
    """Paired-bootstrap intervals for the scores :func:`score_axes` gives on the same answers.

    One pass computes the identity row (the point estimates), the B resamples and, for
    BCa, one leave-one-seed-out row per seed index.
    """
    boot = bootstrap_settings or BootstrapSettings()
    weights = seed_weights(counts.seeds, boot)
    samples = tibet_samples(axes, counts, settings, weights, synonyms=synonyms, embeddings=embeddings)
    end = 1 + boot.resamples

    def bounds(matrix: np.ndarray) -> bootstrap.Bounds:
        jackknife = matrix[end:] if boot.method == "bca" else None
        return bootstrap.intervals(matrix[0], matrix[1:end], level=boot.level, method=boot.method, jackknife=jackknife)

    cas = samples.cas
    cas_bounds = bounds(cas)
    by_axis = {name: bounds(getattr(samples, name)) for name in ("bav", "bav_mad", "relative_bav", "lean")}
    ranks = resampled.first_rank_shares(samples.bav[1:end])
    similarity = None if samples.similarity is None else bounds(samples.similarity)
    association = None if samples.association is None else bounds(samples.association)
    effect = None if samples.effect_size is None else bounds(samples.effect_size)
    result = []
    for a, (span, (name, cfs)) in enumerate(zip(_axis_slices(axes), axes)):
        columns = range(span.start, span.stop)
        counterfactuals = [
            CounterfactualIntervals(
                prompt_id=samples.counterfactual_ids[j],
                prompt=prompt,
                cas=interval_at(cas_bounds, cas[0], j),
                embedding_similarity=None
                if similarity is None or np.isnan(samples.similarity[0, j])
                else interval_at(similarity, samples.similarity[0], j),
            )
            for j, prompt in zip(columns, cfs)
        ]
        genders = [prompt_gender(cf) for cf in cfs]
        has_lean = (genders.count("male") == 1 and genders.count("female") == 1) or not np.isnan(samples.lean[0, a])
        has_test = association is not None and not np.isnan(samples.association[:, a]).all()
        result.append(
            AxisIntervals(
                axis=name,
                counterfactuals=counterfactuals,
                bav=interval_at(by_axis["bav"], samples.bav[0], a),
                bav_mad=interval_at(by_axis["bav_mad"], samples.bav_mad[0], a),
                relative_bav=interval_at(by_axis["relative_bav"], samples.relative_bav[0], a),
                ranks_first=float(ranks[a]) if len(axes) > 1 else None,
                lean=interval_at(by_axis["lean"], samples.lean[0], a) if has_lean else None,
                spread=_spread(cas, list(columns), samples.counterfactual_ids, bounds),
                association=interval_at(association, samples.association[0], a) if has_test else None,
                effect_size=interval_at(effect, samples.effect_size[0], a) if has_test else None,
            )
        )
    return ScoreIntervals(settings=boot, seeds=counts.seeds, axes=result)


@dataclass(frozen=True)
class DifferenceTest:
    """CAS(first) − CAS(second) tested one-sided for "it is above 0"."""

    #: The difference and its (two-sided) interval.
    interval: Interval
    #: One-sided bootstrap p-value; None where no resample defines the difference.
    p_value: float | None
    #: The one-sided ``1 − alpha`` lower bound the test inverts, so it lies above 0 wherever ``p_value`` is below
    #: ``alpha``. A report shows it beside a claim the two-sided interval, at the same level, may not support. None
    #: where no resample defines the difference.
    lower_bound: float | None
    #: How the p-value and lower bound were found: "bca" (BCa's correction of the resamples' quantiles) or
    #: "percentile" (the quantiles themselves: asked for, or where BCa is not defined for this test).
    method: IntervalMethod = "percentile"


def difference_test(
    axes: Sequence[AxisSpec],
    counts: ConceptCounts,
    settings: ScoringSettings,
    first: str,
    second: str,
    bootstrap_settings: BootstrapSettings | None = None,
    *,
    alpha: float = 0.05,
) -> DifferenceTest:
    """CAS(first) − CAS(second) with its interval, the one-sided p-value of "it is above 0" and the lower bound at
    level ``1 − alpha`` that goes with it.

    ``first`` and ``second`` are counterfactual ids chosen *before* these images were made (an
    exploration picks them on its own seeds and tests them on fresh ones), so the p-value is
    not bent by the choice. It comes from the same paired resamples as the interval, by the
    interval's method: the resamples' share at or below 0 (:func:`auditor.metrics.bootstrap.p_value_above`), or
    with BCa that share corrected as BCa corrects the interval's quantiles
    (:func:`auditor.metrics.bootstrap.bca_p_value_above`), so test and interval never disagree on method.
    """
    boot = bootstrap_settings or BootstrapSettings()
    samples = tibet_samples(axes, counts, settings, seed_weights(counts.seeds, boot))
    ids = samples.counterfactual_ids
    for prompt_id in (first, second):
        if prompt_id not in ids:
            raise AuditorError(f"no counterfactual {prompt_id!r} among {', '.join(ids)}")
    difference = (samples.cas[:, ids.index(first)] - samples.cas[:, ids.index(second)])[:, None]
    end = 1 + boot.resamples
    estimate, resamples = difference[0], difference[1:end]
    jackknife = difference[end:] if boot.method == "bca" else None
    found = bootstrap.intervals(estimate, resamples, level=boot.level, method=boot.method, jackknife=jackknife)
    p = float(bootstrap.p_value_above(resamples)[0])
    lower = float(bootstrap.quantiles(resamples, alpha)[0])
    method: IntervalMethod = "percentile"
    if jackknife is not None:
        bca_p, p_note = bootstrap.bca_p_value_above(estimate, resamples, jackknife)
        bca_lower, lower_note = bootstrap.bca_quantile(estimate, resamples, jackknife, alpha)
        if p_note[0] is None and lower_note[0] is None:
            p, lower, method = float(bca_p[0]), float(bca_lower[0]), "bca"
    return DifferenceTest(
        interval=interval_at(found, estimate, 0),
        p_value=None if np.isnan(p) else p,
        lower_bound=None if np.isnan(lower) else lower,
        method=method,
    )


def _spread(
    cas: np.ndarray, columns: list[int], ids: list[str], bounds: Callable[[np.ndarray], bootstrap.Bounds]
) -> Difference | None:
    """The top − bottom CAS difference of one axis, the pair picked on the point estimate."""
    known = [j for j in columns if not np.isnan(cas[0, j])]
    if len(known) < 2:
        return None
    ranked = sorted(known, key=lambda j: (-cas[0, j], j))
    top, bottom = ranked[0], ranked[-1]
    difference = cas[:, top] - cas[:, bottom]
    return Difference(
        first=ids[top], second=ids[bottom], interval=interval_at(bounds(difference[:, None]), difference[:1], 0)
    )


def interval_at(bounds: bootstrap.Bounds, estimate: np.ndarray, j: int) -> Interval:
    """Statistic ``j`` of ``bounds`` with its point estimate, NaN read as None (undefined on the data)."""

    def value(x: float) -> float | None:
        return None if np.isnan(x) else float(x)

    return Interval(
        estimate=value(estimate[j]),
        low=value(bounds.low[j]),
        high=value(bounds.high[j]),
        method=bounds.method[j],
        defined=float(bounds.defined[j]),
        note=bounds.note[j],
    )
