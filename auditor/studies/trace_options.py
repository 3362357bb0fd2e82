"""What ``auditor trace`` is asked to do: its options, their checks, and the run's config built from them.

Everything here runs before a run folder is created or a model loaded, so bad input is
one line and leaves nothing behind (:mod:`auditor.studies.trace` runs the study).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import ValidationError

from auditor.core.defaults import DEFAULT_T2I, DEFAULT_VQA
from auditor.core.errors import AuditorError
from auditor.core.store import describe_validation_error
from auditor.executors import DEFAULT_EXECUTOR, check_executor, check_placement
from auditor.records import GenerationSettings, PerceptionSettings, TraceConfig, TraceScoringSettings
from auditor.studies.run import check_images_and_seeds, paired_seeds, spec_ref

#: Image embedders by default: the paper's CLIP ViT-B/32, and the small DINOv2 (the paper used DINO ViT-S/16,
#: which ``hf-vision:facebook/dino-vits16`` loads).
DEFAULT_TRACE_EMBEDDERS = ("clip:openai/clip-vit-base-patch32", "dinov2:facebook/dinov2-small")
#: Seeds per triplet by default: the paper made 5 images per prompt for GCC and the professions, 1 otherwise.
PROFESSION_SEEDS, CAPTION_SEEDS = 5, 1
#: VQA answer budget: an object list needs more tokens than a short answer.
OBJECT_ANSWER_TOKENS = 40


@dataclass
class TraceOptions:
    """What ``auditor trace`` was asked to do (checked by :meth:`validate` before anything is created)."""

    captions: str | None = None
    professions: bool = False
    caption_column: str | None = None
    t2i: str = DEFAULT_T2I
    vqa: str = DEFAULT_VQA
    embedders: list[str] = field(default_factory=lambda: list(DEFAULT_TRACE_EMBEDDERS))
    detector: str | None = None
    box_threshold: float | None = None
    text_threshold: float | None = None
    segmenter: str | None = None
    seeds_per_triplet: int | None = None
    seeds: list[int] | None = None
    limit: int | None = None
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    perception: PerceptionSettings = field(
        default_factory=lambda: PerceptionSettings(max_new_tokens=OBJECT_ANSWER_TOKENS)
    )
    scoring: TraceScoringSettings = field(default_factory=TraceScoringSettings)
    show: int = 4
    device: str | None = None
    allow_partial_weights: bool = False
    executor: str = DEFAULT_EXECUTOR

    @property
    def seed_count(self) -> int:
        """Seeds per triplet: as given, else 5 for the professions and 1 for captions (the paper's)."""
        if self.seeds_per_triplet is not None:
            return self.seeds_per_triplet
        return PROFESSION_SEEDS if self.professions else CAPTION_SEEDS

    def validate(self) -> None:
        """Reject bad input before a run folder is created or a model loaded."""
        from auditor.generation.registry import preflight_t2i
        from auditor.perception.registry import DETECTORS, EMBEDDERS, SEGMENTERS, VQA_BACKENDS

        if (self.captions is None) == (not self.professions):
            raise AuditorError("give a caption file or --professions (one of them)")
        check_images_and_seeds(self.seed_count, self.seeds, "--seeds", "seed", "per triplet (--seeds)")
        if self.limit is not None and self.limit < 1:
            raise AuditorError(f"--limit must be at least 1 (got {self.limit})")
        if self.show < 0:
            raise AuditorError(f"--show must be 0 or more (got {self.show})")
        check_placement(self.executor, self.device, check_trace_executor)
        check_trace_t2i(self.t2i)
        for spec in self.embedders:
            EMBEDDERS.check(spec)
        if len(set(self.embedders)) != len(self.embedders):
            raise AuditorError("--embedder names the same embedder twice")
        for name, value in (("--box-threshold", self.box_threshold), ("--text-threshold", self.text_threshold)):
            if value is not None and not 0.0 <= value <= 1.0:
                raise AuditorError(f"{name} must be between 0 and 1 (got {value})")
        if self.detector is None:
            if self.segmenter is not None:
                raise AuditorError("--segmenter segments the detector's boxes: give --detector too")
            if self.box_threshold is not None or self.text_threshold is not None:
                raise AuditorError(
                    "--box-threshold and --text-threshold set the detector's thresholds: give --detector"
                )
        elif DETECTORS.check(self.detector).prefix == "owlv2" and self.text_threshold is not None:
            raise AuditorError("owlv2 detectors have no text threshold (it is Grounding DINO's); leave it out")
        if self.segmenter is not None:
            SEGMENTERS.check(self.segmenter)
        # The options agree; now each model must be where it is said to be (a local path exists, a key is set).
        preflight_t2i(self.t2i, self.generation)
        VQA_BACKENDS.preflight(self.vqa)
        for registry, specs in ((EMBEDDERS, self.embedders), (DETECTORS, [self.detector]), (SEGMENTERS, [self.segmenter])):
            for spec in filter(None, specs):
                registry.preflight(spec)


def check_trace_t2i(spec: str) -> None:
    """A one-line error unless ``spec`` is a diffusers pipeline, whose insides the trace reads."""
    from auditor.generation.registry import T2I_BACKENDS

    if T2I_BACKENDS.check(spec).prefix != "diffusers":
        raise AuditorError(
            f"auditor trace follows a diffusers pipeline's text encoder, latents and cross-attention; "
            f"--t2i {spec} is not one (use diffusers:<hub id or folder>)"
        )


def trace_registries() -> dict:
    """Config field -> the registry whose backends serve that model of a trace (importing no backend)."""
    from auditor.generation.registry import T2I_BACKENDS
    from auditor.perception.registry import DETECTORS, SEGMENTERS, VQA_BACKENDS

    return {"t2i": T2I_BACKENDS, "vqa": VQA_BACKENDS, "detector": DETECTORS, "segmenter": SEGMENTERS}


def check_trace_executor(name: str) -> str:
    """``name`` if the trace runs on that executor (and it is installed), else a one-line error."""
    if name == "overlapped":
        raise AuditorError(
            "auditor trace runs its stages one after the other: use --executor sequential or ray, not overlapped"
        )
    return check_executor(name)


def new_config(options: TraceOptions) -> TraceConfig:
    """The run's config from validated options (a bad setting is one line)."""
    from auditor.prompting.nouns import object_question
    from auditor.prompting.triplets import load_profession_templates
    from auditor.prompting.wordlists import human_words

    try:
        return TraceConfig(
            t2i=spec_ref(options.t2i),
            images_per_prompt=options.seed_count,
            seeds=paired_seeds(options.seed_count, options.seeds),
            generation=options.generation,
            allow_partial_weights=options.allow_partial_weights,
            executor=options.executor,
            source="professions" if options.professions else "captions",
            captions=options.captions,
            caption_column=options.caption_column,
            profession_templates=load_profession_templates() if options.professions else [],
            limit=options.limit,
            object_question=object_question(),
            vqa=spec_ref(options.vqa),
            perception=options.perception,
            image_embedders=[spec_ref(spec) for spec in options.embedders],
            detector=spec_ref(options.detector) if options.detector else None,
            box_threshold=options.box_threshold,
            text_threshold=options.text_threshold,
            segmenter=spec_ref(options.segmenter) if options.segmenter else None,
            scoring=options.scoring.model_copy(update={"sigma_words": sorted(human_words().sigma_words)}),
            show=options.show,
        )
    except ValidationError as exc:
        raise AuditorError(f"bad trace settings: {describe_validation_error(exc)}") from None
