"""The TIBET prompt audit: plan -> generate -> perceive -> embed -> score, recorded as it goes.

Every stage goes through the content cache, and the record is rewritten atomically after
each batch, so Ctrl-C or a crash leaves a valid partial record (status ``interrupted`` or
``failed``, with the error) and ``--resume`` picks up without redoing finished work.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.backends import parse_spec
from auditor.environment import collect_environment
from auditor.errors import AuditorError
from auditor.records import (
    GenerationSettings,
    ModelRef,
    PerceptionSettings,
    RunConfig,
    RunError,
    RunRecord,
    ScoringSettings,
    Stage,
    StageTiming,
    utc_now,
)
from auditor.store import TRANSCRIPT_FILE, ContentCache, RunStore, load_record, new_run_id, write_model
from auditor.studies.generation_stage import GenerationOutcome, PromptRequest, generate_images
from auditor.studies.perception_stage import answer_questions, embed_images
from auditor.studies.progress import ProgressReporter

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

#: VQA images sent per call (each image's questions are asked together inside the call).
IMAGES_PER_VQA_CALL = 8


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
    llm_retries: int = 2
    llm_temperature: float | None = None
    llm_seed: int | None = None
    review: bool = False
    device: str | None = None


def validate_options(options: PromptAuditOptions) -> None:
    """Reject bad input before anything is created or loaded."""
    from auditor.generation.registry import T2I_BACKENDS
    from auditor.perception.registry import EMBEDDERS, VQA_BACKENDS
    from auditor.planning import check_llm_spec

    if not options.prompt.strip():
        raise AuditorError("the prompt is empty: give the text-to-image prompt to audit, e.g. \"a photo of a pharmacist\"")
    if options.images < 1:
        raise AuditorError(f"--images must be at least 1 (got {options.images})")
    if options.seeds is not None and len(options.seeds) != options.images:
        raise AuditorError(f"--seed lists {len(options.seeds)} seeds for {options.images} images per prompt")
    check_llm_spec(options.llm)
    T2I_BACKENDS.check(options.t2i)
    VQA_BACKENDS.check(options.vqa)
    if options.embedder:
        EMBEDDERS.check(options.embedder)


def _spec_ref(spec: str) -> ModelRef:
    """A model reference known before loading; replaced by the backend's full ref once loaded."""
    parsed = parse_spec(spec)
    return ModelRef(spec=spec, backend=parsed.prefix, model_id=parsed.target or None)


def new_config(options: PromptAuditOptions) -> RunConfig:
    return RunConfig(
        prompt=options.prompt.strip(),
        llm=options.llm,
        llm_temperature=options.llm_temperature,
        llm_seed=options.llm_seed,
        llm_retries=options.llm_retries,
        max_axes=options.max_axes,
        max_counterfactuals=options.max_counterfactuals,
        t2i=_spec_ref(options.t2i),
        vqa=_spec_ref(options.vqa),
        embedder=_spec_ref(options.embedder) if options.embedder else None,
        images_per_prompt=options.images,
        seeds=options.seeds if options.seeds is not None else list(range(options.images)),
        generation=options.generation,
        perception=options.perception,
        scoring=options.scoring,
    )


class PromptAudit:
    """One audit run in its folder: owns the record and writes it after every step."""

    def __init__(
        self,
        run_dir: Path,
        record: RunRecord,
        cache: ContentCache,
        progress: ProgressReporter,
        *,
        review: bool = False,
        embedder_required: bool = False,
        device: str | None = None,
    ):
        self.run_dir = run_dir
        self.record = record
        self.cache = cache
        self.progress = progress
        self.review = review
        self.embedder_required = embedder_required
        self.device = device
        #: Prompt id -> image embeddings, filled by the embed stage when an embedder is configured.
        self.embeddings: dict[str, np.ndarray] | None = None

    # ------------------------------------------------------------------ bookkeeping

    def save(self) -> None:
        self.record.updated_at = utc_now()
        write_model(self.run_dir / "record.json", self.record)

    @contextmanager
    def stage(self, name: Stage) -> Iterator[GenerationOutcome]:
        """Time a stage and record its computed/cached counts (replacing an earlier attempt's)."""
        outcome = GenerationOutcome()
        started = time.perf_counter()
        try:
            yield outcome
        finally:
            timing = StageTiming(
                stage=name, seconds=time.perf_counter() - started, computed=outcome.computed, cached=outcome.cached
            )
            self.record.timings = [t for t in self.record.timings if t.stage != name] + [timing]

    # ------------------------------------------------------------------ stages

    def run(self) -> RunRecord:
        """Run (or resume) every stage; the record's status says how it ended.

        ``report.html`` is written however the run ends: a failed run's page shows its
        plan, the images it made and the error.
        """
        self.record.status = "running"
        self.record.errors = []
        self.record.environment = collect_environment()
        self.save()
        current: Stage | None = None
        try:
            for current, step in (
                ("plan", self.plan),
                ("generate", self.generate),
                ("perceive", self.perceive),
                ("embed", self.embed),
                ("score", self.score),
            ):
                step()
                self.save()
        except KeyboardInterrupt:
            self._stop("interrupted", current, "KeyboardInterrupt", "interrupted by the user; resume with --resume")
            raise
        except Exception as exc:
            self._stop("failed", current, type(exc).__name__, str(exc))
            raise
        self.record.status = "completed"
        self.record.environment = collect_environment()
        self.save()
        self.write_report()
        return self.record

    def write_report(self) -> Path:
        """(Re)write ``report.html`` in the run folder from the record."""
        from auditor.reporting import write_html_report

        with self.stage("report"):
            path = write_html_report(self.record, self.run_dir)
        self.save()
        return path

    def _stop(self, status, stage: Stage | None, kind: str, message: str) -> None:
        self.record.status = status
        self.record.errors.append(RunError(stage=stage, type=kind, message=message))
        self.save()
        self.write_report()

    def plan(self) -> None:
        if self.record.plan is not None:
            return
        from auditor.planning import make_plan, review_plan, transcript_of

        config = self.record.config
        with self.stage("plan") as outcome:
            try:
                plan = make_plan(
                    config.prompt,
                    config.llm,
                    max_axes=config.max_axes,
                    max_counterfactuals=config.max_counterfactuals,
                    retries=config.llm_retries,
                    temperature=config.llm_temperature,
                    seed=config.llm_seed,
                )
            except AuditorError as exc:  # an invalid plan or a refused request: keep the conversation so far
                self._save_transcript(transcript_of(exc))
                raise
            self._save_transcript(plan.transcript)
            if self.review:
                plan = review_plan(plan)
            outcome.computed = 1
        self.record.plan = plan

    def _save_transcript(self, transcript) -> None:
        from pydantic import TypeAdapter

        from auditor.records import ChatMessage
        from auditor.store import atomic_write_bytes

        adapter = TypeAdapter(list[ChatMessage])
        atomic_write_bytes(self.run_dir / TRANSCRIPT_FILE, adapter.dump_json(list(transcript), indent=2))

    def generate(self) -> None:
        from auditor.generation.registry import T2I_BACKENDS

        config = self.record.config
        requests = [PromptRequest(pid, prompt, axis) for pid, prompt, axis in self.record.plan.prompt_sets()]
        with self.stage("generate") as outcome:
            backend = T2I_BACKENDS.load(config.t2i.spec, settings=config.generation, device=self.device)
            self.record.config.t2i = backend.ref.model_copy(update={"spec": config.t2i.spec})
            # Record what was in effect, including the pipeline defaults the user left unset.
            self.record.config.generation = backend.settings.model_copy(update={"batch_size": config.generation.batch_size})

            def checkpoint(sets) -> None:
                self.record.prompt_sets = sets
                self.save()

            sets, counts = generate_images(
                backend, requests, config.seeds, self.cache, self.run_dir,
                config.generation.batch_size, self.progress, checkpoint,
            )  # fmt: skip
            outcome.computed, outcome.cached = counts.computed, counts.cached
            self.record.prompt_sets = sets
            del backend
            _release_accelerator_memory()

    def perceive(self) -> None:
        from auditor.perception.registry import VQA_BACKENDS

        config = self.record.config
        plan = self.record.plan
        with self.stage("perceive") as outcome:
            vqa = VQA_BACKENDS.load(config.vqa.spec, settings=config.perception, device=self.device)
            self.record.config.vqa = vqa.ref.model_copy(update={"spec": config.vqa.spec})

            def checkpoint(answers) -> None:
                self.record.answers = answers
                self.save()

            answers, counts = answer_questions(
                vqa,
                self.record.prompt_sets,
                {axis.name: axis.question for axis in plan.axes},
                plan.caption_question if config.scoring.include_captions else None,
                self.cache,
                self.run_dir,
                IMAGES_PER_VQA_CALL,
                self.progress,
                checkpoint,
            )
            outcome.computed, outcome.cached = counts.computed, counts.cached
            self.record.answers = answers
            del vqa
            _release_accelerator_memory()

    def embed(self) -> None:
        config = self.record.config
        if config.embedder is None:
            return
        from auditor.perception.registry import EMBEDDERS

        with self.stage("embed") as outcome:
            try:
                embedder = EMBEDDERS.load(config.embedder.spec, device=self.device)
            except AuditorError as exc:
                if self.embedder_required:
                    raise
                self.progress.notice(f"embedding scores skipped: {exc} (pass --embedder none to silence this)")
                self.record.config.embedder = None
                return
            self.record.config.embedder = embedder.ref.model_copy(update={"spec": config.embedder.spec})
            self.embeddings, counts = embed_images(
                embedder, self.record.prompt_sets, self.cache, self.run_dir, config.perception.batch_size, self.progress
            )
            outcome.computed, outcome.cached = counts.computed, counts.cached
            del embedder
            _release_accelerator_memory()

    def score(self) -> None:
        from auditor.scoring import record_concepts, score_audit

        with self.stage("score") as outcome:
            # The same code path `auditor score RUN` uses, so a rescore reproduces these numbers.
            self.record.concepts = record_concepts(self.record)
            scores = score_audit(self.record.plan, self.record.concepts, self.record.config.scoring)
            if self.embeddings is not None:
                from auditor.embedding_scores import apply_embedding_scores

                scores = apply_embedding_scores(scores, self.record.plan, self.embeddings, self.record.config.scoring)
            self.record.scores = scores
            outcome.computed = len(self.record.concepts)


def _release_accelerator_memory() -> None:
    """Free a finished stage's model before the next one loads (GPUs rarely hold two big models)."""
    import sys

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def start_audit(
    options: PromptAuditOptions, store: RunStore, cache: ContentCache, progress: ProgressReporter, run_name: str | None
) -> PromptAudit:
    """Validate the options, create the run folder and write the first record."""
    validate_options(options)
    config = new_config(options)
    run_id = run_name or new_run_id(config.prompt)
    run_dir = store.create(run_id)
    record = RunRecord(run_id=run_dir.name, config=config, environment=collect_environment())
    audit = PromptAudit(
        run_dir, record, cache, progress,
        review=options.review, embedder_required=options.embedder_required, device=options.device,
    )  # fmt: skip
    audit.save()
    return audit


def resume_audit(
    run: str, store: RunStore, cache: ContentCache, progress: ProgressReporter, device: str | None = None
) -> PromptAudit:
    """Reopen a run folder; its own config is used, and finished work comes from the cache."""
    run_dir = store.resolve(run)
    record = load_record(run_dir / "record.json")
    if record.status == "completed":
        progress.notice(f"run {record.run_id} is already complete; rescoring from cached results")
    return PromptAudit(run_dir, record, cache, progress, device=device)

