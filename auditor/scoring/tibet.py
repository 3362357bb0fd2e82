"""From concept histograms to :class:`~auditor.records.Scores`: CAS, BAV, top-K, intersections.

:func:`score_audit` scores a run once the concepts of every prompt set exist, and
:func:`score_tibet_result` a result file of the TIBET authors' code, without touching a model;
:mod:`auditor.scoring.intervals` adds their intervals, for the live audit and ``auditor score``
alike. The arithmetic lives in
:mod:`auditor.metrics.tibet`, the synonym merging in :mod:`auditor.scoring.concepts`; this module
only pairs sets up, in plan order, and says when a number may mislead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from auditor.core.errors import AuditorError
from auditor.metrics import tibet
from auditor.records import (
    INITIAL_PROMPT_ID,
    AuditPlan,
    AxisScore,
    CasNormalization,
    ConceptFrequency,
    CounterfactualScore,
    GeneratedImage,
    ImageAnswers,
    IntersectionView,
    RunRecord,
    Scores,
    ScoringSettings,
    SetConcepts,
    counterfactual_id,
)
from auditor.scoring.concepts import (
    SynonymIndex,
    histogram,
    merge_synonyms,
    set_concepts,
)
from auditor.scoring.tibet_files import TibetResult

#: ``(axis name, counterfactual prompts in order)``: all scoring needs of a plan.
AxisSpec = tuple[str, Sequence[str]]


def score_audit(
    plan: AuditPlan,
    concepts: Mapping[str, SetConcepts],
    settings: ScoringSettings,
) -> Scores:
    """Score a prompt audit: ``concepts`` maps every id of ``plan.prompt_sets()`` to its histograms."""
    return score_axes([(axis.name, axis.counterfactuals) for axis in plan.axes], concepts, settings)


def score_axes(
    axes: Sequence[AxisSpec],
    concepts: Mapping[str, SetConcepts],
    settings: ScoringSettings,
    *,
    synonyms: SynonymIndex | None = None,
) -> Scores:
    """:func:`score_audit` on bare ``(axis, counterfactuals)`` pairs (TIBET files may have one-counterfactual axes).

    A set without concepts gets no CAS (None) rather than 0, and a warning that says why:
    a counterfactual's in its own ``warnings``; the initial set's, which leaves every CAS
    of the prompt None, once in ``Scores.warnings``. BAV, bav_mad, relative BAV and the
    lean use only the CAS values that exist, and an axis with fewer than two gets no BAV
    (a warning in ``Scores.warnings`` says so).
    """
    prompt_ids = [INITIAL_PROMPT_ID] + [counterfactual_id(name, k) for name, cfs in axes for k in range(len(cfs))]
    sets = {prompt_id: _concepts_of(concepts, prompt_id) for prompt_id in prompt_ids}
    initial = sets[INITIAL_PROMPT_ID]
    warnings = []
    if not initial.overall:
        warnings.append(
            f"the initial images gave no concepts ({_why_no_concepts(initial)}), so no counterfactual can be "
            "compared with them: every CAS and BAV is null"
        )
    per_axis = [
        [
            _counterfactual_score(initial, sets[counterfactual_id(name, k)], prompt, settings.cas_normalization, synonyms)
            for k, prompt in enumerate(cfs)
        ]
        for name, cfs in axes
    ]
    cas_values = [[score.cas for score in scores] for scores in per_axis]
    bavs = [tibet.bav(values) for values in cas_values]
    if initial.overall:  # otherwise the warning above already says why no axis has a BAV
        warnings += [
            _no_bav_warning(name, values) for (name, _), values, value in zip(axes, cas_values, bavs) if value is None
        ]
    relative_bavs = tibet.relative_bav(bavs)
    axis_scores = [
        AxisScore(
            axis=name,
            counterfactuals=scores,
            bav=bavs[i],
            bav_mad=tibet.bav_mad(cas_values[i]),
            relative_bav=relative_bavs[i],
            lean=tibet.occupation_lean(list(cfs), cas_values[i]),
        )
        for i, ((name, cfs), scores) in enumerate(zip(axes, per_axis))
    ]
    axis_names = [name for name, _ in axes]
    k = settings.top_k
    return Scores(
        cas_normalization=settings.cas_normalization,
        axes=axis_scores,
        top_concepts={prompt_id: _top(found.overall, k) for prompt_id, found in sets.items()},
        axis_top_concepts={
            prompt_id: {axis: _top(found.by_axis.get(axis, {}), k) for axis in axis_names}
            for prompt_id, found in sets.items()
        },
        intersectionality=[
            IntersectionView(
                axis_a=name_a,
                axis_b=name_b,
                initial=_top(initial.by_axis.get(name_b, {}), k),
                counterfactuals={
                    counterfactual_id(name_a, i): _top(sets[counterfactual_id(name_a, i)].by_axis.get(name_b, {}), k)
                    for i in range(len(cfs_a))
                },
            )
            for name_a, cfs_a in axes
            for name_b in axis_names
            if name_b != name_a
        ],
        warnings=warnings,
    )


def _concepts_of(concepts: Mapping[str, SetConcepts], prompt_id: str) -> SetConcepts:
    found = concepts.get(prompt_id)
    if found is None:
        raise AuditorError(f"no concepts for prompt set {prompt_id!r}: every prompt set of the plan needs them")
    return found


def _counterfactual_score(
    initial: SetConcepts,
    other: SetConcepts,
    prompt: str,
    normalization: CasNormalization,
    synonyms: SynonymIndex | None,
) -> CounterfactualScore:
    """CAS of one pair; an empty initial set is warned about once by the caller, not here for every pair."""
    p, q = merge_synonyms(initial.overall, other.overall, synonyms)
    warnings = []
    if p and not q:
        warnings.append(
            f"the counterfactual images gave no concepts ({_why_no_concepts(other)}), "
            "so it has no CAS and is left out of BAV"
        )
    return CounterfactualScore(
        prompt_id=other.prompt_id, prompt=prompt, cas=tibet.cas(p, q, normalization), warnings=warnings
    )


def _why_no_concepts(found: SetConcepts) -> str:
    if found.images_used == 0:
        return "no usable images: every one was flagged by the safety checker or got no answer"
    return "every answer was a stopword or rarer than the frequency floor"


def _no_bav_warning(axis: str, cas_values: Sequence[float | None]) -> str:
    if len(cas_values) == 1:
        return f"axis {axis!r} has no BAV: it has one counterfactual, and a variance needs two"
    count = len(tibet.known(cas_values))
    has = "none" if count == 0 else f"only {count}"
    total = len(cas_values)
    return f"axis {axis!r} has no BAV: {has} of its {total} counterfactuals has a CAS, and a variance needs two"


def _top(histogram: Mapping[str, float], k: int) -> list[ConceptFrequency]:
    return [ConceptFrequency(concept=concept, frequency=freq) for concept, freq in tibet.top_k(histogram, k)]


# --------------------------------------------------------------------------- rescoring a record


def record_concepts(record: RunRecord, settings: ScoringSettings | None = None) -> dict[str, SetConcepts]:
    """Concepts of every prompt set of ``record``, recomputed from its answers.

    Images flagged NSFW are left out (a blacked-out image says nothing about the prompt);
    captions and the frequency floor follow ``settings``, by default the record's own. A prompt set
    short of its images, or of the answers of one it holds (a run stopped while it generated or
    asked), is an error: scored, its few answers would read as the whole set's.
    """
    plan = plan_of(record)
    axes = [axis.name for axis in plan.axes]
    images = {prompt_set.prompt_id: prompt_set.images for prompt_set in record.prompt_sets}
    settings = settings or record.config.scoring
    concepts = {}
    for prompt_id, _prompt, _axis in plan.prompt_sets():
        answers = record.answers.get(prompt_id)
        if answers is None:
            raise AuditorError(
                f"run {record.run_id!r} has no answers for prompt set {prompt_id!r} (did the perceive stage finish?)"
            )
        generated = images.get(prompt_id, [])
        flagged = {image.index for image in generated if image.flagged_nsfw}
        used = [answer for answer in answers if answer.image_index not in flagged]
        if generated and len(used) > len(generated):
            raise AuditorError(
                f"run {record.run_id!r}: prompt set {prompt_id!r} has answers for {len(used)} images "
                f"but only {len(generated)} were generated"
            )
        _check_complete(record, prompt_id, generated, flagged, used)
        concepts[prompt_id] = set_concepts(
            prompt_id,
            used,
            axes,
            include_captions=settings.include_captions,
            min_frequency=settings.min_frequency,
            images_total=len(generated),
        )
    return concepts


def _check_complete(
    record: RunRecord,
    prompt_id: str,
    generated: Sequence[GeneratedImage],
    flagged: set[int],
    used: Sequence[ImageAnswers],
) -> None:
    expected = record.config.images_per_prompt
    if len(generated) < expected:
        raise AuditorError(
            f"run {record.run_id!r} has {len(generated)} of the {expected} images of prompt set {prompt_id!r} "
            "(did the generate stage finish?)"
        )
    known = flagged | {answer.image_index for answer in used}
    if unanswered := [image.index for image in generated if image.index not in known]:
        raise AuditorError(
            f"run {record.run_id!r} has answers for {len(generated) - len(flagged) - len(unanswered)} of the "
            f"{len(generated) - len(flagged)} images of prompt set {prompt_id!r} (did the perceive stage finish?)"
        )


def score_tibet_result(result: TibetResult, settings: ScoringSettings | None = None) -> Scores:
    """Score a TIBET result file's answers; the file's notes on its questions join the warnings.

    As in the authors' metric code, every answer of an image counts in its set's overall
    histogram, so CAS and BAV use them all (the files hold no captions). An axis's
    axis-aligned histogram holds the answers to the questions tied to it
    (:func:`auditor.scoring.tibet_files.question_axes`); a question tied to no axis is in none.
    """
    settings = settings or ScoringSettings()
    axes = [axis.name for axis in result.axes]
    concepts = {
        prompt_id: _tibet_set_concepts(prompt_id, images, result.question_axes, axes, settings.min_frequency)
        for prompt_id, images in result.image_sets().items()
    }
    scores = score_axes([(axis.name, axis.counterfactuals) for axis in result.axes], concepts, settings)
    return scores.model_copy(update={"warnings": result.warnings + scores.warnings})


def _tibet_set_concepts(
    prompt_id: str,
    images: Sequence[Sequence[str]],
    question_axes: Sequence[str | None],
    axes: Sequence[str],
    min_frequency: float,
) -> SetConcepts:
    """Histograms of one image set of a TIBET file: all answers overall, tied answers per axis."""
    n = len(images)
    return SetConcepts(
        prompt_id=prompt_id,
        images_used=n,
        overall=histogram((answer for row in images for answer in row), n, min_frequency),
        by_axis={
            axis: histogram(
                (answer for row in images for answer, tied in zip(row, question_axes) if tied == axis), n, min_frequency
            )
            for axis in axes
        },
    )


def plan_of(record: RunRecord) -> AuditPlan:
    """The run's plan; a one-line error for a run that stopped before planning."""
    if record.plan is None:
        raise AuditorError(f"run {record.run_id!r} has no plan yet, so there is nothing to score")
    return record.plan
