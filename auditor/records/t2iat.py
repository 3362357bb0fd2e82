"""T2IAT records: a test run (``auditor t2iat run``) and the occupation study, and the association result.

:class:`AssociationResult` is T2IAT's number (S, d with its label, permutation p); the
prompt audit records one per two-counterfactual axis too.
"""

from __future__ import annotations

import string
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from auditor.core.choices import EffectLabel, EffectSpread
from auditor.core.text import first_few
from auditor.records.base import StudyConfig, StudyRecord
from auditor.records.images import PromptSet
from auditor.records.intervals import Interval, IntervalSettings
from auditor.records.models import ModelRef
from auditor.records.record import Record


class AssociationResult(Record):
    """A T2IAT differential association with its effect size and permutation p-value."""

    association: float = Field(description="Differential association S (mean Asc of X minus mean Asc of Y).")
    effect_size: float | None = Field(
        description="Cohen's d = S / sd (effect_size_sd says which sd); None when that sd is ~0 relative to the "
        "Asc values or undefined."
    )
    effect_label: EffectLabel = Field(
        description="negligible < 0.2 <= small < 0.5 <= medium < 0.8 <= large (|d|); undefined when d is None."
    )
    effect_size_sd: EffectSpread = Field(
        default="pooled",
        description="The sd d divides by: 'pooled', the groups' pooled sample sd (Cohen); 'combined', the population "
        "sd of every Asc value of X and Y together, as the authors' released notebook (and WEAT) compute it, which "
        "the paper's Table 1 reports.",
    )
    p_value: float = Field(ge=0, le=1, description="Two-sided permutation p-value.")
    exact: bool = Field(description="True when every split was enumerated; False for Monte Carlo.")
    permutations: int = Field(ge=1, description="Splits evaluated (all of them when exact).")
    n_x: int = Field(ge=1, description="Images of concept X (the neutral images in a one-concept test).")
    n_y: int = Field(
        ge=1,
        description="Images of concept Y (in a one-concept test, the two attribute sets' images pooled: the "
        "balanced mix the neutral images are compared with).",
    )
    p_adjusted: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="The p-value Holm-adjusted over the run's other tests: the tested axes of a prompt audit, the "
        "tested occupations of an occupation study (one test is its own adjustment); null in a T2IAT test run, "
        "which has one test.",
    )
    association_ci: Interval | None = Field(default=None, description="Bootstrap interval of S over seeds.")
    effect_size_ci: Interval | None = Field(default=None, description="Bootstrap interval of d over seeds.")


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


class T2IATConfig(StudyConfig):
    """Everything a T2IAT test run was asked to do; enough to rerun it."""

    test: T2IATTestDefinition = Field(description="The test definition, stimuli and templates included.")
    source: str = Field(description="Where the definition came from: 'built-in' or the YAML file's path.")
    embedder: ModelRef = Field(description="The image/text embedder whose cosines define Asc.")
    images_per_prompt: int = Field(ge=1, description="Images generated per prompt (paper: 10).")
    permutations: int = Field(ge=1, description="Monte Carlo permutations when the splits are too many to enumerate.")
    permutation_seed: int = Field(ge=0, description="Seed of the permutation generator.")
    effect_size_sd: EffectSpread = Field(
        default="pooled", description="The sd Cohen's d divides by (--effect-size-sd; see AssociationResult)."
    )
    bootstrap: int = Field(
        default=0,
        ge=0,
        description="Paired-bootstrap resamples over seeds behind the intervals of S and d (--bootstrap); 0 = none "
        "(as runs recorded before these intervals read).",
    )
    ci_seed: int = Field(default=0, ge=0, description="Seed of the bootstrap's resampling (--ci-seed).")


class T2IATRecord(StudyRecord):
    """Everything a T2IAT test run wrote: config, images per group, per-image Asc and the result."""

    title: ClassVar[str] = "T2IAT test"
    made_by: ClassVar[str] = "auditor t2iat run"

    kind: Literal["t2iat_test"] = Field(default="t2iat_test", description="What kind of run this is.")
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
    result: AssociationResult | None = Field(
        default=None, description="S, d with its label, the p-value, and the intervals of S and d."
    )
    intervals: IntervalSettings | None = Field(
        default=None,
        description="How the intervals of S and d were made; null without them (--bootstrap 0, fewer than 4 images per prompt).",
    )

    def subject(self) -> str:
        return f"T2IAT test {self.config.test.name}"


class OccupationsConfig(StudyConfig):
    """What a T2IAT occupation study was asked to do (paper §5.3-5.4)."""

    occupations: list[str] = Field(min_length=1, description="Occupation titles, in order.")
    prompt: str = Field(description="Gender-neutral template with {occupation}, e.g. 'a photo of a {occupation}'.")
    male_prompt: str = Field(description="Masculine template (attribute A), e.g. 'a photo of a male {occupation}'.")
    female_prompt: str = Field(description="Feminine template (attribute B), e.g. 'a photo of a female {occupation}'.")
    embedder: ModelRef = Field(description="The image/text embedder whose cosines define Asc.")
    images_per_prompt: int = Field(ge=1, description="Images per prompt (paper: 100).")
    permutations: int = Field(ge=1, description="Monte Carlo permutations when the splits are too many to enumerate.")
    permutation_seed: int = Field(ge=0, description="Seed of the permutation generator.")
    effect_size_sd: EffectSpread = Field(
        default="pooled", description="The sd Cohen's d divides by (--effect-size-sd; see AssociationResult)."
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


class OccupationsRecord(StudyRecord):
    """Everything a T2IAT occupation study wrote."""

    title: ClassVar[str] = "T2IAT occupation study"
    made_by: ClassVar[str] = "auditor t2iat occupations"

    kind: Literal["t2iat_occupations"] = Field(default="t2iat_occupations", description="What kind of run this is.")
    config: OccupationsConfig = Field(description="What the run was asked to do.")
    prompt_sets: list[PromptSet] = Field(
        default_factory=list, description="Images of every prompt; ids are '<occupation slug>/<neutral|male|female>'."
    )
    occupations: list[OccupationAssociation] = Field(default_factory=list, description="One result per occupation.")

    def subject(self) -> str:
        return f"occupations: {first_few(self.config.occupations)}"
