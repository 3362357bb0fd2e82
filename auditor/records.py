"""Typed run records: the one source of truth for what a run wrote.

Every model forbids unknown fields, so a record from a newer or corrupted run fails
loudly on load instead of being half-understood. Reports, ``score`` and ``compare``
read these records, never live state. ``schemas/`` holds the JSON Schema generated
from the top-level models here (``auditor schemas``).
"""

from __future__ import annotations

import string
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SCHEMA_VERSION = "1"

RunStatus = Literal["running", "completed", "failed", "interrupted"]
Stage = Literal["plan", "generate", "perceive", "embed", "score", "report"]
CasNormalization = Literal["distribution", "frequency"]
EffectLabel = Literal["negligible", "small", "medium", "large", "undefined"]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class Record(BaseModel):
    """Base for every record model: strict on unknown fields, validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# --------------------------------------------------------------------------- models


class ModelRef(Record):
    """Which model produced a stage's output, precisely enough to get it again."""

    spec: str = Field(description="Backend spec as given, e.g. 'diffusers:stabilityai/stable-diffusion-2-1'.")
    backend: str = Field(description="Registry prefix of the backend that ran, e.g. 'diffusers', 'blip2', 'clip'.")
    model_id: str | None = Field(default=None, description="Hub id or local path of the weights, when there are any.")
    revision: str | None = Field(default=None, description="Hub commit of the weights when known.")
    fingerprint: str | None = Field(
        default=None,
        description="Content identity of the weights, the model part of cache keys: the hub commit for a hub "
        "snapshot, sha256 over every config and weight file's contents for a local folder.",
    )
    dtype: str | None = Field(default=None, description="Torch dtype the model ran in, e.g. 'float16'.")
    device: str | None = Field(default=None, description="Device the model ran on, e.g. 'cuda:0' or 'cpu'.")
    service: str | None = Field(
        default=None,
        description="Base URL of the API that served a hosted model (openai: specs), without credentials or query.",
    )
    partial_weights: list[str] = Field(
        default_factory=list,
        description="Tensors the checkpoint lacked, had in excess or had in another shape ('missing unet.x.weight'), "
        "loaded anyway because the run allowed partial weights; those layers were randomly initialised. "
        "Empty for a complete checkpoint.",
    )


class GenerationSettings(Record):
    """Text-to-image settings that change the images (and so every number after them)."""

    steps: int | None = Field(default=None, description="Denoising steps; None = the pipeline's default.")
    guidance_scale: float | None = Field(default=None, description="Classifier-free guidance scale; None = default.")
    scheduler: str | None = Field(default=None, description="Scheduler class name used, e.g. 'DPMSolverMultistepScheduler'.")
    width: int | None = Field(default=None, description="Image width in pixels; None = the model's default.")
    height: int | None = Field(default=None, description="Image height in pixels; None = the model's default.")
    negative_prompt: str | None = Field(default=None, description="Negative prompt given to every generation.")
    batch_size: int = Field(default=4, ge=1, description="Images generated per forward pass (does not change images).")


class PerceptionSettings(Record):
    """VQA settings: greedy decoding with a short answer budget."""

    max_new_tokens: int = Field(default=20, ge=1, description="Answer length limit in tokens.")
    caption_max_new_tokens: int = Field(default=40, ge=1, description="Caption length limit in tokens.")
    batch_size: int = Field(default=16, ge=1, description="Image-question pairs per forward pass.")
    temperature: float = Field(
        default=0.0,
        ge=0,
        description="Sampling temperature sent to an API VQA model (openai:); local models always decode greedily, as at 0.",
    )
    instructions: str | None = Field(
        default=None,
        description="System message sent with every short-answer question to an API VQA model (openai:); "
        "None = auditor's default, recorded as sent once the model is loaded; unused by local models.",
    )
    caption_instructions: str | None = Field(
        default=None,
        description="System message sent with the caption question to an API VQA model (openai:); "
        "None = auditor's default, recorded as sent once the model is loaded; unused by local models.",
    )
    concurrency: int = Field(
        default=8, ge=1, description="Requests in flight at once to an API VQA model (openai:); does not change answers."
    )


class ScoringSettings(Record):
    """Settings of the concept and score computation."""

    cas_normalization: CasNormalization = Field(
        default="distribution",
        description="'distribution': histograms rescaled to sum 1 before the IoU (authors' code); "
        "'frequency': per-image frequencies as in the paper's Eq. 1-3.",
    )
    min_frequency: float = Field(default=0.01, ge=0, description="Concepts with a lower per-image frequency are dropped.")
    top_k: int = Field(default=10, ge=1, description="How many concepts the top-K lists keep.")
    include_captions: bool = Field(default=True, description="Whether captions count towards the concept histograms.")
    permutations: int = Field(default=10_000, ge=1, description="Monte Carlo permutations for T2IAT p-values.")
    permutation_seed: int = Field(default=0, description="Seed of the permutation generator.")


class RunConfig(Record):
    """Everything a prompt audit was asked to do; enough to rerun it."""

    prompt: str = Field(description="The initial prompt P being audited.")
    llm: str = Field(description="Planner spec, e.g. 'openai:gpt-4o-mini', 'langchain:anthropic:...', 'offline'.")
    llm_temperature: float | None = Field(default=None, description="Sampling temperature sent to the LLM.")
    llm_seed: int | None = Field(default=None, description="Seed sent to the LLM when it accepts one.")
    llm_retries: int = Field(default=2, ge=0, description="Repair turns allowed when the plan is invalid.")
    max_axes: int | None = Field(default=None, ge=1, description="Cap on the number of axes kept from the plan.")
    max_counterfactuals: int | None = Field(default=None, ge=2, description="Cap on counterfactuals per axis.")
    t2i: ModelRef = Field(description="The text-to-image model under audit.")
    vqa: ModelRef = Field(description="The vision-language model that answers questions and captions.")
    embedder: ModelRef | None = Field(default=None, description="Image/text embedder for embedding scores, if any.")
    images_per_prompt: int = Field(ge=1, description="Images generated per prompt (paper: 48).")
    seeds: list[int] = Field(description="Seed of image i, shared by every prompt set (paired seeds).")
    generation: GenerationSettings = Field(default_factory=GenerationSettings, description="Generation settings.")
    perception: PerceptionSettings = Field(default_factory=PerceptionSettings, description="VQA settings.")
    scoring: ScoringSettings = Field(default_factory=ScoringSettings, description="Scoring settings.")
    allow_partial_weights: bool = Field(
        default=False,
        description="Whether checkpoints that do not match their model were loaded anyway (--allow-partial-weights); "
        "each model's partial_weights lists what was missing.",
    )


# --------------------------------------------------------------------------- plan


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
    transcript: list[ChatMessage] = Field(default_factory=list, description="The whole planning conversation.")

    def prompt_sets(self) -> list[tuple[str, str, str | None]]:
        """``(prompt_id, prompt, axis)`` of the initial prompt and then every counterfactual, in plan order."""
        sets = [(INITIAL_PROMPT_ID, self.prompt, None)]
        for axis in self.axes:
            sets += [(counterfactual_id(axis.name, k), cf, axis.name) for k, cf in enumerate(axis.counterfactuals)]
        return sets


# --------------------------------------------------------------------------- images and answers


class GeneratedImage(Record):
    """One image of a prompt set."""

    index: int = Field(ge=0, description="Position i in the set; image i of every set shares seed i.")
    file: str = Field(description="Path of the image relative to the run folder.")
    seed: int | None = Field(default=None, description="Generation seed; None when the backend takes none.")
    sha256: str = Field(description="sha256 of the image file's bytes.")
    flagged_nsfw: bool = Field(
        default=False, description="The safety checker blacked the image out; it is left out of the concepts."
    )


class PromptSet(Record):
    """The images of one prompt: the initial prompt or one counterfactual."""

    prompt_id: str = Field(description="'initial' or '<axis>/<k>' for the k-th counterfactual of an axis.")
    prompt: str = Field(description="The prompt text given to the model.")
    axis: str | None = Field(default=None, description="Axis of a counterfactual; None for the initial prompt.")
    images: list[GeneratedImage] = Field(default_factory=list, description="Images in seed order.")


class ImageAnswers(Record):
    """What the VQA model said about one image."""

    image_index: int = Field(ge=0, description="Index of the image in its prompt set.")
    answers: dict[str, str] = Field(description="Axis name -> answer to that axis's question.")
    caption: str | None = Field(default=None, description="Answer to the caption question.")


# --------------------------------------------------------------------------- concepts and scores


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


class AssociationResult(Record):
    """A T2IAT differential association with its effect size and permutation p-value."""

    association: float = Field(description="Differential association S (mean Asc of X minus mean Asc of Y).")
    effect_size: float | None = Field(
        description="Cohen's d = S / pooled sd; None when the pooled sd is ~0 relative to the Asc values or undefined."
    )
    effect_label: EffectLabel = Field(
        description="negligible < 0.2 <= small < 0.5 <= medium < 0.8 <= large (|d|); undefined when d is None."
    )
    p_value: float = Field(ge=0, le=1, description="Two-sided permutation p-value.")
    exact: bool = Field(description="True when every split was enumerated; False for Monte Carlo.")
    permutations: int = Field(ge=1, description="Splits evaluated (all of them when exact).")
    n_x: int = Field(ge=1, description="Images of concept X.")
    n_y: int = Field(ge=1, description="Images of concept Y.")

    @model_validator(mode="before")
    @classmethod
    def _undefined_d_has_no_size(cls, data: Any) -> Any:
        """Records written before "undefined" existed labelled a null d "large" or "negligible"."""
        if isinstance(data, dict) and "effect_size" in data and data["effect_size"] is None:
            return {**data, "effect_label": "undefined"}
        return data


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
        description="Authors' released-code variant: normalised mean absolute deviation of the non-null CAS "
        "values; null when BAV is.",
    )
    relative_bav: float | None = Field(
        ge=0,
        le=1,
        description="This axis's BAV divided by the largest BAV of the prompt; null when the axis has no BAV.",
    )
    lean: float | None = Field(
        default=None,
        description="CAS(male counterfactual) - CAS(female counterfactual), when the axis has both and both "
        "have a CAS.",
    )
    association: AssociationResult | None = Field(
        default=None, description="T2IAT association of the initial images with the axis's two counterfactuals."
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
    warnings: list[str] = Field(default_factory=list, description="Warnings raised while scoring.")


# --------------------------------------------------------------------------- run bookkeeping


class StageTiming(Record):
    """Wall time and cache use of one stage."""

    stage: Stage = Field(description="Pipeline stage.")
    seconds: float = Field(ge=0, description="Wall-clock seconds spent in the stage.")
    computed: int = Field(default=0, ge=0, description="Items computed in this run.")
    cached: int = Field(default=0, ge=0, description="Items taken from the content cache.")


class RunError(Record):
    """Why a run stopped."""

    stage: Stage | None = Field(default=None, description="Stage that failed, when known.")
    type: str = Field(description="Exception class name.")
    message: str = Field(description="Error message (never contains API keys).")


class Environment(Record):
    """Software and hardware the run used."""

    auditor_version: str = Field(description="Version of auditor.")
    python: str = Field(description="Python version.")
    platform: str = Field(description="OS and machine.")
    packages: dict[str, str] = Field(default_factory=dict, description="Versions of the libraries that matter.")
    cuda: str | None = Field(default=None, description="CUDA version torch was built with, if any.")
    gpu: str | None = Field(default=None, description="GPU name when one was used.")


class RunRecord(Record):
    """Everything a prompt audit wrote: config, plan, images, answers, concepts, scores."""

    schema_version: Literal["1"] = Field(default=SCHEMA_VERSION, description="Version of this schema.")
    kind: Literal["prompt_audit"] = Field(default="prompt_audit", description="What kind of run this is.")
    run_id: str = Field(description="Run folder name under the runs directory.")
    status: RunStatus = Field(default="running", description="Where the run stands.")
    created_at: datetime = Field(default_factory=utc_now, description="When the run started (UTC).")
    updated_at: datetime = Field(default_factory=utc_now, description="When the record was last written (UTC).")
    config: RunConfig = Field(description="What the run was asked to do.")
    plan: AuditPlan | None = Field(default=None, description="Axes, counterfactuals and questions.")
    prompt_sets: list[PromptSet] = Field(default_factory=list, description="Images of every prompt, initial first.")
    answers: dict[str, list[ImageAnswers]] = Field(default_factory=dict, description="Prompt id -> answers per image.")
    concepts: dict[str, SetConcepts] = Field(default_factory=dict, description="Prompt id -> concept histograms.")
    scores: Scores | None = Field(default=None, description="CAS, BAV, top-K and embedding scores.")
    timings: list[StageTiming] = Field(default_factory=list, description="Time spent per stage.")
    errors: list[RunError] = Field(default_factory=list, description="Errors that ended or marred the run.")
    environment: Environment = Field(description="Software and hardware versions.")


# --------------------------------------------------------------------------- T2IAT

T2IATGroup = Literal["X", "Y", "XA", "XB", "YA", "YB"]
T2IAT_GROUPS: tuple[T2IATGroup, ...] = ("X", "Y", "XA", "XB", "YA", "YB")


def _template_fields(template: str) -> set[str]:
    """Placeholder names of a ``str.format`` template; conversions and format specs are refused."""
    fields = set()
    try:
        for _, field, spec, conversion in string.Formatter().parse(template):
            if field is None:
                continue
            if not field or spec or conversion:
                raise ValueError(f"placeholder {{{field}}} must be a plain name such as {{concept}}")
            fields.add(field)
    except ValueError as exc:
        raise ValueError(f"bad template {template!r}: {exc}") from None
    return fields


class T2IATStimuli(Record):
    """A concept or attribute of a T2IAT test with its verbal stimuli (paper Table 3)."""

    name: str = Field(min_length=1, description="Display name, e.g. 'Flowers' or 'Pleasant'.")
    stimuli: list[str] = Field(min_length=1, description="Words or phrases put into the prompt templates, in order.")

    @field_validator("stimuli")
    @classmethod
    def _distinct_words(cls, stimuli: list[str]) -> list[str]:
        cleaned = [word.strip() for word in stimuli]
        if any(not word for word in cleaned):
            raise ValueError("stimuli must not be empty strings")
        duplicates = sorted({word for word in cleaned if cleaned.count(word) > 1})
        if duplicates:
            raise ValueError(f"repeated stimuli: {', '.join(duplicates)}")
        return cleaned


class T2IATTestDefinition(Record):
    """A T2IAT test: concepts X, Y, attributes A, B and the prompt templates (built in or custom YAML).

    The neutral prompts fill ``prompt`` with each stimulus of a concept; the
    attribute-guided prompts fill ``attribute_prompt`` with a concept stimulus and an
    attribute word.
    """

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="Short id, e.g. 'flowers-insects'.")
    title: str | None = Field(default=None, description="Human-readable title, e.g. 'Flowers vs. Insects'.")
    kind: Literal["valence", "stereotype", "other"] = Field(
        default="other", description="Valence test (pleasant/unpleasant), stereotype test, or something else."
    )
    prompt: str = Field(description="Neutral template with one {concept} placeholder, e.g. 'a photo of {concept}'.")
    attribute_prompt: str = Field(
        description="Attribute-guided template with {concept} and {attribute}, e.g. 'a {attribute} studying {concept}'."
    )
    x: T2IATStimuli = Field(description="Target concept X (e.g. Flowers, Science).")
    y: T2IATStimuli = Field(description="Target concept Y (e.g. Insects, Arts).")
    a: T2IATStimuli = Field(description="Attribute A (e.g. Pleasant, Male); S > 0 means X leans to A more than Y does.")
    b: T2IATStimuli = Field(description="Attribute B (e.g. Unpleasant, Female).")

    @field_validator("prompt")
    @classmethod
    def _neutral_template(cls, template: str) -> str:
        if _template_fields(template) != {"concept"}:
            raise ValueError(f"{template!r} must contain {{concept}} and no other placeholder")
        return template

    @field_validator("attribute_prompt")
    @classmethod
    def _attribute_template(cls, template: str) -> str:
        if _template_fields(template) != {"concept", "attribute"}:
            raise ValueError(f"{template!r} must contain {{concept}} and {{attribute}} and no other placeholder")
        return template


class T2IATConfig(Record):
    """Everything a T2IAT test run was asked to do; enough to rerun it."""

    test: T2IATTestDefinition = Field(description="The test definition, stimuli and templates included.")
    source: str = Field(description="Where the definition came from: 'built-in' or the YAML file's path.")
    t2i: ModelRef = Field(description="The text-to-image model under test.")
    embedder: ModelRef = Field(description="The image/text embedder whose cosines define Asc.")
    images_per_prompt: int = Field(ge=1, description="Images generated per prompt (paper: 10).")
    seeds: list[int] = Field(description="Seed of image i, shared by every prompt (paired seeds).")
    generation: GenerationSettings = Field(default_factory=GenerationSettings, description="Generation settings.")
    permutations: int = Field(ge=1, description="Monte Carlo permutations when the splits are too many to enumerate.")
    permutation_seed: int = Field(description="Seed of the permutation generator.")
    allow_partial_weights: bool = Field(
        default=False,
        description="Whether checkpoints that do not match their model were loaded anyway (--allow-partial-weights); "
        "each model's partial_weights lists what was missing.",
    )


class T2IATRecord(Record):
    """Everything a T2IAT test run wrote: config, images per group, per-image Asc and the result."""

    schema_version: Literal["1"] = Field(default=SCHEMA_VERSION, description="Version of this schema.")
    kind: Literal["t2iat_test"] = Field(default="t2iat_test", description="What kind of run this is.")
    run_id: str = Field(description="Run folder name under the runs directory.")
    status: RunStatus = Field(default="running", description="Where the run stands.")
    created_at: datetime = Field(default_factory=utc_now, description="When the run started (UTC).")
    updated_at: datetime = Field(default_factory=utc_now, description="When the record was last written (UTC).")
    config: T2IATConfig = Field(description="What the run was asked to do.")
    prompt_sets: list[PromptSet] = Field(
        default_factory=list, description="Images of every prompt; ids are '<group>/<k>', e.g. 'XA/3'."
    )
    groups: dict[T2IATGroup, list[str]] = Field(
        default_factory=dict, description="Group (X, Y, XA, XB, YA, YB) -> ids of its prompt sets, in order."
    )
    association_scores: dict[Literal["X", "Y"], list[float]] = Field(
        default_factory=dict,
        description="Asc of every usable neutral image of X and of Y, in prompt-set then image order (Eq. 2).",
    )
    result: AssociationResult | None = Field(default=None, description="S, d with its label, and the p-value.")
    timings: list[StageTiming] = Field(default_factory=list, description="Time spent per stage.")
    errors: list[RunError] = Field(default_factory=list, description="Errors that ended or marred the run.")
    environment: Environment = Field(description="Software and hardware versions.")


class OccupationsConfig(Record):
    """What a T2IAT occupation study was asked to do (paper §5.3-5.4)."""

    occupations: list[str] = Field(min_length=1, description="Occupation titles, in order.")
    prompt: str = Field(description="Gender-neutral template with {occupation}, e.g. 'a photo of a {occupation}'.")
    male_prompt: str = Field(description="Masculine template (attribute A), e.g. 'a photo of a male {occupation}'.")
    female_prompt: str = Field(description="Feminine template (attribute B), e.g. 'a photo of a female {occupation}'.")
    t2i: ModelRef = Field(description="The text-to-image model under test.")
    embedder: ModelRef = Field(description="The image/text embedder whose cosines define Asc.")
    images_per_prompt: int = Field(ge=1, description="Images per prompt (paper: 100).")
    seeds: list[int] = Field(description="Seed of image i, shared by every prompt (paired seeds).")
    generation: GenerationSettings = Field(default_factory=GenerationSettings, description="Generation settings.")
    permutations: int = Field(ge=1, description="Monte Carlo permutations when the splits are too many to enumerate.")
    permutation_seed: int = Field(description="Seed of the permutation generator.")
    allow_partial_weights: bool = Field(
        default=False,
        description="Whether checkpoints that do not match their model were loaded anyway (--allow-partial-weights); "
        "each model's partial_weights lists what was missing.",
    )

    @field_validator("prompt", "male_prompt", "female_prompt")
    @classmethod
    def _occupation_template(cls, template: str) -> str:
        if _template_fields(template) != {"occupation"}:
            raise ValueError(f"{template!r} must contain {{occupation}} and no other placeholder")
        return template


class OccupationAssociation(Record):
    """Gender association of one occupation: image distribution (Fig. 3) and text vs image (Fig. 4)."""

    occupation: str = Field(description="Occupation title.")
    prompt_ids: dict[Literal["neutral", "male", "female"], str] = Field(
        description="Prompt set id of the neutral, masculine and feminine prompts."
    )
    image_scores: list[float] = Field(
        description="Asc of every usable neutral image against the male and female images (> 0: closer to male)."
    )
    image_association: float | None = Field(description="Mean of image_scores; None when no image was usable.")
    quartiles: list[float] = Field(
        default_factory=list,
        description="25th, 50th and 75th percentiles of image_scores (numpy's linear interpolation); Fig. 3.",
    )
    text_association: float = Field(
        description="The same Asc on text embeddings: cos(neutral, male prompt) - cos(neutral, female prompt)."
    )
    amplification: float | None = Field(
        description="image_association - text_association: the arrow of Fig. 4 (> 0: images lean more male)."
    )
    test: AssociationResult | None = Field(
        default=None,
        description="Neutral images' Asc against the pooled male+female images' own (leave-one-out) Asc.",
    )
    warnings: list[str] = Field(default_factory=list, description="Why a number is missing or may mislead.")


class OccupationsRecord(Record):
    """Everything a T2IAT occupation study wrote."""

    schema_version: Literal["1"] = Field(default=SCHEMA_VERSION, description="Version of this schema.")
    kind: Literal["t2iat_occupations"] = Field(default="t2iat_occupations", description="What kind of run this is.")
    run_id: str = Field(description="Run folder name under the runs directory.")
    status: RunStatus = Field(default="running", description="Where the run stands.")
    created_at: datetime = Field(default_factory=utc_now, description="When the run started (UTC).")
    updated_at: datetime = Field(default_factory=utc_now, description="When the record was last written (UTC).")
    config: OccupationsConfig = Field(description="What the run was asked to do.")
    prompt_sets: list[PromptSet] = Field(
        default_factory=list, description="Images of every prompt; ids are '<occupation slug>/<neutral|male|female>'."
    )
    occupations: list[OccupationAssociation] = Field(default_factory=list, description="One result per occupation.")
    timings: list[StageTiming] = Field(default_factory=list, description="Time spent per stage.")
    errors: list[RunError] = Field(default_factory=list, description="Errors that ended or marred the run.")
    environment: Environment = Field(description="Software and hardware versions.")


#: Any run record, told apart by its ``kind`` field.
AnyRecord = Annotated[RunRecord | T2IATRecord | OccupationsRecord, Field(discriminator="kind")]
