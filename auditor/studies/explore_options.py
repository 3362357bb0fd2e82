"""What ``auditor explore`` is asked to do: its options, their checks, and the run's config built from them.

Everything here runs before a run folder is created or a model loaded, so bad input is
one line and leaves nothing behind (:mod:`auditor.studies.explore` runs the exploration).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from auditor.core.defaults import MAX_SEED
from auditor.core.errors import AuditorError
from auditor.core.text import has_visible_text, refuse_control_characters, single_spaced
from auditor.records import ExploreConfig, GenerationSettings, Objective, PerceptionSettings, ScoringSettings
from auditor.studies.run import spec_ref

#: The sentence embedder the guard uses by default (skipped, with exact matching, when absent).
DEFAULT_TEXT_EMBEDDER = "minilm"


@dataclass
class ExploreOptions:
    """What ``auditor explore`` was asked to do (checked by :func:`validate_options`)."""

    seeds: list[str]
    topic: str | None
    llm: str
    t2i: str
    vqa: str
    axes: list[str] | None = None
    objective: Objective = "bav"
    top_k: int = 5
    seeds_per_round: int = 4
    proposals_per_round: int = 8
    max_images: int = 2000
    max_llm_calls: int | None = None
    max_prompts: int | None = None
    time_limit: float | None = None
    max_images_per_prompt: int = 48
    confirm_images: int = 24
    first_seed: int = 0
    text_embedder: str | None = DEFAULT_TEXT_EMBEDDER
    text_embedder_required: bool = False
    duplicate_threshold: float = 0.9
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    perception: PerceptionSettings = field(default_factory=PerceptionSettings)
    scoring: ScoringSettings = field(default_factory=ScoringSettings)
    max_axes: int | None = None
    max_counterfactuals: int | None = None
    llm_retries: int = 2
    llm_temperature: float | None = None
    llm_seed: int | None = None
    device: str | None = None
    allow_partial_weights: bool = False
    executor: str = "sequential"


def validate_options(options: ExploreOptions) -> None:
    """Reject bad input before anything is created or loaded."""
    from auditor.executors import check_placement
    from auditor.generation.registry import preflight_t2i
    from auditor.perception.registry import SENTENCE_EMBEDDERS, VQA_BACKENDS
    from auditor.planning import check_llm_spec
    from auditor.planning.offline import check_axes
    from auditor.scoring.uncertainty import MIN_SEEDS

    for text in [*options.seeds, options.topic or ""]:
        refuse_control_characters(text, repr(text))
    options.seeds = [single_spaced(seed) for seed in options.seeds if has_visible_text(seed)]
    options.topic = single_spaced(options.topic) if options.topic and has_visible_text(options.topic) else None
    if not options.seeds and not options.topic:
        raise AuditorError('give seed prompts or --topic, e.g. auditor explore --topic "people at work"')
    options.llm = check_llm_spec(options.llm, options.llm_temperature, options.llm_seed)
    if options.axes is not None:
        options.axes = check_axes(options.axes)
        if options.objective == "lean" and "gender" not in options.axes:
            raise AuditorError("--objective lean measures CAS(male) - CAS(female): --axes must include gender")
    checks = [
        (options.top_k >= 1, f"--top must be at least 1 (got {options.top_k})"),
        (
            options.seeds_per_round >= MIN_SEEDS,
            f"--seeds-per-round must be at least {MIN_SEEDS}, for an interval (got {options.seeds_per_round})",
        ),
        (options.proposals_per_round >= 1, f"--proposals must be at least 1 (got {options.proposals_per_round})"),
        (options.max_images >= 1, f"--max-images must be at least 1 (got {options.max_images})"),
        (
            options.max_images_per_prompt >= options.seeds_per_round,
            f"--max-images-per-prompt ({options.max_images_per_prompt}) must be at least --seeds-per-round "
            f"({options.seeds_per_round})",
        ),
        (options.confirm_images >= 0, f"--confirm-images must be 0 or more (got {options.confirm_images})"),
        (
            options.confirm_images == 0 or options.confirm_images >= MIN_SEEDS,
            f"--confirm-images must be 0 (no confirmation) or at least {MIN_SEEDS}, for an interval "
            f"(got {options.confirm_images})",
        ),
        (options.max_llm_calls is None or options.max_llm_calls >= 0, "--max-llm-calls must be 0 or more"),
        (options.max_prompts is None or options.max_prompts >= 1, "--max-prompts must be at least 1"),
        (options.time_limit is None or options.time_limit > 0, "--time must be more than 0"),
        (0 < options.duplicate_threshold <= 1, "--duplicate-threshold must lie in (0, 1]"),
        (options.scoring.bootstrap >= 1, "explore needs intervals, which --bootstrap 0 turns off"),
        (
            options.first_seed + options.max_images_per_prompt + options.confirm_images - 1 <= MAX_SEED,
            f"--seed {options.first_seed} leaves no room below 2^63 for the "
            f"{options.max_images_per_prompt + options.confirm_images} seeds a prompt may take "
            "(--max-images-per-prompt + --confirm-images)",
        ),
    ]
    if problems := [message for ok, message in checks if not ok]:  # all at once: one retry fixes them all
        raise AuditorError("; ".join(problems))
    if options.topic and options.llm == "offline":
        from auditor.prompting.topics import check_topic

        check_topic(options.topic)
    check_placement(options.executor, options.device)
    preflight_t2i(options.t2i, options.generation)
    VQA_BACKENDS.preflight(options.vqa)
    if options.text_embedder:
        SENTENCE_EMBEDDERS.preflight(options.text_embedder)


def new_config(options: ExploreOptions) -> ExploreConfig:
    """The run's config: the options as recorded, with every seed the exploration and the confirmation may use."""
    images = options.max_images_per_prompt + options.confirm_images
    return ExploreConfig(
        seed_prompts=options.seeds,
        topic=options.topic,
        llm=options.llm,
        llm_temperature=options.llm_temperature,
        llm_seed=options.llm_seed,
        llm_retries=options.llm_retries,
        axes=options.axes,
        max_axes=options.max_axes,
        max_counterfactuals=options.max_counterfactuals,
        objective=options.objective,
        top_k=options.top_k,
        seeds_per_round=options.seeds_per_round,
        proposals_per_round=options.proposals_per_round,
        max_images=options.max_images,
        max_llm_calls=options.max_llm_calls,
        max_prompts=options.max_prompts,
        time_limit=options.time_limit,
        max_images_per_prompt=options.max_images_per_prompt,
        confirm_images=options.confirm_images,
        duplicate_threshold=options.duplicate_threshold,
        text_embedder=spec_ref(options.text_embedder) if options.text_embedder else None,
        t2i=spec_ref(options.t2i),
        vqa=spec_ref(options.vqa),
        images_per_prompt=images,
        seeds=list(range(options.first_seed, options.first_seed + images)),
        generation=options.generation,
        perception=options.perception,
        scoring=options.scoring,
        allow_partial_weights=options.allow_partial_weights,
        executor=options.executor,
    )
