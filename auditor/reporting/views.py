"""The report view: plain data every renderer (terminal, HTML, JSON) draws, in display order.

Building a view (:mod:`auditor.reporting.prompt_audit`) reads and orders a record; these
types only hold the result, so the renderers agree on order, wording and explanations.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from auditor.reporting.glossary import MetricInfo
from auditor.reporting.ranking import Ranked
from auditor.reporting.wording import Segment

#: An interval's ``(low, high)``, as the JSON outputs carry it (``[lo, hi]``).
Bounds = tuple[float, float]


@dataclass(frozen=True)
class Concept:
    """A concept word and its per-image frequency."""

    concept: str
    frequency: float


@dataclass(frozen=True)
class CounterfactualView:
    """One counterfactual's scores; ``label`` is what it changed ("female"), for chart labels."""

    prompt_id: str
    prompt: str
    label: str
    segments: list[Segment]
    cas: float | None
    cas_ci: Bounds | None
    embedding_similarity: float | None
    embedding_similarity_ci: Bounds | None
    warnings: list[str]


@dataclass(frozen=True)
class AssociationView:
    """A T2IAT association with its direction spelled out as the counterfactual it leans to."""

    association: float
    association_ci: Bounds | None
    effect_size: float | None
    effect_label: str
    p_value: float
    p_adjusted: float | None
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
class AxisView(Ranked):
    """One scored axis: rank (axes with equal relative BAV and BAV tie), numbers, the sentence a person reads, and
    its concept columns.

    ``bav_note`` says why an axis has no BAV (fewer than two counterfactuals with a CAS). ``spread`` is the
    highest minus the lowest CAS with its interval (the evidence of ``finding``), as ``auditor score --json``
    gives it, so both outputs read alike.
    """

    name: str
    kind: str | None
    question: str | None
    bav: float | None
    bav_ci: Bounds | None
    bav_note: str | None
    bav_mad: float | None
    bav_mad_ci: Bounds | None
    relative_bav: float | None
    relative_bav_ci: Bounds | None
    ranks_first: float | None
    lean: float | None
    lean_ci: Bounds | None
    lean_sentence: str | None
    spread: dict[str, Any] | None
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
    #: The record's status, and as the header shows it (``stopped``: a ``running`` record no process runs).
    status: str
    shown_status: str
    status_phrase: str
    prompt: str
    created_at: str
    scored: bool
    headline: str
    models: list[ModelLine]
    images_per_prompt: int
    #: The seeds, shortly ("0-47 (48 seeds)"; "none" for a backend that takes no seed).
    seeds: str
    #: Whether seed i made image i of every set (False for a backend that takes no seed).
    seeded: bool
    #: How the images were seeded, in words (:func:`auditor.reporting.wording.seeds_phrase`).
    seeding: str
    cas_normalization: str | None
    uncertainty: str | None
    #: :data:`~auditor.reporting.sentences.CAS_INTERVAL_CAVEAT` where CAS values carry intervals, else None.
    cas_caveat: str | None
    axes: list[AxisView]
    initial_concepts: list[Concept]
    initial_aligned: dict[str, list[Concept]]
    intersections: list[IntersectionDisplay]
    plan: list[PlanAxisView]
    planner: dict[str, Any] | None
    sets: list[SetView]
    notes: list[str]
    errors: list[str]
    #: For a run that did not complete and that no process runs: the command that continues it (or that a new run
    #: is needed). None for a completed or running run, or one read without its folder.
    next_step: str | None
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
