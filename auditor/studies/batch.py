"""``auditor batch``: a prompt audit per prompt of a list, with every model loaded once.

Each prompt is audited exactly as ``auditor prompt`` audits it, in its own run folder under
the batch's (``audits/<id>/``: record, images, transcript, ``report.html``), so ``auditor
report`` and ``auditor score`` read it as they read any audit. The batch runs stage by
stage over all of them (plan every prompt, then generate, ask and embed the images of each
with the configured executor, then score), and its models stay loaded from one prompt to
the next, so each loads once (and they are in memory together, as under ``--executor
overlapped``). Every stage goes through the content cache: a resumed batch recomputes
nothing, and a prompt audited alone afterwards reuses all of it.

A prompt whose plan fails (no valid plan from the LLM, a refused request) is recorded as
failed and the batch goes on without it; a failure in a later stage (a model that will not
load, a service that is down) stops the batch, and ``--resume`` continues it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from auditor.core.cache import ContentCache
from auditor.core.environment import collect_environment
from auditor.core.errors import AuditorError, BackendError, StartAgainError
from auditor.core.store import AUDITS_FOLDER, RECORD_FILE, REPORT_FILE, RunStore, slugify
from auditor.records import (
    BatchAudit,
    BatchConfig,
    BatchRecord,
    BatchRow,
    RunError,
    RunRecord,
    RunStatus,
    Stage,
    load_record,
)
from auditor.reporting.ranking import highest_first
from auditor.reporting.wording import quote
from auditor.studies.progress import NoticesOnly, ProgressReporter
from auditor.studies.prompt_audit import (
    PromptAudit,
    PromptAuditOptions,
    new_config,
    point_models,
    resume_audit,
    start_audit,
    validate_options,
)
from auditor.studies.run import ModelPool, Resumption, StudyRun, interruptions_held, reopen_run

#: The prompt audit's steps, each run over every prompt before the next.
STAGES: tuple[Stage, ...] = ("plan", "generate", "score")


@dataclass
class BatchOptions:
    """What ``auditor batch`` was asked to do: the prompts, and the audit settings they all share."""

    source: str
    prompts: list[str]
    #: Settings of every prompt's audit (its ``prompt`` is replaced per prompt).
    audit: PromptAuditOptions
    values: str | None = None


def start_batch(
    options: BatchOptions, store: RunStore, cache: ContentCache, progress: ProgressReporter, run_name: str | None
) -> Batch:
    """Check the options, create the batch's folder with one audit folder per prompt, write the records."""
    if not options.prompts:
        raise AuditorError(f"{options.source} lists no prompts")
    for prompt in options.prompts:
        validate_options(dataclasses.replace(options.audit, prompt=prompt))
    template = new_config(dataclasses.replace(options.audit, prompt=options.prompts[0]))
    config = BatchConfig(
        source=options.source,
        values=options.values,
        prompts=options.prompts,
        **template.model_dump(
            include={
                "t2i", "embedder", "images_per_prompt", "seeds", "generation", "allow_partial_weights", "llm",
                "llm_temperature", "llm_seed", "llm_retries", "max_axes", "max_counterfactuals", "axes", "vqa",
                "perception", "scoring", "executor",
            }
        ),
    )  # fmt: skip
    run_dir = store.create_run(run_name, f"batch {Path(options.source).stem}")
    record = BatchRecord(run_id=run_dir.name, config=config, environment=collect_environment())
    pool = ModelPool(keep=True)
    audits_store = RunStore(run_dir / AUDITS_FOLDER)
    audits = []
    for number, prompt in enumerate(options.prompts, 1):
        audit_id = f"{number:03d}-{slugify(prompt)}"
        audit = start_audit(
            dataclasses.replace(options.audit, prompt=prompt), audits_store, cache, NoticesOnly(progress), audit_id,
            pool=pool, checked=True,
        )  # fmt: skip
        audits.append(audit)
        record.audits.append(BatchAudit(audit_id=audit_id, prompt=prompt, folder=f"{AUDITS_FOLDER}/{audit_id}"))
    batch = Batch(run_dir, record, cache, progress, options.audit.device, pool, audits)
    batch.save()
    return batch


def resume_batch(
    run: str, store: RunStore, cache: ContentCache, progress: ProgressReporter, resumption: Resumption = Resumption()
) -> Batch:
    """Reopen a batch; its audits continue with their own settings (``resumption`` as ``auditor prompt --resume``).

    Models named again (``--t2i``, ``--vqa``, ``--embedder``) audit every prompt again, completed ones too, so the
    leaderboard never ranks two models' results together; what the same weights made comes from the cache.
    """
    run_dir, record = reopen_run(run, store, BatchRecord)
    point_models(record.config, resumption)
    # Its audits run where the batch runs: a --ray-address was checked against the batch's executor (and reached)
    # just now, not once more per audit.
    resumption = dataclasses.replace(resumption, ray_address=None)
    pool = ModelPool(keep=True)
    audits_store = RunStore(run_dir / AUDITS_FOLDER)
    quiet = NoticesOnly(progress)
    every = bool(resumption.models)
    audits = [
        resume_audit(str(run_dir / entry.folder), audits_store, cache, quiet, resumption, pool=pool)
        if every or entry.status != "completed"
        else _finished(run_dir / entry.folder, cache, quiet)
        for entry in record.audits
    ]
    return Batch(run_dir, record, cache, progress, resumption.device, pool, audits, every=every)


def _finished(folder: Path, cache: ContentCache, progress: ProgressReporter) -> PromptAudit:
    """A completed audit, reopened only to be ranked (it is not run again)."""
    return PromptAudit(folder, load_record(folder / RECORD_FILE), cache, progress)


class Batch(StudyRun[BatchRecord]):
    """The batch's folder and record, and its prompts' audits, run stage by stage."""

    completed_again = "auditing again the prompts whose audit failed, then ranking its audits and writing its report"

    def __init__(
        self,
        run_dir: Path,
        record: BatchRecord,
        cache: ContentCache,
        progress: ProgressReporter,
        device: str | None,
        pool: ModelPool,
        audits: list[PromptAudit],
        *,
        every: bool = False,
    ):
        super().__init__(run_dir, record, cache, progress, device, pool)
        self.audits = audits
        #: Whether to audit every prompt again, completed ones too (a resume that names models).
        self.every = every
        #: The audits this attempt runs (:meth:`_run`).
        self._live: list[PromptAudit] = []

    def run(self) -> BatchRecord:
        """Run (or resume) every unfinished audit stage by stage, then rank; the record's status says how it ended.
        The batch's lock covers its audits' folders (one lock per audit would hold a file open per prompt)."""
        with self.holding_lock():
            return self._run()

    def _run(self) -> BatchRecord:
        if self.every:
            self.progress.notice(
                "models named on resume: every prompt is audited again with them (what the same weights made before "
                "comes from the cache)"
            )
        else:
            self.say_if_complete()
        self.begin()
        self._live = [audit for audit in self.audits if self.every or audit.record.status != "completed"]
        stage: Stage | None = None
        try:
            for audit in self._live:
                audit.begin()
            for stage in STAGES:
                self.run_step(stage, lambda stage=stage: self._run_stage(stage, self._live))
            stage = "report"  # each audit's page is written as it finishes
            for audit in self._live:
                audit.finish()
            for audit in self.audits:  # one completed in an earlier attempt that was stopped while writing its page
                if audit.record.status == "completed" and not (audit.run_dir / REPORT_FILE).is_file():
                    audit.after_end()
            self._sync()
            self.run_step("report", self.rank)
            stage = None
            self._fail_when_none_completed()
        except BaseException as exc:
            if self.record.status == "running":  # stopped outside a step: while finishing its audits' pages
                self.interrupt(stage, exc) if isinstance(exc, KeyboardInterrupt) else self.fail(stage, exc)
            raise
        self.finish()
        return self.record

    def _fail_when_none_completed(self) -> None:
        """A batch goes on past a prompt whose plan fails (its audit says why), but one in which every audit failed
        found nothing: it fails, naming the first audit's error (an LLM that is down or a key it refused fails them
        all), so the command exits non-zero and ``--resume`` retries them; where every audit failed in a way a
        resume would repeat (:class:`StartAgainError`), the batch's error is one too, and no resume is offered."""
        records = [audit.record for audit in self.audits]
        failed = [record for record in records if record.status == "failed" and record.errors]
        if failed and all(record.status != "completed" for record in records):
            first = failed[0].errors[-1]
            again = all(record.fails_again_on_resume() for record in failed)
            raise (StartAgainError if again else BackendError)(
                f"no audit of the batch completed; {quote(failed[0].config.prompt)} failed at {first.stage or 'run'}: "
                f"{first.message}"
            )

    def end(self, status: RunStatus, error: RunError | None = None) -> None:
        """End the audits still running where the batch ends, then the batch, whose record and page then show every
        audit's status (and which is put back as it was when it and all its audits were completed and no file
        changed). A SIGTERM meanwhile waits until the batch's own record and page are written too."""
        with interruptions_held():
            for audit in self._live:
                if audit.record.status == "running":
                    audit.end(status, error)
            self._sync()
            super().end(status, error)

    def after_end(self) -> None:
        """Write ``report.html`` (the leaderboard and links to every prompt's report) however the batch ended."""
        from auditor.reporting.batch import write_batch_report

        write_batch_report(self.record, self.run_dir)

    def _run_stage(self, stage: Stage, live: list[PromptAudit]) -> None:
        """One stage over every live audit, on one load of its model; a prompt whose plan fails drops out."""
        with self.stage(stage) as outcome:
            self.progress.start(stage, len(live), f"{stage}: prompts")
            try:
                # why the optional default embedder could not be loaded: not tried again per prompt
                skipped: str | None = None
                for audit in list(live):
                    if skipped is not None:
                        audit.record.config.embedder = None
                        audit.record.embedder_skipped = skipped
                    had_embedder = audit.record.config.embedder is not None
                    try:
                        audit.run_step(stage, dict(audit.steps())[stage])
                    except AuditorError:
                        if stage != "plan":
                            raise
                        live.remove(audit)  # its record says why; the batch goes on without it
                    if had_embedder and audit.record.config.embedder is None:
                        skipped = audit.record.embedder_skipped
                    timing = next((t for t in audit.record.timings if t.stage == stage), None)
                    if timing is not None:
                        outcome.computed += timing.computed
                        outcome.cached += timing.cached
                    self.progress.advance(stage)
            finally:
                self.progress.finish(stage)
                self.models.release()
        self._sync()

    def _sync(self) -> None:
        """Copy each audit's status, error, dropped --axes and resolved model references (and what made its results)
        into the batch's record."""
        by_id = {audit.record.run_id: audit.record for audit in self.audits}
        for entry in self.record.audits:
            found = by_id[entry.audit_id]
            entry.status = found.status
            entry.error = found.errors[-1].message if found.errors else None
            entry.dropped_axes = dict(found.plan.dropped_axes) if found.plan is not None else {}
        ran = next((audit.record for audit in self.audits if audit.record.plan is not None), None)
        if ran is not None:
            for field in ("t2i", "vqa", "embedder", "generation", "perception"):
                setattr(self.record.config, field, getattr(ran.config, field))
            self.record.results_from = dict(ran.results_from)

    def rank(self) -> None:
        """The leaderboard: every axis of every completed audit, highest BAV first (no BAV last)."""
        self.record.leaderboard = leaderboard([audit.record for audit in self.audits])


def leaderboard(records: list[RunRecord]) -> list[BatchRow]:
    """Prompt x axis rows of the completed audits, highest BAV first, audits' order breaking ties."""
    rows = [
        BatchRow(
            audit_id=record.run_id,
            prompt=record.config.prompt,
            axis=axis.axis,
            bav=axis.bav,
            bav_ci=axis.bav_ci,
            lean=axis.lean,
            lean_ci=axis.lean_ci,
        )
        for record in records
        if record.status == "completed" and record.scores is not None
        for axis in record.scores.axes
    ]
    return sorted(rows, key=lambda row: highest_first(row.bav))
