"""The prompt audit's report view: a :class:`~auditor.records.RunRecord` read into a :class:`ReportView`.

Axes are ranked by relative BAV (axes without BAV last, with the reason), each axis's
counterfactuals ordered by CAS (lowest first, those without CAS last), with one plain
sentence per axis, concept lists and the run's settings. Nothing here computes a score:
the view only reads and orders the record.
"""

from __future__ import annotations

from pathlib import Path

from auditor.records import INITIAL_PROMPT_ID, AxisScore, ConceptFrequency, RunRecord
from auditor.reporting.glossary import METRICS
from auditor.reporting.ranking import rank_with_ties
from auditor.reporting.sentences import (
    CAS_INTERVAL_CAVEAT,
    association_view,
    axis_finding,
    bav_note,
    bounds,
    error_line,
    headline,
    lean_sentence,
    next_step,
    notes,
    uncertainty_line,
)
from auditor.reporting.status import shown_status, status_wording
from auditor.reporting.views import (
    AxisView,
    Concept,
    ConceptColumn,
    CounterfactualView,
    ImageView,
    IntersectionDisplay,
    ModelLine,
    PlanAxisView,
    ReportView,
    SetView,
)
from auditor.reporting.wording import (
    Segment,
    describe_seeds,
    prompt_label,
    prompt_segments,
    seeds_phrase,
)


def _concepts(items: list[ConceptFrequency]) -> list[Concept]:
    return [Concept(c.concept, c.frequency) for c in items]


def _column(prompt_id: str, prompt: str, initial: str, concepts: list[ConceptFrequency]) -> ConceptColumn:
    label = "initial" if prompt_id == INITIAL_PROMPT_ID else prompt_label(initial, prompt)
    return ConceptColumn(prompt_id=prompt_id, prompt=prompt, label=label, concepts=_concepts(concepts))


def _axis_view(record: RunRecord, rank: int, tied: bool, score: AxisScore) -> AxisView:
    scores = record.scores
    assert scores is not None
    prompt = record.config.prompt
    plan_axis = next((a for a in (record.plan.axes if record.plan else []) if a.name == score.axis), None)
    cfs = [
        CounterfactualView(
            prompt_id=cf.prompt_id,
            prompt=cf.prompt,
            label=prompt_label(prompt, cf.prompt),
            segments=prompt_segments(prompt, cf.prompt),
            cas=cf.cas,
            cas_ci=bounds(cf.cas_ci),
            embedding_similarity=cf.embedding_similarity,
            embedding_similarity_ci=bounds(cf.embedding_similarity_ci),
            warnings=list(cf.warnings),
        )
        for cf in sorted(score.counterfactuals, key=lambda c: (c.cas is None, c.cas or 0.0))  # no CAS last
    ]
    # the concept columns in the order of the CAS table and the image rows above them (lowest CAS first)
    ids = [(INITIAL_PROMPT_ID, prompt)] + [(cf.prompt_id, cf.prompt) for cf in cfs]
    overall = [_column(pid, text, prompt, scores.top_concepts.get(pid, [])) for pid, text in ids]
    aligned = [
        _column(pid, text, prompt, scores.axis_top_concepts.get(pid, {}).get(score.axis, [])) for pid, text in ids
    ]
    return AxisView(
        rank=rank,
        tied=tied,
        name=score.axis,
        kind=plan_axis.kind if plan_axis else None,
        question=plan_axis.question if plan_axis else None,
        bav=score.bav,
        bav_ci=bounds(score.bav_ci),
        bav_note=bav_note(score),
        bav_mad=score.bav_mad,
        bav_mad_ci=bounds(score.bav_mad_ci),
        relative_bav=score.relative_bav,
        relative_bav_ci=bounds(score.relative_bav_ci),
        ranks_first=score.ranks_first,
        lean=score.lean,
        lean_ci=bounds(score.lean_ci),
        lean_sentence=lean_sentence(score),
        spread=score.spread.model_dump(mode="json") if score.spread else None,
        association=(
            association_view(score.association, score.counterfactuals, scores.alpha, scores.correction)
            if score.association
            else None
        ),
        counterfactuals=cfs,
        finding=axis_finding(prompt, score.axis, score),
        overall_concepts=overall,
        aligned_concepts=aligned,
    )


def _ranked(axes: list[AxisScore]) -> list[tuple[int, bool, AxisScore]]:
    """Axes by relative BAV, then BAV, highest first, axes without BAV last, each with its rank and whether it
    ties (equal relative BAV and BAV, in plan order: which comes first says nothing)."""
    return rank_with_ties(axes, lambda axis: (axis.relative_bav, axis.bav))


def _sets(record: RunRecord) -> list[SetView]:
    prompt = record.config.prompt
    planned = record.plan.prompt_sets() if record.plan else [(INITIAL_PROMPT_ID, prompt, None)]
    made = {s.prompt_id: s for s in record.prompt_sets}
    order = [pid for pid, _, _ in planned] + [pid for pid in made if pid not in {p for p, _, _ in planned}]
    texts = {pid: (text, axis) for pid, text, axis in planned}
    texts |= {s.prompt_id: (s.prompt, s.axis) for s in made.values()}
    views = []
    for pid in order:
        text, axis = texts[pid]
        answers = {a.image_index: a for a in record.answers.get(pid, [])}
        images = [
            ImageView(
                index=image.index,
                file=image.file,
                seed=image.seed,
                flagged_nsfw=image.flagged_nsfw,
                answers=dict(answers[image.index].answers) if image.index in answers else {},
                caption=answers[image.index].caption if image.index in answers else None,
            )
            for image in (made[pid].images if pid in made else [])
        ]
        initial = pid == INITIAL_PROMPT_ID
        views.append(
            SetView(
                prompt_id=pid,
                prompt=text,
                axis=axis,
                label="initial" if initial else prompt_label(prompt, text),
                segments=[Segment(text, False)] if initial else prompt_segments(prompt, text),
                images=images,
            )
        )
    return views


def _models(record: RunRecord) -> list[ModelLine]:
    config = record.config
    lines = [ModelLine("planner", config.llm, "plan edited by a person" if record.plan and record.plan.edited else "")]
    for role, ref in (("text-to-image", config.t2i), ("VQA", config.vqa), ("embedder", config.embedder)):
        if ref is None:
            continue
        revision = f"revision {ref.revision}" if ref.revision else ""
        details = [revision, ref.dtype or "", ref.device or "", ref.service or ""]
        lines.append(ModelLine(role, ref.spec, ", ".join(d for d in details if d)))
    return lines


def build_view(record: RunRecord, alive: bool | None = None, run_dir: Path | None = None) -> ReportView:
    """Read ``record`` into the report view (no I/O; a run without scores gives a partial view). ``alive``: for a
    record that says ``running``, whether a process runs it now (:func:`~auditor.reporting.status.running_now`;
    None where that was not asked). ``run_dir``, the run's folder, names the command that continues a run that
    did not complete."""
    scores = record.scores
    axes = [_axis_view(record, rank, tied, a) for rank, tied, a in _ranked(scores.axes)] if scores else []
    prompt = record.config.prompt
    intersections = []
    if scores:
        texts = {pid: text for pid, text, _ in record.plan.prompt_sets()} if record.plan else {}
        texts |= {cf.prompt_id: cf.prompt for a in scores.axes for cf in a.counterfactuals}
        for view in scores.intersectionality:
            columns = [_column(INITIAL_PROMPT_ID, prompt, prompt, view.initial)]
            columns += [_column(pid, texts.get(pid, pid), prompt, c) for pid, c in view.counterfactuals.items()]
            intersections.append(IntersectionDisplay(axis_a=view.axis_a, axis_b=view.axis_b, columns=columns))
    used = {"cas", "bav", "relative_bav", "frequency"}
    if any(cf.embedding_similarity is not None for a in axes for cf in a.counterfactuals):
        used.add("embedding_similarity")
    if any(a.lean is not None for a in axes):
        used.add("lean")
    if any(a.association for a in axes):
        used |= {"association", "effect_size", "p_value"}
    plan = record.plan
    seeds = record.image_seeds()
    status = status_wording(record.status, alive)
    step = next_step(record, run_dir) if run_dir is not None and record.status != "completed" and not alive else None
    return ReportView(
        run_id=record.run_id,
        status=record.status,
        shown_status=shown_status(record.status, alive),
        status_phrase=status,
        prompt=prompt,
        created_at=record.created_at.isoformat(timespec="seconds"),
        scored=scores is not None,
        headline=headline(record, axes, status),
        models=_models(record),
        images_per_prompt=record.config.images_per_prompt,
        seeds="none" if seeds is None else describe_seeds(seeds),
        seeded=seeds is not None,
        seeding=seeds_phrase(seeds),
        cas_normalization=scores.cas_normalization if scores else None,
        uncertainty=uncertainty_line(scores, record.config.images_per_prompt, seeds is not None) if scores else None,
        cas_caveat=CAS_INTERVAL_CAVEAT if any(cf.cas_ci for axis in axes for cf in axis.counterfactuals) else None,
        axes=axes,
        initial_concepts=_concepts(scores.top_concepts.get(INITIAL_PROMPT_ID, [])) if scores else [],
        initial_aligned=(
            {axis: _concepts(c) for axis, c in scores.axis_top_concepts.get(INITIAL_PROMPT_ID, {}).items()}
            if scores
            else {}
        ),
        intersections=intersections,
        plan=[PlanAxisView(a.name, a.kind, a.question, list(a.counterfactuals)) for a in plan.axes] if plan else [],
        planner=(
            {
                "llm": plan.llm,
                "attempts": plan.attempts,
                "edited": plan.edited,
                "dropped_axes": dict(plan.dropped_axes),
                "transcript": [turn.model_dump(mode="json") for turn in plan.transcript],
            }
            if plan
            else None
        ),
        sets=_sets(record),
        notes=notes(record),
        errors=[error_line(error) for error in record.errors],
        next_step=step,
        metrics=[m for key, m in METRICS.items() if key in used],
        config=record.config.model_dump(mode="json"),
        environment=record.environment.model_dump(mode="json"),
        timings=[t.model_dump(mode="json") for t in record.timings],
    )
