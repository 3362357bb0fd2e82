"""The TIBET prompt audit: plan -> generate -> perceive -> embed -> score, recorded as it goes.

Every stage goes through the content cache, and the record is rewritten atomically after
each batch, so Ctrl-C or a crash leaves a valid partial record (status ``interrupted`` or
``failed``, with the error) and ``--resume`` picks up without redoing finished work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor.core.cache import ContentCache
from auditor.core.defaults import DEFAULT_EMBEDDER
from auditor.core.environment import collect_environment
from auditor.core.errors import AuditorError
from auditor.core.store import (
    PLAN_DRAFT_FILE,
    TRANSCRIPT_FILE,
    RunStore,
)
from auditor.core.text import has_visible_text, refuse_control_characters, single_spaced
from auditor.executors.generation import PromptRequest
from auditor.records import (
    ChatMessage,
    GenerationSettings,
    PerceptionSettings,
    RunConfig,
    RunRecord,
    ScoringSettings,
    Stage,
)
from auditor.reporting.wording import plan_notes
from auditor.studies.planning_stage import PlanRequest, cached_plan
from auditor.studies.progress import ProgressReporter
from auditor.studies.run import (
    ModelPool,
    Resumption,
    StudyRun,
    check_images_and_seeds,
    named_model_is_required,
    paired_seeds,
    reopen_run,
    spec_ref,
)

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


@dataclass
class PromptAuditOptions:
    """What ``auditor prompt`` was asked to do (validated by :func:`validate_options`)."""

    prompt: str
    llm: str
    t2i: str
    vqa: str
    embedder: str | None
    embedder_required: bool = False
    images: int = 48
    seeds: list[int] | None = None
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    perception: PerceptionSettings = field(default_factory=PerceptionSettings)
    scoring: ScoringSettings = field(default_factory=ScoringSettings)
    max_axes: int | None = None
    max_counterfactuals: int | None = None
    #: ``--axes``: fixed axes written from the axis library, no LLM; None = the planner chooses.
    axes: list[str] | None = None
    llm_retries: int = 2
    llm_temperature: float | None = None
    llm_seed: int | None = None
    review: bool = False
    device: str | None = None
    allow_partial_weights: bool = False
    executor: str = "sequential"


def validate_options(options: PromptAuditOptions) -> None:
    """Reject bad input before anything is created or loaded."""
    from auditor.executors import check_placement
    from auditor.generation.registry import preflight_t2i
    from auditor.planning import check_llm_spec

    if not has_visible_text(options.prompt):
        raise AuditorError(
            "the prompt is empty (nothing but spaces or invisible characters): give the text-to-image prompt to "
            'audit, e.g. "a photo of a pharmacist"'
        )
    refuse_control_characters(options.prompt, "the prompt")
    options.prompt = single_spaced(options.prompt)  # as a batch file or an exploration reads it: one cache key
    check_images_and_seeds(options.images, options.seeds)
    check_placement(options.executor, options.device)
    check_llm_spec(options.llm, options.llm_temperature, options.llm_seed)
    if options.axes is not None:
        from auditor.planning.offline import check_axes

        options.axes = check_axes(options.axes)
    preflight_t2i(options.t2i, options.generation)
    registries = _model_registries()
    for stage, spec in (("vqa", options.vqa), ("embedder", options.embedder)):
        if spec:
            registries[stage].preflight(spec)


def _model_registries() -> dict:
    """Config field -> the registry whose backends serve it (importing no backend)."""
    from auditor.generation.registry import T2I_BACKENDS
    from auditor.perception.registry import EMBEDDERS, VQA_BACKENDS

    return {"t2i": T2I_BACKENDS, "vqa": VQA_BACKENDS, "embedder": EMBEDDERS}


def new_config(options: PromptAuditOptions) -> RunConfig:
    return RunConfig(
        prompt=options.prompt.strip(),
        llm=options.llm,
        llm_temperature=options.llm_temperature,
        llm_seed=options.llm_seed,
        llm_retries=options.llm_retries,
        max_axes=options.max_axes,
        max_counterfactuals=options.max_counterfactuals,
        axes=options.axes,
        review=options.review,
        t2i=spec_ref(options.t2i),
        vqa=spec_ref(options.vqa),
        embedder=spec_ref(options.embedder) if options.embedder else None,
        images_per_prompt=options.images,
        seeds=paired_seeds(options.images, options.seeds),
        generation=options.generation,
        perception=options.perception,
        scoring=options.scoring,
        allow_partial_weights=options.allow_partial_weights,
        executor=options.executor,
    )


class PromptAudit(StudyRun[RunRecord]):
    """One TIBET audit in its run folder: plan -> generate -> perceive -> embed -> score."""

    def __init__(
        self,
        run_dir: Path,
        record: RunRecord,
        cache: ContentCache,
        progress: ProgressReporter,
        *,
        embedder_required: bool = False,
        device: str | None = None,
        models: ModelPool | None = None,
    ):
        super().__init__(run_dir, record, cache, progress, device, models)
        self.embedder_required = embedder_required
        #: Prompt id -> image embeddings, filled by the embed stage when an embedder is configured.
        self.embeddings: dict[str, np.ndarray] | None = None

    def run(self) -> RunRecord:
        """Run (or resume) every stage; the record's status says how it ended."""
        self.execute(self.steps())
        return self.record

    def clear_scores(self) -> None:
        self.record.concepts, self.record.scores = {}, None

    def steps(self) -> list[tuple[Stage, Callable[[], None]]]:
        """The audit's stages in order (a batch runs each stage over all its audits before the next)."""
        return [
            ("plan", self.plan),
            ("generate", self.images),
            ("score", self.score),
        ]

    def after_end(self) -> None:
        """Write ``report.html`` however the run ended: a failed run's page shows its plan, images and error."""
        from auditor.reporting import write_html_report

        self.write_page(write_html_report)

    def plan(self) -> None:
        """Plan axes and counterfactuals, through the cache: a rerun asks the LLM nothing and gets the same plan."""
        if self.record.plan is not None:
            return
        from auditor.planning import review_plan, transcript_of

        with self.stage("plan") as outcome:
            try:
                plan, cached = cached_plan(self.cache, PlanRequest.asked(self.record.config.prompt, self.record.config))
            except AuditorError as exc:  # an invalid plan or a refused request: keep the conversation so far
                self._save_transcript(transcript_of(exc))
                raise
            outcome.cached, outcome.computed = (1, 0) if cached else (0, 1)
            self._save_transcript(plan.transcript)
            for note in plan_notes(plan):  # now, not only in the report at the end of a long run
                self.progress.notice(note)
            if self.record.config.review:  # on a resume too, until a plan was accepted
                plan = review_plan(plan, draft=self.run_dir / PLAN_DRAFT_FILE)
        self.record.plan = plan

    def _save_transcript(self, transcript: Sequence[ChatMessage]) -> None:
        from pydantic import TypeAdapter

        from auditor.core.store import atomic_write_bytes

        adapter = TypeAdapter(list[ChatMessage])
        atomic_write_bytes(self.run_dir / TRANSCRIPT_FILE, adapter.dump_json(list(transcript), indent=2))

    def images(self) -> None:
        """Generate every prompt set, ask every image the axes' questions and the caption, and embed it."""
        from auditor.executors.perception import AnswerReader

        plan = self.record.plan
        config = self.record.config

        def checkpoint(answers) -> None:
            self.record.answers = answers
            self.checkpoint()

        answers = AnswerReader(
            self,
            {axis.name: axis.question for axis in plan.axes},
            plan.caption_question if config.scoring.include_captions else None,
            on_answers=checkpoint,
        )
        # The default CLIP model is optional: without its weights the audit goes on without embedding scores.
        embed = (
            self.embed_reader(required=self.embedder_required, on_skip=self._embedder_skipped)
            if config.embedder is not None
            else None
        )
        readers = [answers] if embed is None else [answers, embed]
        self.run_images([PromptRequest(pid, prompt, axis) for pid, prompt, axis in plan.prompt_sets()], readers)
        self.record.answers = answers.answers()
        if config.embedder is None:  # none asked (a resume's --embedder none), or the optional one was not found
            self.forget_timing("embed")
            self.embeddings = None
        else:
            self.embeddings = embed.vectors()

    def _embedder_skipped(self, reason: str) -> None:
        """Keep why the optional embedder was skipped in the record as soon as it is, for every later save (an
        interruption's, a resume's) and the reports."""
        self.record.embedder_skipped = reason

    def score(self) -> None:
        from auditor.scoring.intervals import score_run
        from auditor.scoring.tibet import record_concepts

        with self.stage("score") as outcome:
            # The same code path `auditor score RUN` uses, so a rescore reproduces these numbers.
            self.record.concepts = record_concepts(self.record)
            self.record.scores = score_run(self.record, concepts=self.record.concepts, embeddings=self.embeddings)
            outcome.computed = len(self.record.concepts)


def start_audit(
    options: PromptAuditOptions,
    store: RunStore,
    cache: ContentCache,
    progress: ProgressReporter,
    run_name: str | None,
    *,
    pool: ModelPool | None = None,
    checked: bool = False,
) -> PromptAudit:
    """Validate the options (unless ``checked``), create the run folder and write the first record.

    ``pool`` shares loaded models with other audits (a batch's).
    """
    if not checked:
        validate_options(options)
    config = new_config(options)
    run_dir = store.create_run(run_name, config.prompt)
    record = RunRecord(run_id=run_dir.name, config=config, environment=collect_environment())
    audit = PromptAudit(
        run_dir, record, cache, progress,
        embedder_required=options.embedder_required, device=options.device, models=pool,
    )  # fmt: skip
    audit.save()
    return audit


def resume_audit(
    run: str,
    store: RunStore,
    cache: ContentCache,
    progress: ProgressReporter,
    resumption: Resumption = Resumption(),
    pool: ModelPool | None = None,
) -> PromptAudit:
    """Reopen a run folder; its own config is used, and finished work comes from the cache.

    ``resumption`` may say where the run's models are now (e.g. a local copy after the hub
    failed, or ``embedder`` ``none``), how many requests an API VQA model gets at once (fewer
    after rate limits) and which executor runs the rest. ``pool`` shares loaded models with
    other audits (a batch's).
    """
    run_dir, record = reopen_run(run, store, RunRecord)
    point_models(record.config, resumption)
    if "embedder" in resumption.models:  # none now asked, or one named to be loaded: no earlier skip stands
        record.embedder_skipped = None
    embedder = record.config.embedder
    required = "embedder" in resumption.models or named_model_is_required(
        embedder.spec if embedder else None, DEFAULT_EMBEDDER
    )
    return PromptAudit(
        run_dir, record, cache, progress, device=resumption.device, embedder_required=required, models=pool
    )


def point_models(config: Any, resumption: Resumption) -> None:
    """Apply a resume's options to a run's config (any config with ``t2i``/``vqa``/``embedder`` fields, as a
    batch's and an exploration's have); ``embedder`` ``none`` turns the embeddings off."""
    if resumption.models.get("embedder", "").strip().lower() == "none":
        config.embedder = None
        resumption = resumption.without_model("embedder")
    resumption.apply(config, _model_registries())
