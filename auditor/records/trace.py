"""The prompt-to-image tracing record (``auditor trace``; Wu et al., J. Imaging 2025).

Triplets of prompts that differ only in the gender word (neutral, feminine, masculine)
share every seed. The record keeps the triplets, the images, the VQA model's object
lists and what the detector found, the per-pair similarities at every stage, and the
scores built from them: the per-stage comparison (the paper's Table 5), object
co-occurrence and bias scores, χ² tests with Holm-adjusted p-values, and the
prompt-image dependency groups. Human words (person, woman, skier, ...) are kept apart
from objects everywhere.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from auditor.core.choices import Group
from auditor.records.base import StudyConfig, StudyRecord
from auditor.records.images import ImageAnswers, PromptSet
from auditor.records.intervals import Interval
from auditor.records.models import ModelRef, PerceptionSettings
from auditor.records.record import Record
from auditor.records.sources import CaptionFile

#: The three prompt sets of a triplet.
TripletSet = Literal["neutral", "feminine", "masculine"]
TRIPLET_SETS: tuple[TripletSet, ...] = ("neutral", "feminine", "masculine")
#: Where the stage of a similarity lies in the generation process (paper Fig. 3), plus object co-occurrence.
Space = Literal["prompt", "denoising", "image", "objects"]
#: Which prompt set the neutral one is closer to, decided by the interval of s(n,m) - s(n,f).
Closer = Literal["masculine", "feminine", "undecided"]


class TraceScoringSettings(Record):
    """Every setting of the scoring that changes a number of a trace run."""

    bootstrap: int = Field(default=1000, ge=1, description="Bootstrap resamples of the triplets behind every interval.")
    ci_level: float = Field(default=0.95, gt=0, lt=1, description="Coverage of every interval.")
    ci_seed: int = Field(default=0, ge=0, description="Seed of the bootstrap's resampling (--ci-seed).")
    alpha: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="A χ² difference is stated only when its Holm-adjusted p-value is below this.",
    )
    min_count: float = Field(
        default=5,
        ge=0,
        description="Objects whose largest co-occurrence C(o, P) over the three sets is below this are left out of "
        "the bias-score ranking (--min-count; the paper: 5 to 20).",
    )
    top_k: int = Field(default=10, ge=1, description="Most masculine and most feminine objects the reports list.")
    min_objects: int = Field(
        default=5, ge=2, description="A χ² test is not applied to a table of fewer objects than this (the paper, §7.1)."
    )
    min_expected: float | None = Field(
        default=None,
        gt=0,
        description="A χ² test is skipped when an expected count falls below this (--min-expected; the textbook rule). "
        "None, the default: tests run on sparse tables too, as the paper's did, with a note where the approximation "
        "is rough. Runs recorded before this default changed hold 5 and keep that rule.",
    )
    correction: Literal["holm"] = Field(
        default="holm", description="How the p-values of the run's χ² tests are adjusted for each other."
    )
    attention_threshold: float = Field(
        default=0.35, description="θ: a word's attention map, min-max normalised, above this is its mask (§6.1)."
    )
    attention_precision: Literal["8-bit"] = Field(
        default="8-bit",
        description="Attention maps are stored and thresholded as 8-bit values (round(255·a)/255), so the content "
        "cache holds them compactly; a pixel within 1/510 of θ may fall on the other side than at full precision.",
    )
    sigma_human: float = Field(default=0.25, description="σ when both the object and the word are human words (§6.2).")
    sigma_other: float = Field(default=0.7, description="σ for every other object-word pair (§6.2).")
    sigma_words: list[str] = Field(
        default_factory=list, description="The human words σ_human applies to (the paper: person, people, woman, ...)."
    )


class TraceConfig(StudyConfig):
    """What a trace run was asked to do; enough to run it again."""

    source: Literal["captions", "professions"] = Field(description="Where the neutral prompts came from.")
    captions: str | None = Field(default=None, description="The caption file, folder or glob, as given.")
    caption_column: str | None = Field(default=None, description="Caption column asked for (None: caption or TEXT).")
    profession_templates: list[str] = Field(
        default_factory=list, description="Sentence templates of the profession set ({profession} slot), in order."
    )
    limit: int | None = Field(default=None, ge=1, description="At most this many triplets (the first ones), or all.")
    object_question: str = Field(description="The VQA question whose answer lists an image's objects.")
    vqa: ModelRef = Field(description="The VQA model that lists the objects.")
    perception: PerceptionSettings = Field(default_factory=PerceptionSettings, description="VQA settings.")
    image_embedders: list[ModelRef] = Field(
        default_factory=list, description="Image embedders whose cosines compare paired images (CLIP, DINOv2, ...)."
    )
    detector: ModelRef | None = Field(default=None, description="Open-vocabulary detector grounding the objects.")
    box_threshold: float | None = Field(default=None, description="The detector's box threshold, as it ran.")
    text_threshold: float | None = Field(default=None, description="Grounding DINO's text threshold, as it ran.")
    segmenter: ModelRef | None = Field(default=None, description="Segmenter turning boxes into object masks.")
    scoring: TraceScoringSettings = Field(default_factory=TraceScoringSettings, description="Scoring settings.")
    show: int = Field(default=4, ge=0, description="Triplets drawn side by side with their attention maps.")


class CaptionSelection(Record):
    """What the neutral-caption filter read and left out (§3.1)."""

    files: list[CaptionFile] = Field(
        default_factory=list, description="The caption files read, in order (none in a record made before)."
    )
    captions: int = Field(ge=0, description="Non-empty captions read.")
    skipped_rows: int = Field(ge=0, description="Rows without a caption.")
    without_person: int = Field(ge=0, description="Captions without 'person', 'persons' or 'people'.")
    with_indicator: int = Field(ge=0, description="Captions with a person word and a word of Table 2.")
    duplicates: int = Field(ge=0, description="Neutral captions repeating an earlier one (case and spacing aside).")
    indicator_counts: dict[str, int] = Field(
        default_factory=dict, description="Table 2 word -> captions left out for containing it, most first."
    )
    neutral: int = Field(ge=0, description="Neutral captions found (triplets before --limit).")


class TraceTriplet(Record):
    """Three prompts that differ only in the gender word, and what was read from them."""

    index: int = Field(ge=0, description="Position of the triplet in the run.")
    source_id: str = Field(description="'caption-<k>' (k-th non-empty caption read) or '<profession>#<template>'.")
    source_file: str | None = Field(
        default=None, description="The caption file the neutral prompt came from (absolute in a record made now)."
    )
    source_row: int | None = Field(default=None, description="Its 0-based data row in that file.")
    profession: str | None = Field(default=None, description="The profession, for the profession set.")
    prompts: dict[TripletSet, str] = Field(description="Set -> prompt.")
    prompt_ids: dict[TripletSet, str] = Field(description="Set -> id of its prompt set of images.")
    nouns: dict[TripletSet, list[str]] = Field(description="Set -> the prompt's noun set (WordNet lemmas, §6.1).")
    traced_words: dict[TripletSet, list[str]] = Field(
        description="Set -> the prompt words whose cross-attention maps were kept (its nouns and subject word)."
    )
    subject_words: dict[TripletSet, str | None] = Field(
        description="Set -> the word whose attention map the triplet pictures show (person/woman/man, the profession)."
    )


class TracedDetection(Record):
    """One object the detector found."""

    label: str = Field(description="The noun looked for (from the image's VQA vocabulary).")
    score: float = Field(description="Detector score.")
    box: list[float] = Field(min_length=4, max_length=4, description="(x0, y0, x1, y1) in pixels.")
    human: bool = Field(description="Whether the label is a human word (counted apart from objects).")


class GroupAssignment(Record):
    """Which prompt-image dependency group one detected object falls in, and why."""

    name: str = Field(description="Object name.")
    group: Group = Field(description="Dependency group.")
    human: bool = Field(description="Whether the name is a human word.")
    guided_by: str | None = Field(
        description="Prompt word whose attention mask covers it most above σ; None: not guided."
    )
    coverage: float | None = Field(description="That coverage, or the best coverage by any word when not guided.")
    sigma: float | None = Field(description="The σ it was compared with.")


class ImageObjects(Record):
    """What was found in one image: its vocabulary, detections, counts and dependency groups."""

    image_index: int = Field(ge=0, description="Index of the image in its prompt set.")
    objects: list[str] = Field(description="Object nouns of the VQA answer, each once.")
    humans: list[str] = Field(description="Human nouns of the VQA answer, each once (kept apart from objects).")
    detections: list[TracedDetection] | None = Field(
        default=None, description="What the detector found of those nouns; None when no detector ran."
    )
    counts: dict[str, int] = Field(
        description="cnt(o, p) of the objects: 1 per noun of the answer, or its boxes when a detector ran."
    )
    human_counts: dict[str, int] = Field(description="The same for human words.")
    groups: list[GroupAssignment] | None = Field(default=None, description="Dependency group of every detection.")
    hidden: list[str] | None = Field(
        default=None, description="Object nouns of the prompt no detection is named after (the hidden group)."
    )
    hidden_humans: list[str] | None = Field(
        default=None, description="Human nouns of the prompt no detection is named after (kept apart from objects)."
    )
    dropped_detections: int = Field(default=0, ge=0, description="Detections left out for a region without pixels.")


class PairSimilarity(Record):
    """s(n,f) and s(n,m) of one triplet at one seed, per measure."""

    triplet: int = Field(ge=0, description="Index of the triplet.")
    image_index: int = Field(ge=0, description="Image index (seed position) shared by the three prompts.")
    neutral_feminine: dict[str, float | None] = Field(
        description="Measure key -> s(neutral, feminine); None: undefined."
    )
    neutral_masculine: dict[str, float | None] = Field(description="Measure key -> s(neutral, masculine).")


class StageSimilarity(Record):
    """The paired comparison at one stage: is the neutral prompt closer to the masculine or the feminine one?"""

    key: str = Field(description="Measure key, as in the pairs.")
    space: Space = Field(description="Prompt, denoising or image space, or object co-occurrence.")
    measure: str = Field(description="What is compared, for people.")
    model: str | None = Field(default=None, description="Spec of the embedder, for image embeddings.")
    mean_neutral_feminine: float | None = Field(description="Mean s(n,f) over the pairs used.")
    mean_neutral_masculine: float | None = Field(description="Mean s(n,m) over the pairs used.")
    difference: float | None = Field(description="Mean over triplets of s(n,m) - s(n,f): > 0 closer to masculine.")
    ci: Interval | None = Field(default=None, description="Percentile bootstrap interval of the difference (triplets).")
    units: int = Field(ge=0, description="Triplets with a usable pair (the bootstrap resamples these).")
    pairs: int = Field(ge=0, description="Pairs used.")
    dropped_pairs: int = Field(ge=0, description="Pairs without a defined similarity (flagged image, no objects).")
    masculine_closer: int = Field(ge=0, description="Triplets whose difference is > 0.")
    feminine_closer: int = Field(ge=0, description="Triplets whose difference is < 0.")
    ties: int = Field(ge=0, description="Triplets whose difference is exactly 0.")
    sign_p: float | None = Field(description="Two-sided sign test over the triplets without ties.")
    swap_p: float | None = Field(
        default=None,
        description="Two-sided swap test of the difference: the share of swaps of triplets' masculine and feminine "
        "prompts (all 2^n when that is at most the bootstrap's resamples, else that many at random) whose difference "
        "is at least as far from 0; None with fewer than two triplets, or scored before the test existed.",
    )
    swap_p_adjusted: float | None = Field(
        default=None,
        description="swap_p Holm-adjusted over the stages that have one (each asks the same question of the same "
        "triplets); None where swap_p is, or scored before the adjustment existed.",
    )
    closer_to: Closer = Field(
        description="'masculine'/'feminine' only when the interval excludes 0 and swap_p_adjusted < 1 - ci_level."
    )
    note: str | None = Field(default=None, description="Why numbers are missing.")


class ObjectCount(Record):
    """C(o, P) of one object (or human word) in the three sets, and its bias score."""

    name: str = Field(description="Object name.")
    neutral: int = Field(ge=0, description="C(o, P_n).")
    feminine: int = Field(ge=0, description="C(o, P_f).")
    masculine: int = Field(ge=0, description="C(o, P_m).")
    bias_score: float | None = Field(
        description="BS(o) = C_m / (C_m + (|P_m|/|P_f|) C_f): 1 masculine, 0 feminine; None when both are 0."
    )
    bias_score_ci: Interval | None = Field(
        default=None, description="Percentile bootstrap interval of BS over triplets (ranked objects only)."
    )
    bias_score_p: float | None = Field(
        default=None,
        description="Two-sided swap test of BS != 0.5 over triplets, as the stages' swap_p (ranked objects only).",
    )
    bias_score_p_adjusted: float | None = Field(
        default=None,
        description="bias_score_p Holm-adjusted over the objects of the same ranking; a lean is named only when the "
        "interval excludes 0.5 and this is below 1 - ci_level (None: not ranked, or scored before the adjustment).",
    )


class ChiSquareResult(Record):
    """One χ² test of an object x prompt-set table, or why it was skipped."""

    scope: str = Field(description="'objects', or the dependency group whose counts were tested.")
    sets: list[TripletSet] = Field(description="The prompt sets compared (the triplet, or a pair).")
    objects: int = Field(ge=0, description="Rows of the table (objects seen in one of the sets).")
    statistic: float | None = Field(description="χ²; None when skipped.")
    dof: int | None = Field(description="Degrees of freedom.")
    p_value: float | None = Field(description="p-value of the test alone; None when skipped.")
    p_adjusted: float | None = Field(description="Holm-adjusted over every test of the run that ran.")
    smallest_expected: float | None = Field(description="Smallest expected count.")
    note: str | None = Field(
        default=None, description="Why the test was skipped, or the caveat on one that ran with small expected counts."
    )


class GroupSummary(Record):
    """One prompt-image dependency group over the run."""

    group: Group = Field(description="The group.")
    objects: list[ObjectCount] = Field(description="C_g(o, P) of every object in the group, most frequent first.")
    humans: list[ObjectCount] = Field(description="The same for human words.")
    images_with: dict[TripletSet, int] = Field(
        description="Set -> usable images with at least one object in the group."
    )
    ranking: list[ObjectCount] = Field(
        description="Objects of the group reaching min_count, most masculine first (bias score)."
    )


class TripletPicture(Record):
    """The three images of one triplet and seed side by side, with the subject word's attention map."""

    triplet: int = Field(ge=0, description="Index of the triplet.")
    image_index: int = Field(ge=0, description="Image index (seed position).")
    file: str = Field(description="PNG relative to the run folder: images on top, attention overlays below.")
    words: dict[TripletSet, str | None] = Field(description="Set -> the word whose map is overlaid.")


class TraceRecord(StudyRecord):
    """Everything a prompt-to-image trace wrote."""

    title: ClassVar[str] = "prompt-to-image trace"
    made_by: ClassVar[str] = "auditor trace"
    SUMMARY_FIELDS: ClassVar[frozenset[str]] = StudyRecord.SUMMARY_FIELDS | {"triplets"}  # the subject counts them

    kind: Literal["trace"] = Field(default="trace", description="What kind of run this is.")
    config: TraceConfig = Field(description="What the run was asked to do.")
    prompt_sets: list[PromptSet] = Field(
        default_factory=list, description="Images of every prompt; ids are '<triplet>/<neutral|feminine|masculine>'."
    )
    selection: CaptionSelection | None = Field(default=None, description="The caption filter's counts (captions only).")
    triplets: list[TraceTriplet] = Field(default_factory=list, description="The triplets, in order.")
    answers: dict[str, list[ImageAnswers]] = Field(
        default_factory=dict, description="Prompt id -> the VQA answers (key 'objects') of its usable images."
    )
    images: dict[str, list[ImageObjects]] = Field(
        default_factory=dict, description="Prompt id -> what was found in each usable image."
    )
    pairs: list[PairSimilarity] = Field(default_factory=list, description="Per triplet and seed, s(n,f) and s(n,m).")
    similarity: list[StageSimilarity] = Field(default_factory=list, description="Per stage, the paired comparison.")
    set_sizes: dict[TripletSet, int] = Field(default_factory=dict, description="Usable images per prompt set (|P|).")
    objects: list[ObjectCount] = Field(default_factory=list, description="C(o, P) of every object, by name.")
    humans: list[ObjectCount] = Field(default_factory=list, description="C(o, P) of every human word, by name.")
    ranking: list[ObjectCount] = Field(
        default_factory=list, description="Objects reaching min_count, most masculine first (bias score)."
    )
    chi_square: list[ChiSquareResult] = Field(
        default_factory=list, description="χ² tests: objects, then each dependency group; triplet then pairs."
    )
    groups: list[GroupSummary] | None = Field(
        default=None, description="Prompt-image dependency groups; None when no detector ran (they need boxes)."
    )
    pictures: list[TripletPicture] = Field(default_factory=list, description="Triplets drawn with attention maps.")
    notes: list[str] = Field(default_factory=list, description="What a reader should know about missing numbers.")

    def subject(self) -> str:
        config = self.config
        where = "professions" if config.source == "professions" else f"captions {config.captions}"
        count = len(self.triplets)
        return f"trace of {count} triplet{'' if count == 1 else 's'} from {where}"

    def models_by_role(self) -> list[tuple[str, ModelRef]]:
        """The model under audit, the VQA model, the image embedders (each chosen by an ``--embedder``), the
        detector and the segmenter."""
        config = self.config
        roles = [("t2i", config.t2i), ("vqa", config.vqa), *(("embedder", ref) for ref in config.image_embedders)]
        optional = [("detector", config.detector), ("segmenter", config.segmenter)]
        return roles + [(role, ref) for role, ref in optional if ref is not None]
