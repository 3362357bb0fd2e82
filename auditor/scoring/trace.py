"""Prompt-to-image tracing scores, from what a trace record holds (Wu et al., J. Imaging 2025).

The study measures (traces, images, embeddings, detections, masks) and writes per-pair
similarities and per-image objects into the record; the functions here turn them into
the record's scores with the pure metrics of :mod:`auditor.metrics.trace` and
:mod:`auditor.metrics.dependency_groups`:

* per measure (text encoder EOS and token mean, z₀, SSIM, each image embedder, object
  co-occurrence), the paired comparison of s(n,f) and s(n,m) with a bootstrap interval
  over triplets, a swap test Holm-adjusted over the stages, and a sign test (:func:`stage_rows`);
* per prompt set, C(o, P) of objects and, apart, of human words; the bias score of
  every object and the ranking of those reaching ``min_count``, each ranked object's swap
  test Holm-adjusted over its ranking (:func:`with_intervals`);
* χ² tests of the object x prompt-set tables (the triplet, then each pair), for all
  objects and within each dependency group, with Holm-adjusted p-values over every test
  that ran (:func:`chi_square_results`);
* the dependency groups' counts, presence and rankings (:func:`group_summaries`).

:func:`score_trace` fills all of these in, so a record can be rescored without models.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from auditor.core.errors import AuditorError
from auditor.metrics.contingency import chi_square_tests
from auditor.metrics.dependency_groups import GROUPS, DetectedObject, Group, attention_mask, dependency_groups
from auditor.metrics.multiple_testing import holm
from auditor.metrics.trace import (
    bias_ranking,
    bias_score,
    bias_score_intervals,
    bias_score_swap_p,
    co_occurrence,
    compare_closeness,
    count_cosine,
    paired_cosines,
    significance,
    ssim,
)
from auditor.records import (
    TRIPLET_SETS,
    ChiSquareResult,
    GroupAssignment,
    GroupSummary,
    ImageObjects,
    Interval,
    ObjectCount,
    PairSimilarity,
    StageSimilarity,
    TracedDetection,
    TraceRecord,
    TraceScoringSettings,
    TripletSet,
)

#: Measure keys of the pairs, besides one ``image_embedding_<i>`` per image embedder.
PROMPT_EOS, PROMPT_MEAN, LATENT, SSIM, OBJECTS = "prompt_eos", "prompt_mean", "denoising_z0", "image_ssim", "objects"
#: Sets in the order the χ² tests and tables name them.
Tables = dict[TripletSet, dict[str, int]]


def embedding_key(index: int) -> str:
    """Measure key of the ``index``-th image embedder."""
    return f"image_embedding_{index}"


# --------------------------------------------------------------------------- per image


def image_objects(index: int, vocabulary_objects: Sequence[str], vocabulary_humans: Sequence[str]) -> ImageObjects:
    """An image's objects from its VQA vocabulary alone: each noun counts once."""
    return ImageObjects(
        image_index=index,
        objects=list(vocabulary_objects),
        humans=list(vocabulary_humans),
        counts={name: 1 for name in vocabulary_objects},
        human_counts={name: 1 for name in vocabulary_humans},
    )


def with_detections(image: ImageObjects, detections: Iterable[tuple[str, float, Sequence[float]]]) -> ImageObjects:
    """The image's objects as the detector found them: cnt(o, p) = its boxes of o; human words apart."""
    humans = set(image.humans)
    found = [
        TracedDetection(label=label, score=score, box=list(box), human=label in humans)
        for label, score, box in detections
    ]
    counts = Counter(d.label for d in found if not d.human)
    human_counts = Counter(d.label for d in found if d.human)
    return image.model_copy(
        update={
            "detections": found,
            "counts": dict(sorted(counts.items())),
            "human_counts": dict(sorted(human_counts.items())),
        }
    )


def with_groups(
    image: ImageObjects,
    nouns: Sequence[str],
    human_nouns: Collection[str],
    regions: Sequence[np.ndarray],
    word_maps: Sequence[tuple[str, np.ndarray]],
    settings: TraceScoringSettings,
) -> ImageObjects:
    """The image's detections sorted into the five dependency groups (§6.2).

    ``regions[k]`` is detection k's region m_o (its SAM mask, or its box); a region without
    pixels has no coverage and the detection is left out (counted). ``word_maps`` are the
    traced words' attention maps in [0, 1], thresholded here at θ.
    """
    detections = image.detections or []
    if len(regions) != len(detections):
        raise AuditorError(f"{len(regions)} regions for {len(detections)} detections")
    kept = [DetectedObject(d.label, region) for d, region in zip(detections, regions) if region.any()]
    masks = [(word, attention_mask(heatmap, settings.attention_threshold)) for word, heatmap in word_maps]
    found = dependency_groups(
        nouns,
        kept,
        masks,
        human_words=settings.sigma_words,
        sigma_human=settings.sigma_human,
        sigma_other=settings.sigma_other,
    )
    human_labels = {d.label for d in detections if d.human}
    groups = [
        GroupAssignment(
            name=item.name,
            group=item.group,
            human=item.name in human_labels,
            guided_by=item.guided_by,
            coverage=item.coverage,
            sigma=item.sigma,
        )
        for item in found.objects
    ]
    humans = set(human_nouns)
    return image.model_copy(
        update={
            "groups": groups,
            "hidden": [noun for noun in found.hidden if noun not in humans],
            "hidden_humans": [noun for noun in found.hidden if noun in humans],
            "dropped_detections": len(detections) - len(kept),
        }
    )


# --------------------------------------------------------------------------- per pair


@dataclass(frozen=True)
class TracedImage:
    """What one image of a pair contributes: its traces, and its pixels, embeddings and counts when usable."""

    eos: np.ndarray
    mean: np.ndarray
    latent: np.ndarray
    pixels: np.ndarray | None
    """H x W x 3 uint8; None when the safety checker blacked the image out."""
    embeddings: Sequence[np.ndarray | None]
    """One unit vector per image embedder (None: not embedded)."""
    counts: Mapping[str, int] | None
    """cnt(o, p) of its objects; None when it was not looked at."""


def _cosine(first: np.ndarray, second: np.ndarray) -> float | None:
    """The metric's cosine of one pair (:func:`~auditor.metrics.trace.paired_cosines`); None for a zero vector, or
    for NaN or infinite values (a float16 pipeline's failed image): the pair is left out and counted, not fatal."""
    first, second = np.asarray(first), np.asarray(second)
    if not (np.isfinite(first).all() and np.isfinite(second).all()):
        return None
    value = float(paired_cosines(first[None], second[None])[0])
    return None if math.isnan(value) else value


def _pair_values(neutral: TracedImage, other: TracedImage) -> dict[str, float | None]:
    values: dict[str, float | None] = {
        PROMPT_EOS: _cosine(neutral.eos, other.eos),
        PROMPT_MEAN: _cosine(neutral.mean, other.mean),
        LATENT: _cosine(neutral.latent, other.latent),
        SSIM: ssim(neutral.pixels, other.pixels) if neutral.pixels is not None and other.pixels is not None else None,
    }
    for k, (a, b) in enumerate(zip(neutral.embeddings, other.embeddings, strict=True)):
        values[embedding_key(k)] = _cosine(a, b) if a is not None and b is not None else None
    objects = None
    if neutral.counts is not None and other.counts is not None:
        cosine = count_cosine(neutral.counts, other.counts)
        objects = None if math.isnan(cosine) else cosine
    values[OBJECTS] = objects
    return values


def pair_similarity(triplet: int, index: int, images: Mapping[TripletSet, TracedImage]) -> PairSimilarity:
    """s(n,f) and s(n,m) of one triplet at one seed, for every measure (None where undefined)."""
    neutral = images["neutral"]
    return PairSimilarity(
        triplet=triplet,
        image_index=index,
        neutral_feminine=_pair_values(neutral, images["feminine"]),
        neutral_masculine=_pair_values(neutral, images["masculine"]),
    )


# --------------------------------------------------------------------------- per stage


def measures(record: TraceRecord) -> list[tuple[str, str, str, str | None]]:
    """``(key, space, measure, model)`` of every measure of the run, in the paper's order (prompt to image)."""
    rows: list[tuple[str, str, str, str | None]] = [
        (PROMPT_EOS, "prompt", "text encoder output at the EOS token (pooled)", None),
        (PROMPT_MEAN, "prompt", "text encoder output, mean over the prompt's tokens", None),
        (LATENT, "denoising", "final latent z0 before the VAE decode", None),
        (SSIM, "image", "SSIM, mean over pixels", None),
    ]
    rows += [
        (embedding_key(k), "image", f"{ref.backend} image embedding", ref.spec)
        for k, ref in enumerate(record.config.image_embedders)
    ]
    rows.append((OBJECTS, "objects", "object co-occurrence s_O", None))
    return rows


def _values(pairs: Sequence[PairSimilarity], key: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    def number(value: float | None) -> float:
        return math.nan if value is None else value

    nf = np.array([number(p.neutral_feminine.get(key)) for p in pairs], dtype=np.float64)
    nm = np.array([number(p.neutral_masculine.get(key)) for p in pairs], dtype=np.float64)
    return nf, nm, [str(p.triplet) for p in pairs]


def _stage_row(
    key: str,
    space: str,
    measure: str,
    model: str | None,
    pairs: Sequence[PairSimilarity],
    settings: TraceScoringSettings,
) -> StageSimilarity:
    """The paired comparison of s(n,f) and s(n,m) of one measure over the triplets, its side decided on the raw
    swap p: :func:`stage_rows` decides again once the p-values are adjusted over the stages."""
    nf, nm, units = _values(pairs, key)
    usable = np.isfinite(nf) & np.isfinite(nm)
    if not usable.any():
        return StageSimilarity(
            key=key, space=space, measure=measure, model=model, mean_neutral_feminine=None,
            mean_neutral_masculine=None, difference=None, units=0, pairs=0, dropped_pairs=len(pairs),
            masculine_closer=0, feminine_closer=0, ties=0, sign_p=None, closer_to="undecided",
            note="no pair has this similarity (no images, or none with objects)",
        )  # fmt: skip
    result = compare_closeness(
        nf, nm, units, resamples=settings.bootstrap, confidence=settings.ci_level, seed=settings.ci_seed
    )
    ci = None
    if result.interval is not None:
        ci = Interval(low=result.interval[0], high=result.interval[1], method="percentile", defined=1.0)
    return StageSimilarity(
        key=key,
        space=space,
        measure=measure,
        model=model,
        mean_neutral_feminine=result.mean_neutral_feminine,
        mean_neutral_masculine=result.mean_neutral_masculine,
        difference=result.difference,
        ci=ci,
        units=result.units,
        pairs=result.pairs,
        dropped_pairs=result.dropped_pairs,
        masculine_closer=result.masculine_closer,
        feminine_closer=result.feminine_closer,
        ties=result.ties,
        sign_p=result.sign_p,
        swap_p=result.swap_p,
        closer_to=result.closer_to,
        note="one triplet: no interval, so no side is claimed" if result.units == 1 else None,
    )


def stage_rows(record: TraceRecord) -> list[StageSimilarity]:
    """The per-stage table (the paper's Table 5, with s_O of its Table 6 last).

    Every stage asks the same question of the same triplets, so a side is named only where the swap test's p stays
    below the level once Holm-adjusted over the stages that have one (``swap_p_adjusted``)."""
    settings = record.config.scoring
    rows = [
        _stage_row(key, space, measure, model, record.pairs, settings) for key, space, measure, model in measures(record)
    ]
    tested = [i for i, row in enumerate(rows) if row.swap_p is not None]
    for i, adjusted in zip(tested, holm([rows[i].swap_p for i in tested]), strict=True):
        closer = rows[i].closer_to if adjusted < significance(settings.ci_level) else "undecided"
        rows[i] = rows[i].model_copy(update={"swap_p_adjusted": adjusted, "closer_to": closer})
    return rows


# --------------------------------------------------------------------------- objects


def _set_of(record: TraceRecord) -> dict[str, TripletSet]:
    """Prompt id -> which set of its triplet it is."""
    return {pid: name for triplet in record.triplets for name, pid in triplet.prompt_ids.items()}


def set_sizes(record: TraceRecord) -> dict[TripletSet, int]:
    """|P|: usable images (those looked at) per prompt set."""
    sizes: dict[TripletSet, int] = {name: 0 for name in TRIPLET_SETS}
    for pid, name in _set_of(record).items():
        sizes[name] += len(record.images.get(pid, []))
    return sizes


def _tables(record: TraceRecord, counts_of) -> Tables:
    """C(o, P) per set (:func:`~auditor.metrics.trace.co_occurrence`) of ``counts_of(image)``, a name -> count
    mapping, over the set's images."""
    set_of = _set_of(record)
    return {
        name: co_occurrence(
            counts_of(image) for pid, of in set_of.items() if of == name for image in record.images.get(pid, [])
        )
        for name in TRIPLET_SETS
    }


def _score(masculine: int, feminine: int, sizes: Mapping[TripletSet, int]) -> float | None:
    if sizes["masculine"] <= 0 or sizes["feminine"] <= 0:
        return None
    return bias_score(masculine, feminine, sizes["masculine"], sizes["feminine"])


def count_rows(tables: Tables, sizes: Mapping[TripletSet, int]) -> list[ObjectCount]:
    """One row per name seen in any set, by name, with its bias score."""
    names = sorted({name for table in tables.values() for name in table})
    return [
        ObjectCount(
            name=name,
            neutral=tables["neutral"].get(name, 0),
            feminine=tables["feminine"].get(name, 0),
            masculine=tables["masculine"].get(name, 0),
            bias_score=_score(tables["masculine"].get(name, 0), tables["feminine"].get(name, 0), sizes),
        )
        for name in names
    ]


def ranking(tables: Tables, sizes: Mapping[TripletSet, int], min_count: float) -> list[ObjectCount]:
    """Names whose largest count reaches ``min_count``, most masculine first (BS; ties by name)."""
    if sizes["masculine"] <= 0 or sizes["feminine"] <= 0:
        return []
    ranked = bias_ranking(
        tables["masculine"],
        tables["feminine"],
        n_masculine=sizes["masculine"],
        n_feminine=sizes["feminine"],
        min_count=min_count,
        neutral=tables["neutral"],
    )
    return [
        ObjectCount(
            name=item.name,
            neutral=int(item.neutral or 0),
            feminine=int(item.feminine),
            masculine=int(item.masculine),
            bias_score=item.score,
        )
        for item in ranked
    ]


def with_intervals(
    rows: list[ObjectCount], record: TraceRecord, counts_of: Callable[[ImageObjects], Mapping[str, int]]
) -> list[ObjectCount]:
    """``rows`` with the bootstrap interval and the swap test's p of each bias score, over the triplets, and that p
    Holm-adjusted over the rows that have one: a ranking names a lean for any object whose p is small, so its
    objects are one family."""
    if not rows:
        return rows
    settings = record.config.scoring
    names = [row.name for row in rows]
    column = {name: k for k, name in enumerate(names)}
    units = len(record.triplets)
    counts = {side: np.zeros((units, len(names))) for side in ("masculine", "feminine")}
    sizes = {side: np.zeros(units) for side in ("masculine", "feminine")}
    for t, triplet in enumerate(record.triplets):
        for side in ("masculine", "feminine"):
            images = record.images.get(triplet.prompt_ids[side], [])
            sizes[side][t] = len(images)
            for image in images:
                for name, count in counts_of(image).items():
                    if name in column:
                        counts[side][t, column[name]] += count
    by_unit = (counts["masculine"], counts["feminine"], sizes["masculine"], sizes["feminine"])
    intervals = bias_score_intervals(
        *by_unit, resamples=settings.bootstrap, confidence=settings.ci_level, seed=settings.ci_seed
    )
    p_values, _exact = bias_score_swap_p(*by_unit, resamples=settings.bootstrap, seed=settings.ci_seed)
    tested = [k for k, bounds in enumerate(intervals) if bounds is not None]
    adjusted = dict(zip(tested, holm([float(p_values[k]) for k in tested]), strict=True))
    return [
        row.model_copy(
            update={
                "bias_score_ci": Interval(
                    low=bounds.low, high=bounds.high, method="percentile", defined=bounds.defined
                ),
                "bias_score_p": p,
                "bias_score_p_adjusted": adjusted[k],
            }
        )
        if bounds is not None
        else row
        for k, (row, bounds, p) in enumerate(zip(rows, intervals, p_values, strict=True))
    ]


def chi_square_results(scoped: Sequence[tuple[str, Tables]], settings: TraceScoringSettings) -> list[ChiSquareResult]:
    """χ² of each scope's object x set table: the triplet, then each pair; Holm over every test that ran."""
    results = []
    for scope, tables in scoped:
        for test in chi_square_tests(tables, min_objects=settings.min_objects, min_expected=settings.min_expected):
            results.append(
                ChiSquareResult(
                    scope=scope,
                    sets=list(test.sets),
                    objects=test.objects,
                    statistic=test.statistic,
                    dof=test.dof,
                    p_value=test.p_value,
                    p_adjusted=None,
                    smallest_expected=test.smallest_expected,
                    note=test.note,
                )
            )
    ran = [i for i, result in enumerate(results) if result.p_value is not None]
    for i, adjusted in zip(ran, holm([results[i].p_value for i in ran])):
        results[i] = results[i].model_copy(update={"p_adjusted": adjusted})
    return results


def _group_counts(image: ImageObjects, group: Group, humans: bool) -> Counter[str]:
    counts = Counter(a.name for a in image.groups or [] if a.group == group and a.human == humans)
    if group == "hidden":
        counts.update(image.hidden_humans if humans else image.hidden or [])
    return counts


def group_summaries(
    record: TraceRecord, sizes: Mapping[TripletSet, int]
) -> tuple[list[GroupSummary], list[tuple[str, Tables]]]:
    """Per dependency group: C_g(o, P) of objects and of human words, images with the group, the ranking.

    Also each group's object tables, for its χ² tests.
    """
    settings = record.config.scoring
    summaries, scoped = [], []
    owner = _set_of(record)
    for group in GROUPS:
        objects = _tables(record, lambda image, g=group: _group_counts(image, g, False))
        humans = _tables(record, lambda image, g=group: _group_counts(image, g, True))
        images_with: dict[TripletSet, int] = {name: 0 for name in TRIPLET_SETS}
        for pid, name in owner.items():
            images_with[name] += sum(1 for image in record.images.get(pid, []) if _group_counts(image, group, False))
        by_total = sorted(
            count_rows(objects, sizes), key=lambda row: (-(row.neutral + row.feminine + row.masculine), row.name)
        )
        summaries.append(
            GroupSummary(
                group=group,
                objects=by_total,
                humans=count_rows(humans, sizes),
                images_with=images_with,
                ranking=with_intervals(
                    ranking(objects, sizes, settings.min_count),
                    record,
                    lambda image, g=group: _group_counts(image, g, False),
                ),
            )
        )
        scoped.append((group, objects))
    return summaries, scoped


def score_trace(record: TraceRecord) -> None:
    """Fill the record's scores from its pairs and per-image objects (no models, no files)."""
    settings = record.config.scoring
    record.similarity = stage_rows(record)
    sizes = set_sizes(record)
    record.set_sizes = sizes
    objects = _tables(record, lambda image: image.counts)
    humans = _tables(record, lambda image: image.human_counts)
    record.objects = count_rows(objects, sizes)
    record.humans = count_rows(humans, sizes)
    record.ranking = with_intervals(ranking(objects, sizes, settings.min_count), record, lambda image: image.counts)
    scoped: list[tuple[str, Tables]] = [("objects", objects)]
    grouped = record.config.detector is not None and any(
        image.groups is not None for images in record.images.values() for image in images
    )
    if grouped:
        record.groups, group_tables = group_summaries(record, sizes)
        scoped += group_tables
    else:
        record.groups = None
    record.chi_square = chi_square_results(scoped, settings)
