"""Bias-amplification scores as records: image counts, G and T with Wilson intervals, A per occupation, the summaries.

The arithmetic is :mod:`auditor.metrics.amplification`'s; this module only pairs each
occupation's G (per template) with its T (per selection method, and per template for the
nn methods, which rank captions by that template's prompt) and says why a number is
missing. Shared by the study and by ``auditor amplification captions``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from auditor.corpora.selection import NN_METHODS
from auditor.metrics.amplification import (
    amplification,
    amplification_interval,
    flipped,
    percentage,
    summarize_amplification,
)
from auditor.metrics.multiple_testing import holm
from auditor.records import (
    AmplificationSummary,
    GeneratedSide,
    ImageCounts,
    Interval,
    OccupationAmplification,
    Share,
    TBasis,
    TrainingSide,
)


def share(women: int, total: int, level: float) -> Share:
    """``women`` of ``total`` in percent with its Wilson interval (Nones when ``total`` is 0)."""
    found = percentage(women, total, level)
    return Share(women=women, total=total, percent=found.percent, low=found.low, high=found.high)


def _interval(bounds: tuple[float | None, float | None]) -> Interval | None:
    low, high = bounds
    if low is None or high is None:
        return None
    return Interval(low=low, high=high, method="percentile", defined=1.0)


def training_template(method: str, template: int) -> int | None:
    """The template a method's T depends on: the nn methods rank by each template's prompt; the others by none."""
    return template if method in NN_METHODS else None


def amplification_rows(
    generated: Sequence[GeneratedSide],
    training: Sequence[TrainingSide],
    occupations: Sequence[str],
    methods: Sequence[str],
    templates: int,
    *,
    resamples: int,
    seed: int,
    level: float,
) -> list[OccupationAmplification]:
    """A per method, template and occupation (in that order), from the matching G and T."""
    g_of = {(side.occupation, side.template): side for side in generated}
    t_of = {(side.occupation, side.method, side.template): side for side in training}
    rows = []
    for method in methods:
        for template in range(1, templates + 1):
            for occupation in occupations:
                g = g_of[occupation, template]
                t = t_of[occupation, method, training_template(method, template)]
                rows.append(_row(occupation, method, template, g, t, resamples, seed, level))
    return rows


def _row(
    occupation: str,
    method: str,
    template: int,
    generated: GeneratedSide,
    training: TrainingSide,
    resamples: int,
    seed: int,
    level: float,
) -> OccupationAmplification:
    g, t, basis = generated.share, training.share, training.basis
    common = {
        "occupation": occupation,
        "method": method,
        "template": template,
        "generated": g,
        "training": t,
        "basis": basis,
    }
    if g.percent is None or t.percent is None:
        lacking = [
            side
            for side, value in ((_no_g(generated.counts), g), (_no_t(training), t))
            if value.percent is None
        ]
        return OccupationAmplification(**common, amplification=None, flipped=None, note="; ".join(lacking))
    low, high = amplification_interval(
        (g.women, g.total), (t.women, t.total), resamples=resamples, seed=seed, level=level
    )
    return OccupationAmplification(
        **common,
        amplification=amplification(g.percent, t.percent),
        amplification_ci=_interval((low, high)),
        flipped=flipped(g.percent, t.percent),
    )


def _no_g(counts: ImageCounts) -> str:
    """Why the generated side has no G: the face filter kept no image (and why it left each out), or every image
    it kept was between the thresholds: which one a person would change (the images, or --threshold)."""
    if counts.images == 0:
        return "no image was generated"
    if counts.kept == 0:
        left_out = [
            (counts.no_face, "no face"), (counts.many_faces, "more than one face"),
            (counts.small_face, "a face too small"), (counts.flagged_nsfw, "blacked out by the safety checker"),
            (counts.missing, "unreadable"),
        ]  # fmt: skip
        why = ", ".join(f"{count} {reason}" for count, reason in left_out if count)
        made = "the one generated image" if counts.images == 1 else f"the {counts.images} generated images"
        return f"the face filter kept none of {made}" + (f" ({why})" if why else "")
    kept = "the one generated image" if counts.kept == 1 else f"all {counts.kept} generated images"
    return f"{kept} the face filter kept {'was' if counts.kept == 1 else 'were'} ambiguous (between the thresholds)"


def _no_t(training: TrainingSide) -> str:
    """Why a training side has no T: nothing was selected, or nothing selected was labelled or classified."""
    if training.selected == 0:
        return f"no caption of the training sample mentions {training.occupation!r}"
    if training.basis == "caption proxy":
        return "no selected caption is labelled male or female (caption proxy)"
    return "no selected training image was classified man or woman"


def summaries(
    rows: Sequence[OccupationAmplification],
    occupations: Sequence[str],
    methods: Sequence[str],
    templates: int,
    basis: TBasis,
    *,
    exclude_flips: bool,
    resamples: int,
    seed: int,
    level: float,
) -> list[AmplificationSummary]:
    """Mean A per method and template, then per method over every template when there are several.

    An occupation *flips everywhere* when its direction flips on every template where it
    has an A (the paper's eight excluded occupations flip "on all prompts", §3.3); with
    ``exclude_flips`` those are left out of every mean of the method. The average over
    templates averages each occupation's A over the templates first (occupations with an
    A on every template only): with the same occupations on every template that is the
    paper's average of the per-template means, and it keeps the bootstrap and t-test
    over occupations, which are the independent units. Each row's p-value is then
    Holm-adjusted across the methods of its template (or of the average): a report claims
    "method X amplifies" for one method among several, so it pays for asking several.
    """
    by_key = {(row.method, row.template, row.occupation): row for row in rows}
    results = []
    for method in methods:
        per_occupation = {o: [by_key[method, k, o] for k in range(1, templates + 1)] for o in occupations}
        everywhere = [
            o
            for o in occupations
            if any(r.amplification is not None for r in per_occupation[o])
            and all(r.flipped for r in per_occupation[o] if r.amplification is not None)
        ]
        excluded = everywhere if exclude_flips else []
        for template in range(1, templates + 1):
            chosen = {o: per_occupation[o][template - 1] for o in occupations}
            values = {o: r.amplification for o, r in chosen.items() if r.amplification is not None}
            flips_here = [o for o, r in chosen.items() if r.flipped]
            results.append(
                _summary(method, template, basis, values, excluded, flips_here, occupations, resamples, seed, level)
            )
        if templates > 1:
            values = {
                o: float(np.mean([r.amplification for r in per_occupation[o]]))
                for o in occupations
                if all(r.amplification is not None for r in per_occupation[o])
            }
            results.append(
                _summary(method, None, basis, values, excluded, everywhere, occupations, resamples, seed, level)
            )
    return adjust_across_methods(results)


def adjust_across_methods(results: Sequence[AmplificationSummary]) -> list[AmplificationSummary]:
    """Each summary with its p-value Holm-adjusted among the summaries of the same template that have one."""
    adjusted: dict[int, float] = {}
    for template in dict.fromkeys(s.template for s in results):
        tested = [i for i, s in enumerate(results) if s.template == template and s.p_value is not None]
        adjusted |= dict(zip(tested, holm([results[i].p_value for i in tested]), strict=True))
    return [s.model_copy(update={"p_adjusted": adjusted.get(i)}) for i, s in enumerate(results)]


def _summary(
    method: str,
    template: int | None,
    basis: TBasis,
    values: dict[str, float],
    excluded: list[str],
    flips: list[str],
    occupations: Sequence[str],
    resamples: int,
    seed: int,
    level: float,
) -> AmplificationSummary:
    names = list(values)
    found = summarize_amplification(
        [values[o] for o in names],
        [o in excluded for o in names],
        exclude_flips=bool(excluded),
        resamples=resamples,
        seed=seed,
        level=level,
    )
    return AmplificationSummary(
        method=method,
        template=template,
        basis=basis,
        occupations=found.n,
        excluded=[o for o in names if o in excluded],
        flipped=flips,
        missing=[o for o in occupations if o not in values],
        mean=found.mean,
        mean_ci=_interval((found.low, found.high)),
        t_statistic=found.t_statistic,
        p_value=found.p_value,
    )


def image_counts(outcomes: list[tuple[str | None, str | None]]) -> ImageCounts:
    """Counts of (face verdict or no_image / missing / flagged_nsfw, decision) pairs: every outcome the record
    counts, zero when unseen."""
    tally = dict.fromkeys((name for name in ImageCounts.model_fields if name != "images"), 0)
    for face, gender in outcomes:
        tally[face or "missing"] += 1
        if gender is not None:
            tally[gender] += 1
    return ImageCounts(images=len(outcomes), **tally)
