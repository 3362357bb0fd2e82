"""Bias-amplification records (``auditor amplification run``; Seshadri, Singh and Elazar, 2023).

A run compares, per occupation, G (% women among the model's one-face, confidently
classified images for an occupation prompt) with T (% women among the training examples
selected for the occupation, from their images or, without images, from their captions'
gender words: the *caption proxy*), and A = |G - 50| - |T - 50|. Every share carries its
Wilson interval and every A its bootstrap interval; the summaries carry the paper's
one-sample t-test.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from auditor.core.choices import FaceVerdict, Method
from auditor.core.text import first_few
from auditor.records.base import StudyConfig, StudyRecord
from auditor.records.images import PromptSet
from auditor.records.intervals import Interval
from auditor.records.models import ModelRef
from auditor.records.record import Record
from auditor.records.sources import CaptionFile

#: Where T comes from: the selected examples' images (the paper's method) or their captions' gender words.
TBasis = Literal["images", "caption proxy"]
#: A CLIP zero-shot decision about one image.
GenderDecision = Literal["man", "woman", "ambiguous"]


class FaceDetectorSettings(Record):
    """Which face detector ran the one-face filter, and the filter's size rule."""

    spec: str = Field(description="--face-detector as given: 'haar', 'haar:<cascade>' or 'mediapipe:<model .tflite>'.")
    name: str | None = Field(
        default=None, description="The detector that ran, e.g. 'haar:haarcascade_frontalface_default.xml'."
    )
    settings: dict[str, str | int | float] = Field(
        default_factory=dict,
        description="Settings that change its detections (cascade, scale factor, library version...).",
    )
    min_face_share: float = Field(
        default=0.1, gt=0, le=1, description="A kept face's box is at least this share of the image's height and width."
    )


class ClassifierSettings(Record):
    """The CLIP zero-shot gender classifier: texts, threshold, temperature."""

    classes: list[str] = Field(description="The two classes; the second is the one whose share G and T measure.")
    texts: list[str] = Field(description="The CLIP text of each class, in class order.")
    threshold: float = Field(
        ge=0.5,
        le=1,
        description="P(second class) >= threshold -> second class, <= 1 - threshold -> first, else ambiguous.",
    )
    logit_scale: float | None = Field(
        default=None, description="CLIP's temperature the softmax used (exp of its learned logit scale), once loaded."
    )


class TrainingData(Record):
    """The training sample as read: its files, rows and how captions were labelled."""

    files: list[CaptionFile] = Field(description="Files read, in order.")
    rows: int = Field(ge=0, description="Rows read.")
    skipped: int = Field(ge=0, description="Rows without a caption, skipped.")
    labels: str = Field(
        description="What the caption gender labels are based on (gender words, optionally first names)."
    )
    examples_file: str = Field(
        description="File in the run folder listing every selected example (JSON lines): selection, file, row, caption, "
        "image, label, face verdict, P(woman), decision."
    )


class ImageCounts(Record):
    """What happened to the images of one side: the face filter, then the classifier."""

    images: int = Field(ge=0, description="Images (or examples, for the training side) considered.")
    no_image: int = Field(default=0, ge=0, description="Training examples whose image column is empty.")
    missing: int = Field(default=0, ge=0, description="Training images whose file is missing or unreadable.")
    flagged_nsfw: int = Field(default=0, ge=0, description="Generated images the safety checker blacked out.")
    no_face: int = Field(ge=0, description="Images with no detected face.")
    many_faces: int = Field(ge=0, description="Images with more than one face.")
    small_face: int = Field(ge=0, description="Images whose one face is under the minimum share of height or width.")
    kept: int = Field(ge=0, description="Images with exactly one large enough face: the ones classified.")
    man: int = Field(ge=0, description="Kept images classified man (P(woman) <= 1 - threshold).")
    woman: int = Field(ge=0, description="Kept images classified woman (P(woman) >= threshold).")
    ambiguous: int = Field(ge=0, description="Kept images between the thresholds, left out of G and T.")


class Share(Record):
    """% women on one side with its Wilson 95% interval."""

    women: int = Field(ge=0, description="Images classified woman (captions labelled female, for the caption proxy).")
    total: int = Field(
        ge=0, description="Images classified man or woman (captions labelled male or female, for the caption proxy)."
    )
    percent: float | None = Field(description="100 * women / total; None when total is 0.")
    low: float | None = Field(description="Lower end of the Wilson score interval, in percent.")
    high: float | None = Field(description="Upper end of the Wilson score interval, in percent.")


class ImageGender(Record):
    """The face filter's verdict and the classifier's decision for one generated image."""

    index: int = Field(ge=0, description="Position of the image in its prompt set.")
    face: FaceVerdict | None = Field(description="kept, no_face, many_faces or small_face; None when NSFW-flagged.")
    faces: int = Field(ge=0, description="Faces detected.")
    p_woman: float | None = Field(description="CLIP's P(woman) for a kept image; None otherwise.")
    gender: GenderDecision | None = Field(description="man, woman or ambiguous for a kept image; None otherwise.")


class GeneratedSide(Record):
    """G for one occupation and prompt template."""

    occupation: str = Field(description="Occupation.")
    template: int = Field(ge=1, description="Number of the template in the config's list (1 = the first).")
    prompt_id: str = Field(description="Prompt set id of the images.")
    prompt: str = Field(description="The prompt given to the model.")
    images: list[ImageGender] = Field(default_factory=list, description="Every image's face verdict and decision.")
    counts: ImageCounts = Field(description="Face-filter and classifier counts.")
    share: Share = Field(description="G: % women among the images classified man or woman.")


class CaptionLabels(Record):
    """How many selected captions mention only male, only female, both or no gender indicators."""

    male: int = Field(ge=0, description="Captions with male indicators only.")
    female: int = Field(ge=0, description="Captions with female indicators only.")
    both: int = Field(ge=0, description="Captions with male and female indicators.")
    none: int = Field(ge=0, description="Captions without gender indicators.")


class TrainingSide(Record):
    """T for one occupation and selection method (and prompt, for the nn methods)."""

    occupation: str = Field(description="Occupation.")
    method: Method = Field(description="keyword, nn, no-indicator or nn+no-indicator.")
    template: int | None = Field(description="Template whose prompt the nn methods ranked by; None for the others.")
    prompt: str | None = Field(description="That prompt; None for keyword and no-indicator.")
    matched: int = Field(
        ge=0, description="Captions in the sample that mention the occupation (every method's candidates)."
    )
    selected: int = Field(ge=0, description="Captions the method selected.")
    labels: CaptionLabels = Field(description="Gender labels of the selected captions.")
    basis: TBasis = Field(description="'images' (the selected examples' images) or 'caption proxy' (their captions).")
    images: ImageCounts | None = Field(
        description="Face-filter and classifier counts of the images; None for the caption proxy."
    )
    share: Share = Field(
        description="T: % women, from the images, or for the caption proxy female / (male + female) captions."
    )
    examples: list[str] = Field(default_factory=list, description="The first few selected captions, for the report.")


class OccupationAmplification(Record):
    """A for one occupation, template and method, with G and T beside it."""

    occupation: str = Field(description="Occupation.")
    method: Method = Field(description="Selection method behind T.")
    template: int = Field(ge=1, description="Template behind G (and behind T for the nn methods).")
    generated: Share = Field(description="G with its Wilson interval.")
    training: Share = Field(description="T with its Wilson interval.")
    basis: TBasis = Field(description="Where T comes from.")
    amplification: float | None = Field(
        description="A = |G - 50| - |T - 50| in percentage points; None without G or T."
    )
    amplification_ci: Interval | None = Field(
        default=None, description="Percentile bootstrap interval of A (both sides resampled as binomials)."
    )
    flipped: bool | None = Field(description="G and T lean to opposite sides of 50; None without G or T.")
    note: str | None = Field(default=None, description="Why A is missing.")


class AmplificationSummary(Record):
    """Mean A over occupations for one method and template (or over every template): the paper's Table 4."""

    method: Method = Field(description="Selection method.")
    template: int | None = Field(
        description="Template number; None for the average over every template (the paper averages over its four)."
    )
    basis: TBasis = Field(description="Where T comes from.")
    occupations: int = Field(ge=0, description="Occupations averaged.")
    excluded: list[str] = Field(
        default_factory=list,
        description="Occupations left out because they flip on every template of the run (--exclude-flips).",
    )
    flipped: list[str] = Field(
        default_factory=list,
        description="Occupations whose direction flips: on this template, or on every template for the average.",
    )
    missing: list[str] = Field(default_factory=list, description="Occupations without A (no G or no T), not averaged.")
    mean: float | None = Field(description="Mean A in percentage points; None when no occupation is left.")
    mean_ci: Interval | None = Field(
        default=None,
        description="Percentile bootstrap interval of the mean over occupations; None with fewer than two.",
    )
    t_statistic: float | None = Field(
        description="One-sample t statistic for H0: E[A] = 0; None with fewer than two A or no spread."
    )
    p_value: float | None = Field(description="Its two-sided p-value.")
    p_adjusted: float | None = Field(
        default=None,
        description="The p-value Holm-adjusted across the selection methods of the same template (or of the "
        "average): the one a direction is claimed on. None without a p-value.",
    )

    @field_validator("mean_ci")
    @classmethod
    def _no_interval_over_one_occupation(cls, mean_ci: Interval | None, info: ValidationInfo) -> Interval | None:
        """A record written before one occupation's mean went without an interval stored a zero-width one, which
        would back any claim: it loads without it."""
        return mean_ci if info.data.get("occupations", 0) > 1 else None


class AmplificationConfig(StudyConfig):
    """Everything an amplification run was asked to do; enough to rerun it."""

    embedder: ModelRef = Field(description="The CLIP model of the zero-shot gender classifier.")
    images_per_prompt: int = Field(ge=1, description="Images generated per occupation and template (paper: 500).")
    text_embedder: ModelRef | None = Field(
        default=None, description="Sentence embedder of the nn methods (MiniLM in the paper); None without them."
    )
    occupations: list[str] = Field(min_length=1, description="Occupations, in order.")
    occupations_source: str = Field(description="Where they came from: the built-in list, a file, or the command line.")
    templates: list[str] = Field(
        min_length=1, description="Prompt templates with {occupation} (and {article}), in order."
    )
    methods: list[Method] = Field(min_length=1, description="Training caption selection methods.")
    captions: str = Field(description="The training sample: a file, folder or glob, as given.")
    caption_column: str | None = Field(description="--caption-column; None = 'caption' or 'TEXT'.")
    image_column: str | None = Field(description="--image-column; None = no images, T is the caption proxy.")
    per_occupation: int = Field(ge=1, description="Captions selected per occupation and method (paper: 500).")
    sample_seed: int = Field(ge=0, description="Seed of the keyword method's sample (--sample-seed).")
    names: bool = Field(description="Whether first names (gender-guesser) count as gender indicators (--names).")
    face_detector: FaceDetectorSettings = Field(description="The one-face filter.")
    classifier: ClassifierSettings = Field(description="The zero-shot gender classifier.")
    exclude_flips: bool = Field(
        description="Whether occupations that flip on every template are left out of the means."
    )
    bootstrap: int = Field(ge=1, description="Bootstrap resamples behind every interval of A and of its mean.")
    ci_level: float = Field(default=0.95, gt=0, lt=1, description="Coverage of every interval.")
    ci_seed: int = Field(ge=0, description="Seed of the bootstrap resampling.")


class AmplificationRecord(StudyRecord):
    """Everything a bias-amplification run wrote."""

    title: ClassVar[str] = "bias amplification study"
    made_by: ClassVar[str] = "auditor amplification run"

    kind: Literal["amplification"] = Field(default="amplification", description="What kind of run this is.")
    config: AmplificationConfig = Field(description="What the run was asked to do.")
    prompt_sets: list[PromptSet] = Field(
        default_factory=list, description="Generated images; ids are '<occupation slug>/p<template number>'."
    )
    training_data: TrainingData | None = Field(default=None, description="The training sample as read.")
    generated: list[GeneratedSide] = Field(default_factory=list, description="G per occupation and template.")
    training: list[TrainingSide] = Field(default_factory=list, description="T per occupation and selection.")
    amplification: list[OccupationAmplification] = Field(
        default_factory=list, description="A per occupation, template and method."
    )
    summary: list[AmplificationSummary] = Field(
        default_factory=list, description="Mean A per method and template, and per method over every template."
    )
    warnings: list[str] = Field(default_factory=list, description="What may mislead a reader of these numbers.")

    def subject(self) -> str:
        return f"amplification: {first_few(self.config.occupations)}"

    @property
    def basis(self) -> TBasis:
        """Where this run's T comes from."""
        return "caption proxy" if self.config.image_column is None else "images"
