"""A run record turned into the plain "report view" that every renderer draws.

The terminal, HTML and JSON reports show the same things in the same order because they
all read this view: axes ranked by relative BAV (axes without BAV last, with the reason),
each axis's counterfactuals by CAS (lowest first, those without CAS last), one plain
sentence per axis, concept lists and the run's settings. Metric explanations are data
here (HELM's habit: a metric carries its display name, what high and low mean and
whether lower is better), so every renderer explains a number the same way. Nothing here computes a score: the view only reads and orders the record.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from auditor.records import (
    INITIAL_PROMPT_ID,
    AssociationResult,
    AxisScore,
    ConceptFrequency,
    CounterfactualScore,
    RunRecord,
)

# --------------------------------------------------------------------------- metric metadata


@dataclass(frozen=True)
class MetricInfo:
    """What a number means, for people: the renderers print this beside the number."""

    key: str
    name: str
    description: str
    high: str
    low: str
    value_range: str
    lower_is_better: bool | None = None

    @property
    def explanation(self) -> str:
        """One line: what it measures, then what high and low values mean."""
        return f"{self.description} High: {self.high}. Low: {self.low}."


METRICS: dict[str, MetricInfo] = {
    info.key: info
    for info in (
        MetricInfo(
            "cas",
            "CAS (concept association score)",
            "How much the concepts seen in the initial images overlap those in one counterfactual's images.",
            "the model pictures the prompt much like this counterfactual",
            "the counterfactual's images show other things",
            "0 to 1",
        ),
        MetricInfo(
            "bav",
            "BAV (bias axis variance)",
            "Variance of the CAS values of one axis's counterfactuals.",
            "the initial images resemble some counterfactuals far more than others, a lean along the axis",
            "they resemble every counterfactual about equally",
            "0 to 0.25",
            lower_is_better=True,
        ),
        MetricInfo(
            "relative_bav",
            "Relative BAV",
            "An axis's BAV divided by the largest BAV of this run, to rank the axes.",
            "1 is the axis that leans most in this run",
            "near 0, hardly any lean compared with the top axis (not comparable across runs)",
            "0 to 1",
            lower_is_better=True,
        ),
        MetricInfo(
            "bav_mad",
            "BAV, MAD variant",
            "The TIBET authors' released-code variant of BAV: a normalised mean absolute deviation of the CAS values.",
            "one counterfactual takes most of the resemblance",
            "the resemblance is spread evenly",
            "0 to 1",
            lower_is_better=True,
        ),
        MetricInfo(
            "embedding_similarity",
            "Embedding similarity",
            "Mean cosine similarity of the image embeddings of the initial and the counterfactual images.",
            "the two sets of images look alike to the embedding model",
            "they look different",
            "-1 to 1",
        ),
        MetricInfo(
            "lean",
            "Male - female CAS",
            "CAS of the male counterfactual minus CAS of the female counterfactual.",
            "above 0, the images look more like the male version",
            "below 0, more like the female version",
            "-1 to 1",
        ),
        MetricInfo(
            "association",
            "T2IAT association S",
            "How much more the initial images' embeddings lean to the axis's first rather than its second "
            "counterfactual's images than a balanced mix of both sets does (T2IAT).",
            "above 0, towards the first counterfactual",
            "below 0, towards the second",
            "-2 to 2",
        ),
        MetricInfo(
            "effect_size",
            "Effect size d",
            "Cohen's d of the association: its size in standard deviations.",
            "0.8 or more (either sign) is a large effect",
            "below 0.2 is negligible",
            "any number; undefined when the association scores have no spread",
        ),
        MetricInfo(
            "p_value",
            "p-value",
            "Share of random regroupings of the images that give an association at least as strong.",
            "the association may well be chance",
            "below 0.05, unlikely to be chance",
            "0 to 1",
            lower_is_better=True,
        ),
        MetricInfo(
            "frequency",
            "Concept frequency",
            "How often a concept occurs per image in the VQA answers (and captions).",
            "1 means about once in every image (it can exceed 1)",
            "a rare concept",
            "0 or more",
        ),
    )
}

# --------------------------------------------------------------------------- view types


@dataclass(frozen=True)
class Concept:
    """A concept word and its per-image frequency."""

    concept: str
    frequency: float


def _concepts(items: list[ConceptFrequency]) -> list[Concept]:
    return [Concept(c.concept, c.frequency) for c in items]


@dataclass(frozen=True)
class Segment:
    """A piece of a counterfactual prompt; ``changed`` marks words the initial prompt lacks."""

    text: str
    changed: bool


@dataclass(frozen=True)
class CounterfactualView:
    """One counterfactual's scores; ``label`` is what it changed ("female"), for chart labels."""

    prompt_id: str
    prompt: str
    label: str
    segments: list[Segment]
    cas: float | None
    embedding_similarity: float | None
    warnings: list[str]


@dataclass(frozen=True)
class AssociationView:
    """A T2IAT association with its direction spelled out as the counterfactual it leans to."""

    association: float
    effect_size: float | None
    effect_label: str
    p_value: float
    exact: bool
    permutations: int
    n_x: int
    n_y: int
    first: str | None
    second: str | None
    toward: str | None
    sentence: str


@dataclass(frozen=True)
class ConceptColumn:
    """The top concepts of one prompt set (a column of the paper's Figures 19-21)."""

    prompt_id: str
    prompt: str
    label: str
    concepts: list[Concept]


@dataclass(frozen=True)
class AxisView:
    """One scored axis: rank, numbers, the sentence a person reads, and its concept columns.

    ``bav_note`` says why an axis has no BAV (fewer than two counterfactuals with a CAS).
    """

    rank: int
    name: str
    kind: str | None
    question: str | None
    bav: float | None
    bav_note: str | None
    bav_mad: float | None
    relative_bav: float | None
    lean: float | None
    association: AssociationView | None
    counterfactuals: list[CounterfactualView]
    finding: str
    overall_concepts: list[ConceptColumn]
    aligned_concepts: list[ConceptColumn]


@dataclass(frozen=True)
class IntersectionDisplay:
    """How axis B's answers change across axis A's counterfactuals (paper Fig. 5)."""

    axis_a: str
    axis_b: str
    columns: list[ConceptColumn]


@dataclass(frozen=True)
class ImageView:
    """One image of a prompt set with what the VQA model said about it."""

    index: int
    file: str
    seed: int | None
    flagged_nsfw: bool
    answers: dict[str, str]
    caption: str | None


@dataclass(frozen=True)
class SetView:
    """A prompt set as planned, with the images it got (none yet when the run stopped early)."""

    prompt_id: str
    prompt: str
    axis: str | None
    label: str
    segments: list[Segment]
    images: list[ImageView]

    @property
    def answered(self) -> bool:
        """Whether the VQA model said anything about any image of the set."""
        return any(image.answers or image.caption for image in self.images)

    @property
    def answer_axes(self) -> list[str]:
        """Axes the VQA model answered for any image of the set, in first-seen order."""
        return list(dict.fromkeys(axis for image in self.images for axis in image.answers))


@dataclass(frozen=True)
class PlanAxisView:
    """An axis as the planner proposed it."""

    name: str
    kind: str | None
    question: str
    counterfactuals: list[str]


@dataclass(frozen=True)
class ModelLine:
    """A model used by the run, one line per role."""

    role: str
    spec: str
    details: str


@dataclass(frozen=True)
class ReportView:
    """Everything a report shows, in display order. ``as_dict`` is the ``--json`` output."""

    run_id: str
    status: str
    status_phrase: str
    prompt: str
    created_at: str
    scored: bool
    headline: str
    models: list[ModelLine]
    images_per_prompt: int
    seeds: str
    cas_normalization: str | None
    axes: list[AxisView]
    initial_concepts: list[Concept]
    initial_aligned: dict[str, list[Concept]]
    intersections: list[IntersectionDisplay]
    plan: list[PlanAxisView]
    planner: dict[str, Any] | None
    sets: list[SetView]
    notes: list[str]
    errors: list[str]
    metrics: list[MetricInfo]
    config: dict[str, Any]
    environment: dict[str, Any]
    timings: list[dict[str, Any]] = field(default_factory=list)

    def set_by_id(self, prompt_id: str) -> SetView | None:
        """The prompt set with this id (templates look sets up per axis)."""
        return next((s for s in self.sets if s.prompt_id == prompt_id), None)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data, metric explanations included."""
        data = dataclasses.asdict(self)
        data["metrics"] = {m.key: {**dataclasses.asdict(m), "explanation": m.explanation} for m in self.metrics}
        return data


# --------------------------------------------------------------------------- building the view

_WORD = re.compile(r"\S+|\s+")


def _word_key(token: str) -> str:
    return re.sub(r"[^\w-]", "", token.casefold())


def prompt_segments(initial: str, counterfactual: str) -> list[Segment]:
    """Split ``counterfactual`` into unchanged and changed pieces relative to ``initial``.

    Words are compared case- and punctuation-insensitively, so "a photo of a *female*
    pharmacist" marks only "female"; whitespace is kept so the pieces join back exactly.
    """
    tokens = _WORD.findall(counterfactual)
    words = [i for i, t in enumerate(tokens) if not t.isspace()]
    base = [_word_key(t) for t in initial.split()]
    matcher = difflib.SequenceMatcher(a=base, b=[_word_key(tokens[i]) for i in words], autojunk=False)
    changed = set()
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            changed.update(words[j1:j2])
    segments: list[Segment] = []
    for i, token in enumerate(tokens):
        flag = i in changed or (token.isspace() and i - 1 in changed and i + 1 in changed)
        if segments and segments[-1].changed == flag:
            segments[-1] = Segment(segments[-1].text + token, flag)
        else:
            segments.append(Segment(token, flag))
    return segments


def prompt_label(initial: str, counterfactual: str) -> str:
    """The words a counterfactual adds or swaps ("female"), or the whole prompt when none do."""
    changed = [s.text.strip() for s in prompt_segments(initial, counterfactual) if s.changed]
    return " … ".join(changed) or counterfactual


def describe_seeds(seeds: list[int]) -> str:
    """``0-47 (48 seeds)`` for a run of consecutive seeds, else the list (shortened past 12)."""
    if not seeds:
        return "none recorded"
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 2:
        return f"{seeds[0]}-{seeds[-1]} ({len(seeds)} seeds)"
    shown = ", ".join(str(s) for s in seeds[:12])
    return shown + (f", … ({len(seeds)} seeds)" if len(seeds) > 12 else "")


def _quote(text: str) -> str:
    return f"'{text}'"


def axis_finding(prompt: str, axis: str, scores: list[CounterfactualScore]) -> str:
    """One plain sentence on which counterfactual the initial images resemble, with the CAS values.

    Counterfactuals without a CAS are left out of the comparison and named at the end.
    """
    if not scores:
        return f"No counterfactuals of {axis} were scored."
    known = [(s.prompt, s.cas) for s in scores if s.cas is not None]
    missing = [s.prompt for s in scores if s.cas is None]
    if not known:
        return f"No {axis} counterfactual has a CAS: there were no concepts to compare (see the notes)."
    if len(known) == 1:
        [(only, cas)] = known
        finding = (
            f"Only {_quote(only)} has a CAS among the {axis} counterfactuals ({cas:.2f}), "
            "so there is nothing to compare it with."
        )
    else:
        counted = f"{len(known)} {axis} counterfactuals" + (" with a CAS" if missing else "")
        finding = _compared(f"Images for {_quote(prompt)}", counted, known)
    if missing:
        names = " and ".join(_quote(text) for text in missing)
        one = len(missing) == 1
        finding += f" {names} {'has' if one else 'have'} no CAS (no concepts in {'its' if one else 'their'} images)."
    return finding


def _compared(subject: str, counted: str, pairs: list[tuple[str, float]]) -> str:
    """The sentence for two or more ``(counterfactual prompt, CAS)`` pairs."""
    high, low = max(cas for _, cas in pairs), min(cas for _, cas in pairs)
    if high == 0:
        return f"{subject} share no concepts with any of the {counted} (every CAS is 0.00)."
    if high - low < 0.005:
        return f"{subject} resemble all {counted} about equally (CAS {high:.2f})."
    most = " and ".join(_quote(prompt) for prompt, cas in pairs if high - cas < 0.005)
    least = " and ".join(_quote(prompt) for prompt, cas in pairs if cas - low < 0.005)
    if len(pairs) == 2:
        return f"{subject} resemble {most} (CAS {high:.2f}) more than {least} ({low:.2f})."
    return f"{subject} resemble {most} most (CAS {high:.2f}) and {least} least ({low:.2f}) of the {counted}."


def _association_view(result: AssociationResult, scores: list[CounterfactualScore]) -> AssociationView:
    first, second = (scores[0].prompt, scores[1].prompt) if len(scores) >= 2 else (None, None)
    toward = first if result.association > 0 else second if result.association < 0 else None
    d = "undefined" if result.effect_size is None else f"{result.effect_size:.2f} ({result.effect_label})"
    numbers = f"S = {result.association:+.3f}, d = {d}, p = {result.p_value:.3g}"
    subject = "The initial images' embeddings lean towards"
    if result.effect_size is None:
        sentence = (
            "The initial images' association scores have no spread within the groups, so the size of any lean "
            f"is undefined ({numbers})."
        )
    elif toward is None or result.effect_label == "negligible":
        pair = f"neither {_quote(first)} nor {_quote(second)}" if first and second else "neither counterfactual"
        sentence = f"{subject} {pair} more than a balanced mix of both does ({numbers})."
    else:
        sentence = f"{subject} {_quote(toward)} more than a balanced mix of both counterfactuals does ({numbers})."
    return AssociationView(
        association=result.association,
        effect_size=result.effect_size,
        effect_label=result.effect_label,
        p_value=result.p_value,
        exact=result.exact,
        permutations=result.permutations,
        n_x=result.n_x,
        n_y=result.n_y,
        first=first,
        second=second,
        toward=toward,
        sentence=sentence,
    )


def _column(prompt_id: str, prompt: str, initial: str, concepts: list[ConceptFrequency]) -> ConceptColumn:
    label = "initial" if prompt_id == INITIAL_PROMPT_ID else prompt_label(initial, prompt)
    return ConceptColumn(prompt_id=prompt_id, prompt=prompt, label=label, concepts=_concepts(concepts))


def _axis_view(record: RunRecord, rank: int, score: AxisScore) -> AxisView:
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
            embedding_similarity=cf.embedding_similarity,
            warnings=list(cf.warnings),
        )
        for cf in sorted(score.counterfactuals, key=lambda c: (c.cas is None, c.cas or 0.0))  # no CAS last
    ]
    ids = [(INITIAL_PROMPT_ID, prompt)] + [(cf.prompt_id, cf.prompt) for cf in score.counterfactuals]
    overall = [_column(pid, text, prompt, scores.top_concepts.get(pid, [])) for pid, text in ids]
    aligned = [
        _column(pid, text, prompt, scores.axis_top_concepts.get(pid, {}).get(score.axis, [])) for pid, text in ids
    ]
    return AxisView(
        rank=rank,
        name=score.axis,
        kind=plan_axis.kind if plan_axis else None,
        question=plan_axis.question if plan_axis else None,
        bav=score.bav,
        bav_note=_bav_note(score),
        bav_mad=score.bav_mad,
        relative_bav=score.relative_bav,
        lean=score.lean,
        association=_association_view(score.association, score.counterfactuals) if score.association else None,
        counterfactuals=cfs,
        finding=axis_finding(prompt, score.axis, score.counterfactuals),
        overall_concepts=overall,
        aligned_concepts=aligned,
    )


def _bav_note(score: AxisScore) -> str | None:
    """Why an axis has no BAV (fewer than two CAS values), short enough for a ranking row; None when it has one."""
    if score.bav is not None:
        return None
    if len(score.counterfactuals) == 1:
        return "no BAV: the axis has one counterfactual"
    count = sum(cf.cas is not None for cf in score.counterfactuals)
    has = f"{'only ' if count else ''}{count or 'none'} of {len(score.counterfactuals)} counterfactuals"
    return f"no BAV: {has} {'has' if count <= 1 else 'have'} a CAS"


def _ranked(axes: list[AxisScore]) -> list[AxisScore]:
    """Axes by relative BAV, then BAV, highest first; axes without BAV last; ties keep plan order."""
    return sorted(axes, key=lambda a: (a.bav is None, -(a.relative_bav or 0.0), -(a.bav or 0.0)))


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
    lines = [ModelLine("planner", config.llm, "")]
    for role, ref in (("text-to-image", config.t2i), ("VQA", config.vqa), ("embedder", config.embedder)):
        if ref is None:
            continue
        revision = f"revision {ref.revision}" if ref.revision else ""
        details = [revision, ref.dtype or "", ref.device or "", ref.service or ""]
        lines.append(ModelLine(role, ref.spec, ", ".join(d for d in details if d)))
    return lines


#: How each run status reads in a sentence ("This run ...").
STATUS_PHRASES = {
    "running": "is still running (or stopped without recording why)",
    "completed": "completed",
    "failed": "failed",
    "interrupted": "was interrupted",
}


def _headline(record: RunRecord, axes: list[AxisView]) -> str:
    if record.scores is None:
        stage = next((e.stage for e in record.errors if e.stage), None)
        where = f" at the {stage} stage" if stage else ""
        return f"This run {STATUS_PHRASES[record.status]}{where} and has no scores; below is what it finished."
    if not axes:
        return "The run was scored but has no axes."
    top = axes[0]
    if top.bav is None:  # axes without BAV rank last, so none has one
        if all(cf.cas is None for axis in axes for cf in axis.counterfactuals):
            return (
                "No counterfactual has a CAS: the images gave no concepts to compare (see the notes), "
                "so no axis can be ranked."
            )
        return "No axis has a BAV: none has two counterfactuals with a CAS (see the notes), so none can be ranked."
    if top.bav == 0:
        return "No axis leans: every axis's counterfactuals got equal CAS values."
    return f"The axis that leans most is {top.name} (BAV {top.bav:.4f}). {top.finding}"


def _notes(record: RunRecord) -> list[str]:
    notes = []
    if record.status != "completed":
        notes.append(f"This run {STATUS_PHRASES[record.status]}.")
    if record.scores is not None:
        notes += list(record.scores.warnings)
        for axis in record.scores.axes:
            for cf in axis.counterfactuals:
                notes += [f"{axis.axis}, {_quote(cf.prompt)}: {w}" for w in cf.warnings]
    flagged = sum(image.flagged_nsfw for s in record.prompt_sets for image in s.images)
    if flagged:
        notes.append(f"{flagged} images were blacked out by the safety checker and left out of the concepts.")
    return notes


def build_view(record: RunRecord) -> ReportView:
    """Read ``record`` into the report view (no I/O; a run without scores gives a partial view)."""
    scores = record.scores
    axes = [_axis_view(record, rank, a) for rank, a in enumerate(_ranked(scores.axes), 1)] if scores else []
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
    return ReportView(
        run_id=record.run_id,
        status=record.status,
        status_phrase=STATUS_PHRASES[record.status],
        prompt=prompt,
        created_at=record.created_at.isoformat(timespec="seconds"),
        scored=scores is not None,
        headline=_headline(record, axes),
        models=_models(record),
        images_per_prompt=record.config.images_per_prompt,
        seeds=describe_seeds(record.config.seeds),
        cas_normalization=scores.cas_normalization if scores else None,
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
                "transcript": [turn.model_dump(mode="json") for turn in plan.transcript],
            }
            if plan
            else None
        ),
        sets=_sets(record),
        notes=_notes(record),
        errors=[f"{e.stage or 'run'}: {e.type}: {e.message}" for e in record.errors],
        metrics=[m for key, m in METRICS.items() if key in used],
        config=record.config.model_dump(mode="json"),
        environment=record.environment.model_dump(mode="json"),
        timings=[t.model_dump(mode="json") for t in record.timings],
    )
