"""The prompt audit's record (``auditor prompt``): plan, answers, concepts and TIBET scores."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from auditor.records.base import StudyConfig, StudyRecord
from auditor.records.images import ImageAnswers, PromptSet
from auditor.records.intervals import Correction, Difference, Interval, IntervalSettings
from auditor.records.models import (
    CasNormalization,
    ModelRef,
    PerceptionSettings,
    ScoringSettings,
)
from auditor.records.record import Record
from auditor.records.t2iat import AssociationResult


class RunConfig(StudyConfig):
    """Everything a prompt audit was asked to do; enough to rerun it."""

    prompt: str = Field(description="The initial prompt P being audited.")
    llm: str = Field(description="Planner spec, e.g. 'openai:gpt-4o-mini', 'langchain:anthropic:...', 'offline'.")
    llm_temperature: float | None = Field(default=None, description="Sampling temperature sent to the LLM.")
    llm_seed: int | None = Field(default=None, description="Seed sent to the LLM when it accepts one.")
    llm_retries: int = Field(default=2, ge=0, description="Repair turns allowed when the plan is invalid.")
    max_axes: int | None = Field(default=None, ge=1, description="Cap on the number of axes kept from the plan.")
    max_counterfactuals: int | None = Field(default=None, ge=2, description="Cap on counterfactuals per axis.")
    axes: list[str] | None = Field(
        default=None,
        description="Axes fixed by --axes, in order: their counterfactuals come from the offline planner's axis "
        "library and no LLM is asked (llm is then 'offline'); null = the planner chooses the axes.",
    )
    review: bool = Field(
        default=False,
        description="Whether a person reviews the plan before anything is generated (--review); a resume before "
        "the plan was accepted opens the review again.",
    )
    vqa: ModelRef = Field(description="The vision-language model that answers questions and captions.")
    images_per_prompt: int = Field(ge=1, description="Images generated per prompt (paper: 48).")
    perception: PerceptionSettings = Field(default_factory=PerceptionSettings, description="VQA settings.")
    scoring: ScoringSettings = Field(default_factory=ScoringSettings, description="Scoring settings.")


class ChatMessage(Record):
    """One turn of the planning conversation (API keys are never part of it)."""

    role: Literal["system", "user", "assistant"] = Field(description="Who said it.")
    content: str = Field(description="What was said, verbatim.")


class AxisPlan(Record):
    """One bias axis: its counterfactual prompts and the VQA question that probes it."""

    name: str = Field(description="snake_case axis name, e.g. 'gender' or 'socioeconomic_status'.")
    kind: Literal["societal", "incidental"] | None = Field(
        default=None, description="Whether the LLM called it a societal bias or an incidental correlation."
    )
    counterfactuals: list[str] = Field(min_length=2, description="Counterfactual prompts: P with one concept changed.")
    question: str = Field(description="The VQA question asked of every image for this axis.")


INITIAL_PROMPT_ID = "initial"


def counterfactual_id(axis: str, k: int) -> str:
    """Prompt set id of the k-th (0-based) counterfactual of ``axis``: ``'<axis>/<k>'``."""
    return f"{axis}/{k}"


class AuditPlan(Record):
    """The axes and counterfactuals to audit, and how they were obtained."""

    prompt: str = Field(description="The initial prompt P.")
    axes: list[AxisPlan] = Field(min_length=1, description="Bias axes in the order the planner gave them.")
    caption_question: str = Field(default="Describe the image.", description="Caption question asked of every image.")
    llm: str = Field(description="Planner spec that produced the plan.")
    llm_temperature: float | None = Field(
        default=None, description="Sampling temperature sent to the LLM; None = the backend's default (or no LLM)."
    )
    llm_seed: int | None = Field(default=None, description="Seed sent to the LLM; None = none sent (or no LLM).")
    attempts: int = Field(
        default=1, ge=1, description="LLM replies to the JSON request needed until the plan validated (1 + repairs)."
    )
    edited: bool = Field(default=False, description="True when a person edited the plan (--review).")
    dropped_axes: dict[str, str] = Field(
        default_factory=dict,
        description="Axes asked for with --axes that the plan leaves out -> why (the axis library does not apply "
        "the axis to the prompt, fewer than two counterfactuals could be written, or it is over --max-axes), in "
        "--axes order. The reports' notes name them.",
    )
    notes: list[str] = Field(
        default_factory=list,
        description="What the planner says of how it read the prompt that the reader should know (e.g. the offline "
        "planner found no noun in it and planned the axes of abstract prompts). The reports' notes show them.",
    )
    transcript: list[ChatMessage] = Field(default_factory=list, description="The whole planning conversation.")

    def prompt_sets(self) -> list[tuple[str, str, str | None]]:
        """``(prompt_id, prompt, axis)`` of the initial prompt and then every counterfactual, in plan order."""
        sets = [(INITIAL_PROMPT_ID, self.prompt, None)]
        for axis in self.axes:
            sets += [(counterfactual_id(axis.name, k), cf, axis.name) for k, cf in enumerate(axis.counterfactuals)]
        return sets


class ConceptFrequency(Record):
    """A concept and how often it occurs per image."""

    concept: str = Field(description="The (lower-cased) concept word.")
    frequency: float = Field(ge=0, description="Occurrences divided by the number of images in the set.")


class SetConcepts(Record):
    """Concept histograms of one prompt set."""

    prompt_id: str = Field(description="Prompt set these concepts describe.")
    images_used: int = Field(ge=0, description="Images that counted (flagged images are left out).")
    overall: dict[str, float] = Field(description="Concept -> per-image frequency over all answers and captions.")
    by_axis: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="Axis -> histogram of the answers to that axis's question only."
    )


class CounterfactualScore(Record):
    """How the initial images compare with one counterfactual's images."""

    prompt_id: str = Field(description="Prompt set id of the counterfactual.")
    prompt: str = Field(description="Counterfactual prompt text.")
    cas: float | None = Field(
        ge=0,
        le=1,
        description="Concept Association Score: histogram IoU after synonym merging; null when the initial or "
        "the counterfactual images gave no concepts (then it is left out of BAV and warnings say why).",
    )
    embedding_similarity: float | None = Field(
        default=None, description="Mean cosine similarity of initial and counterfactual image embeddings."
    )
    cas_ci: Interval | None = Field(
        default=None,
        description="Bootstrap interval of CAS over seeds. It shows how CAS moves with other seeds at this "
        "number of images; CAS is biased low at small sizes, so findings rest on differences, not on this.",
    )
    embedding_similarity_ci: Interval | None = Field(
        default=None, description="Bootstrap interval of the embedding similarity over seeds."
    )
    warnings: list[str] = Field(default_factory=list, description="Why this number may mislead (e.g. empty sets).")


class AxisScore(Record):
    """Scores of one bias axis."""

    axis: str = Field(description="Axis name.")
    counterfactuals: list[CounterfactualScore] = Field(description="One score per counterfactual, in plan order.")
    bav: float | None = Field(
        ge=0,
        description="Bias Axis Variance: population variance of the axis's non-null CAS values (Eq. 5); "
        "null when fewer than two counterfactuals have a CAS.",
    )
    bav_mad: float | None = Field(
        ge=0,
        description="Authors' released-code variant: √(mean absolute deviation) of the non-null CAS values "
        "rescaled to sum 1, divided by the same for a one-hot vector of their length (so in [0, 1]); null when BAV "
        "is.",
    )
    relative_bav: float | None = Field(
        ge=0,
        le=1,
        description="This axis's BAV divided by the largest BAV of the prompt; null when the axis has no BAV.",
    )
    lean: float | None = Field(
        default=None,
        description="CAS(male counterfactual) - CAS(female counterfactual), when exactly one counterfactual with "
        "a CAS names only male words (male, man, boy and their plurals) and exactly one only female words; null "
        "otherwise.",
    )
    association: AssociationResult | None = Field(
        default=None, description="T2IAT association of the initial images with the axis's two counterfactuals."
    )
    bav_ci: Interval | None = Field(default=None, description="Bootstrap interval of BAV over seeds.")
    bav_mad_ci: Interval | None = Field(default=None, description="Bootstrap interval of bav_mad over seeds.")
    relative_bav_ci: Interval | None = Field(default=None, description="Bootstrap interval of relative BAV.")
    lean_ci: Interval | None = Field(default=None, description="Bootstrap interval of the male - female lean.")
    spread: Difference | None = Field(
        default=None,
        description="CAS of the counterfactual with the highest CAS minus the lowest (the pair chosen on the "
        "point estimates), with its interval: 'resembles A more than B' is said only when it excludes 0.",
    )
    ranks_first: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Share of bootstrap resamples in which this axis alone has the largest BAV of the run (a tie "
        "for the largest credits none of the tied axes); null without intervals or for a run of one axis.",
    )


class IntersectionView(Record):
    """How axis B's axis-aligned concepts move across axis A's counterfactuals (paper Fig. 5)."""

    axis_a: str = Field(description="Axis whose counterfactuals are compared.")
    axis_b: str = Field(description="Axis whose question's answers are shown.")
    initial: list[ConceptFrequency] = Field(description="Axis-aligned top-K of axis B for the initial images.")
    counterfactuals: dict[str, list[ConceptFrequency]] = Field(
        description="Prompt id of each axis-A counterfactual -> its axis-aligned top-K of axis B."
    )


class Scores(Record):
    """All numbers of a prompt audit."""

    cas_normalization: CasNormalization = Field(description="Histogram normalisation used for CAS.")
    axes: list[AxisScore] = Field(description="Per-axis scores in plan order.")
    top_concepts: dict[str, list[ConceptFrequency]] = Field(description="Prompt id -> top-K concepts of that set.")
    axis_top_concepts: dict[str, dict[str, list[ConceptFrequency]]] = Field(
        description="Prompt id -> axis -> top-K concepts of the answers to that axis's question."
    )
    intersectionality: list[IntersectionView] = Field(default_factory=list, description="Every ordered axis pair.")
    intervals: IntervalSettings | None = Field(
        default=None, description="How the intervals were made; null when the run has none (--bootstrap 0)."
    )
    correction: Correction = Field(
        default="none",
        description="How the axes' T2IAT p-values were adjusted for testing several axes (p_adjusted): "
        "'holm' across the run's axes.",
    )
    alpha: float | None = Field(
        default=None, description="Level below which an adjusted p-value supports a stated direction."
    )
    warnings: list[str] = Field(default_factory=list, description="Warnings raised while scoring.")


class RunRecord(StudyRecord):
    """Everything a prompt audit wrote: config, plan, images, answers, concepts, scores."""

    title: ClassVar[str] = "prompt audit"
    made_by: ClassVar[str] = "auditor prompt"

    kind: Literal["prompt_audit"] = Field(default="prompt_audit", description="What kind of run this is.")
    config: RunConfig = Field(description="What the run was asked to do.")
    plan: AuditPlan | None = Field(default=None, description="Axes, counterfactuals and questions.")
    prompt_sets: list[PromptSet] = Field(default_factory=list, description="Images of every prompt, initial first.")
    answers: dict[str, list[ImageAnswers]] = Field(default_factory=dict, description="Prompt id -> answers per image.")
    concepts: dict[str, SetConcepts] = Field(default_factory=dict, description="Prompt id -> concept histograms.")
    scores: Scores | None = Field(default=None, description="CAS, BAV, top-K and embedding scores.")
    embedder_skipped: str | None = Field(
        default=None,
        description="Why the run has no embedding scores though --embedder none was not given: the default image "
        "embedder could not be loaded (its error).",
    )

    def subject(self) -> str:
        return self.config.prompt
