"""Every score of a prompt audit with its uncertainty: bootstrap intervals and adjusted p-values.

The point estimates come from :mod:`auditor.scoring.tibet` and
:mod:`auditor.scoring.embeddings`; this module adds, from the same stored answers (and
embeddings, when the audit has them), the paired-bootstrap intervals of
:mod:`auditor.scoring.uncertainty`, and adjusts the axes' T2IAT p-values for testing
several axes at once (Holm). The live audit and ``auditor score`` both go through
:func:`score_run` (or :func:`score_tibet_file` for the authors' result files), so a
rescore with the same settings gives the recorded numbers and intervals back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from auditor.metrics.multiple_testing import holm
from auditor.records import (
    AxisScore,
    Difference,
    Interval,
    IntervalSettings,
    PromptSet,
    RunRecord,
    Scores,
    ScoringSettings,
    SetConcepts,
)
from auditor.scoring import uncertainty
from auditor.scoring.counts import ConceptCounts, answer_counts, tibet_file_counts, usable_embeddings
from auditor.scoring.embeddings import apply_embedding_scores
from auditor.scoring.tibet import AxisSpec, plan_of, record_concepts, score_audit, score_tibet_result
from auditor.scoring.tibet_files import TibetResult
from auditor.scoring.uncertainty import BootstrapSettings, ScoreIntervals


def too_few_seeds_warning(seeds: int, most: int | None = None) -> str:
    """Why a run (or a TIBET file: ``auditor score`` takes both) scored with resamples asked for has no intervals:
    ``seeds`` images per prompt set or, where sets differ (``most`` images in the largest), in the smallest."""
    why = (
        uncertainty.too_few_seeds(seeds)
        if most in (None, seeds)
        else f"the smallest prompt set has {seeds} image{'' if seeds == 1 else 's'}, fewer than the "
        f"{uncertainty.MIN_SEEDS} an interval needs"
    )
    return (
        f"{why}, so there are no intervals and no difference is claimed "
        f"({uncertainty.MIN_SEEDS} or more images per prompt set get them)"
    )


def bootstrap_settings(settings: ScoringSettings) -> BootstrapSettings | None:
    """The engine's settings from a run's scoring settings; None when intervals are off (``--bootstrap 0``)."""
    if settings.bootstrap == 0:
        return None
    return BootstrapSettings(
        resamples=settings.bootstrap, level=settings.ci_level, method=settings.ci_method, seed=settings.ci_seed
    )


def record_counts(record: RunRecord) -> ConceptCounts:
    """Per-image concept counts of a run's recorded answers (flagged images left out, as in the concepts)."""
    plan = plan_of(record)
    flagged = {s.prompt_id: {image.index for image in s.images if image.flagged_nsfw} for s in record.prompt_sets}
    return answer_counts(
        record.answers,
        [axis.name for axis in plan.axes],
        include_captions=record.config.scoring.include_captions,
        flagged=flagged,
        seeds=record.config.images_per_prompt,
    )


def score_run(
    record: RunRecord,
    settings: ScoringSettings | None = None,
    *,
    concepts: Mapping[str, SetConcepts] | None = None,
    embeddings: Mapping[str, np.ndarray] | None = None,
) -> Scores:
    """Every score of a run from its recorded answers, with its uncertainty.

    ``settings`` default to the run's own; ``concepts`` to those recomputed from the
    answers with them; ``embeddings`` (the embed stage's arrays) add the embedding similarity and
    T2IAT association, which a record alone cannot give (it keeps no embeddings).
    """
    plan = plan_of(record)
    settings = settings or record.config.scoring
    scores = score_audit(plan, concepts if concepts is not None else record_concepts(record, settings), settings)
    if embeddings is not None:
        scores = apply_embedding_scores(scores, plan, embeddings, settings)
    axes = [(axis.name, axis.counterfactuals) for axis in plan.axes]
    return with_uncertainty(
        scores, axes, record_counts(record), settings, prompt_sets=record.prompt_sets, embeddings=embeddings
    )


def score_tibet_file(result: TibetResult, settings: ScoringSettings) -> Scores:
    """Every score of a TIBET result file, with intervals (image i of each set is seed index i)."""
    axes = [(axis.name, axis.counterfactuals) for axis in result.axes]
    scores = score_tibet_result(result, settings)
    fewest = min(len(images) for images in result.image_sets().values())
    return with_uncertainty(scores, axes, tibet_file_counts(result), settings, fewest_images=fewest)


def with_uncertainty(
    scores: Scores,
    axes: Sequence[AxisSpec],
    counts: ConceptCounts,
    settings: ScoringSettings,
    *,
    prompt_sets: Sequence[PromptSet] = (),
    embeddings: Mapping[str, np.ndarray] | None = None,
    fewest_images: int | None = None,
) -> Scores:
    """``scores`` with bootstrap intervals (unless ``settings.bootstrap`` is 0) and Holm-adjusted p-values.

    ``embeddings`` (prompt id -> rows of usable images, as the embed stage gives them) add
    intervals of the embedding similarity and of T2IAT's S and d. ``fewest_images`` is the size of
    the smallest prompt set where sets differ (a TIBET file's may): a set of fewer than
    :data:`~auditor.scoring.uncertainty.MIN_SEEDS` images is one no resample varies enough, so its
    scores, and every comparison with them, get no interval (default: ``counts.seeds``, every set's).
    """
    boot = bootstrap_settings(settings)
    fewest = counts.seeds if fewest_images is None else fewest_images
    if boot is not None and fewest < uncertainty.MIN_SEEDS:
        warning = too_few_seeds_warning(fewest, counts.seeds)
        scores = scores.model_copy(update={"warnings": [*scores.warnings, warning]})
    elif boot is not None:
        sets = usable_embeddings(prompt_sets, embeddings) if embeddings else None
        found = uncertainty.score_intervals(axes, counts, settings, boot, embeddings=sets)
        scores = _with_intervals(scores, found)
    return with_adjusted_p_values(scores, settings.alpha)


def record_interval(found: uncertainty.Interval | None) -> Interval | None:
    """The record's interval of an engine interval (the estimate sits beside it in the record)."""
    if found is None:
        return None
    return Interval(low=found.low, high=found.high, method=found.method, defined=found.defined, note=found.note)


def _with_intervals(scores: Scores, found: ScoreIntervals) -> Scores:
    by_axis = {axis.axis: axis for axis in found.axes}
    axes = [_axis_with_intervals(axis, by_axis[axis.axis]) for axis in scores.axes]
    boot = found.settings
    settings = IntervalSettings(
        resamples=boot.resamples, level=boot.level, method=boot.method, seed=boot.seed, seeds=found.seeds
    )
    return scores.model_copy(update={"axes": axes, "intervals": settings})


def _axis_with_intervals(score: AxisScore, found: uncertainty.AxisIntervals) -> AxisScore:
    by_id = {cf.prompt_id: cf for cf in found.counterfactuals}
    counterfactuals = [
        cf.model_copy(
            update={
                "cas_ci": record_interval(by_id[cf.prompt_id].cas),
                "embedding_similarity_ci": record_interval(by_id[cf.prompt_id].embedding_similarity),
            }
        )
        for cf in score.counterfactuals
    ]
    spread = None
    if found.spread is not None and found.spread.interval.estimate is not None:
        spread = Difference(
            first=found.spread.first,
            second=found.spread.second,
            value=found.spread.interval.estimate,
            ci=record_interval(found.spread.interval),
        )
    association = score.association
    if association is not None:
        association = association.model_copy(
            update={"association_ci": record_interval(found.association), "effect_size_ci": record_interval(found.effect_size)}
        )
    return score.model_copy(
        update={
            "counterfactuals": counterfactuals,
            "bav_ci": record_interval(found.bav),
            "bav_mad_ci": record_interval(found.bav_mad),
            "relative_bav_ci": record_interval(found.relative_bav),
            "lean_ci": record_interval(found.lean),
            "spread": spread,
            "ranks_first": found.ranks_first,
            "association": association,
        }
    )


def with_adjusted_p_values(scores: Scores, alpha: float) -> Scores:
    """Holm across the axes that have a T2IAT association (one test is its own adjustment)."""
    tested = [i for i, axis in enumerate(scores.axes) if axis.association is not None]
    axes = list(scores.axes)
    for i, p in zip(tested, holm([axes[i].association.p_value for i in tested])):
        axes[i] = axes[i].model_copy(update={"association": axes[i].association.model_copy(update={"p_adjusted": p})})
    return scores.model_copy(update={"axes": axes, "correction": "holm" if tested else "none", "alpha": alpha})
