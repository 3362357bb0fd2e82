"""``auditor explore``: search for where a model leans, adaptively, within a budget, with honest uncertainty.

A round (:meth:`Exploration.explore`) goes:

1. **Propose.** Seed prompts join in round 1; the proposer adds ``--proposals`` candidates a
   round: the LLM from the topic or seeds, later from the leaderboard (mutations, new
   directions; :mod:`auditor.planning.proposer`), or offline the topic's WordNet nouns in
   templates (:mod:`auditor.prompting.topics`).
2. **Guard.** A candidate naming a value of an audited axis, or repeating an earlier one,
   is rejected with its reason (:mod:`auditor.prompting.guard`).
3. **Plan.** ``--axes`` writes counterfactuals from the axis library, no LLM call; otherwise
   the LLM plans as in ``auditor prompt`` (same cache). Each axis becomes an *arm*.
4. **Allocate.** Every arm still in play gets ``k`` more seeds (up to
   ``--max-images-per-prompt``), new arms and those with the highest upper bounds first,
   while the round's images fit the budget left after reserving the confirmation's. The
   round's work is one batch of (prompt set, seed indices) requests for the generate and
   perceive stages. Each arm is then scored as its one-axis prompt audit
   (:mod:`auditor.scoring.arms`); arms whose upper bound falls below every leader's lower
   bound are eliminated (:mod:`auditor.metrics.allocation`).
5. **Stop** when an image, LLM-call, prompt or time budget is spent, when the top K are
   separated, or when nothing is left to do.

Then the confirmation (:mod:`auditor.studies.explore_confirmation`) re-runs the top K on
fresh seeds (indices past every exploration seed) and keeps as findings only the effects
that hold there, with Benjamini-Hochberg across the arms, against the winner's curse.

**Budgets.** An image counts against ``--max-images`` when it has to be generated; an image
found in the content cache costs nothing and is not counted. A round's images are priced
(a cache look-up per image) and charged before any is generated, so no run, interrupted or
not, generates more than the budget; a resumed round generates only what its charge
covered. Each LLM request is charged (and saved) before it is sent, and a plan starts only
when the budget covers its worst case, 3 + retries, less the turns the cache replays (a
plan cut off mid-conversation asks only the rest). ``--time`` is checked between rounds.

**Resume.** The record holds every candidate, arm and round, the last round's allocation
included, and every image, answer, plan and proposal comes from the content cache, so an
interrupted exploration continues where it stopped and recomputes nothing.

This module is the loop and the run folder; the steps live apart: the options and config
(:mod:`auditor.studies.explore_options`), propose -> guard -> plan
(:mod:`auditor.studies.explore_candidates`), allocation and a round's work
(:mod:`auditor.studies.explore_rounds`), who leads (:mod:`auditor.studies.explore_standings`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from auditor.core.cache import ContentCache
from auditor.core.environment import collect_environment
from auditor.core.errors import AuditorError
from auditor.core.store import RunStore
from auditor.executors.generation import described_text_to_image
from auditor.records import ExploreConfig, ExploreRecord, ModelRef, Round, StopReason
from auditor.studies.explore_candidates import CandidateIntake
from auditor.studies.explore_confirmation import confirm_leaders
from auditor.studies.explore_options import DEFAULT_TEXT_EMBEDDER, ExploreOptions, new_config, validate_options
from auditor.studies.explore_rounds import allocate_round, play_round
from auditor.studies.explore_standings import leading_arms, top_separated
from auditor.studies.progress import ProgressReporter
from auditor.studies.prompt_audit import point_models
from auditor.studies.run import (
    ModelPool,
    Resumption,
    StudyRun,
    describe_change,
    moved_service,
    named_model_is_required,
    reopen_run,
    results_word,
    spec_ref,
)

#: Seconds between partial saves of the record during a stage.
CHECKPOINT_SECONDS = 2.0


class Exploration(StudyRun[ExploreRecord]):
    """One exploration in its run folder: rounds of propose -> guard -> plan -> allocate, then confirm."""

    completed_again = "its rounds and confirmation are done; writing its report again"

    def __init__(
        self,
        run_dir: Path,
        record: ExploreRecord,
        cache: ContentCache,
        progress: ProgressReporter,
        *,
        device: str | None = None,
        text_embedder_required: bool = False,
        on_round: Callable[[ExploreRecord], None] | None = None,
    ):
        super().__init__(run_dir, record, cache, progress, device, ModelPool(keep=True))
        self.checkpoint_seconds = CHECKPOINT_SECONDS
        self.text_embedder_required = text_embedder_required
        self.on_round = on_round or (lambda _record: None)
        self.intake = CandidateIntake(self)
        #: While exploring: seconds explored over all attempts, now (every save records it, so a round that is
        #: interrupted or killed still counts against --time).
        self._explored: Callable[[], float] | None = None
        #: Where the seconds explored are read from (a test may give a clock of its own).
        self.clock: Callable[[], float] = time.monotonic

    def holds_results(self, field: str) -> bool:
        """A round is priced on the text-to-image model's cache before any of its images is made, so any round
        holds the model's results (images it was charged for, or found cached)."""
        return super().holds_results(field) or (field == "t2i" and bool(self.record.rounds))

    def other_weights(self, field: str, ref: ModelRef, before: ModelRef) -> None:
        """The rounds add to the earlier rounds' images and answers: other weights would mix two models' results
        in one score. The record names the model it ran with again, so a plain ``--resume`` goes on."""
        setattr(self.record.config, field, before)
        moved = moved_service(before, ref)
        if moved is not None:
            raise AuditorError(f"this exploration's {results_word(field)} cannot be added to: {moved}")
        raise AuditorError(
            f"this exploration's {results_word(field)} came from other weights than --{field} {ref.spec} "
            f"({describe_change(before, ref)}); resume it without --{field} (its record names its model again), "
            "or start a new exploration"
        )

    def save(self) -> None:
        explored = self._explored  # read once: a stage's thread may save as the exploration ends
        if explored is not None:
            self.record.elapsed = explored()
        super().save()

    @property
    def config(self) -> ExploreConfig:
        return self.record.config

    def run(self) -> ExploreRecord:
        """Run (or resume) the exploration and the confirmation; the record's status says how it ended."""
        self.execute([("explore", self.explore), ("confirm", lambda: confirm_leaders(self))])
        return self.record

    def after_end(self) -> None:
        """Release the models and write ``report.html``, however the run ended."""
        from auditor.reporting.explore import write_explore_report

        self.models.release()
        self.write_page(write_explore_report)

    def explore(self) -> None:
        """Rounds until a budget is spent, the leaders are separated, or nothing is left to do."""
        record = self.record
        if self.holds_results("t2i"):  # resumed: refuse other weights before a round is proposed or priced
            self.adopt_model("t2i", described_text_to_image(self).ref)
        started, before = self.clock(), record.elapsed
        self._explored = lambda: before + self.clock() - started
        try:
            self._explore_rounds()
        finally:
            record.elapsed = self._explored()
            self._explored = None
        self.save()

    def _explore_rounds(self) -> None:
        record = self.record

        def tick() -> None:
            record.elapsed = self._explored()

        while record.stop_reason is None:
            current = self.running_round("explore")
            if current is None:
                tick()
                if self.config.time_limit is not None and record.elapsed >= self.config.time_limit:
                    self.stop_exploring(
                        "time", f"--time {self.config.time_limit:g} s spent ({record.elapsed:.0f} s explored)"
                    )
                    break
                number = sum(1 for r in record.rounds if r.phase == "explore") + 1
                if record.proposed_rounds < number:
                    with self.stage("propose") as outcome:
                        self.intake.propose(number)
                        outcome.computed = sum(1 for c in record.candidates if c.round == number)
                    record.proposed_rounds = number
                    self.save()
                current = allocate_round(self, number)
                if current is None:
                    break
            play_round(self, current)
            self.save()
            self.on_round(record)
            if top_separated(record):
                top = ", ".join(arm.arm_id for arm in leading_arms(record))
                self.stop_exploring(
                    "separated", f"the top {self.config.top_k} ({top}) are separated from every other arm"
                )

    def running_round(self, phase: str) -> Round | None:
        """The last round if it is of this phase and unfinished (an interrupted run resumes it), else None."""
        last = self.record.rounds[-1] if self.record.rounds else None
        return last if last is not None and last.status == "running" and last.phase == phase else None

    def stop_exploring(self, reason: StopReason, detail: str) -> None:
        """End the exploration rounds, recording why (the confirmation still runs)."""
        self.record.stop_reason, self.record.stop_detail = reason, detail
        self.save()


def start_exploration(
    options: ExploreOptions,
    store: RunStore,
    cache: ContentCache,
    progress: ProgressReporter,
    run_name: str | None,
    on_round: Callable[[ExploreRecord], None] | None = None,
) -> Exploration:
    """Validate the options, create the run folder and write the first record."""
    validate_options(options)
    config = new_config(options)
    subject = options.topic or (options.seeds[0] if options.seeds else "explore")
    run_dir = store.create_run(run_name, f"explore {subject}")
    record = ExploreRecord(run_id=run_dir.name, config=config, environment=collect_environment())
    exploration = Exploration(
        run_dir, record, cache, progress,
        device=options.device, text_embedder_required=options.text_embedder_required, on_round=on_round,
    )  # fmt: skip
    exploration.save()
    return exploration


def moved_text_embedder(recorded: ModelRef | None, spec: str) -> ModelRef | None:
    """``--text-embedder`` on a resume: where the exploration's duplicate guard is now. The guard decides which
    proposals are new, so the rounds keep the one they ran with: its fingerprint stays in the ref, and weights that
    differ are refused once they load (:class:`~auditor.studies.explore_candidates.CandidateIntake`). ``none`` for
    an exploration that has no guard restates it (the command that started it typed again)."""
    from auditor.perception.registry import SENTENCE_EMBEDDERS

    turned_off = spec.strip().lower() == "none"
    if recorded is None and turned_off:
        return None
    if recorded is None or turned_off:
        had = "matched near-duplicates exactly" if recorded is None else f"used {recorded.spec}"
        raise AuditorError(
            f"this exploration {had}; a resume keeps its duplicate guard, so --text-embedder may only say where "
            "that embedder is now"
        )
    SENTENCE_EMBEDDERS.preflight(spec)
    moved = spec_ref(spec)
    return recorded.model_copy(update={"spec": moved.spec, "model_id": moved.model_id})


def resume_exploration(
    run: str,
    store: RunStore,
    cache: ContentCache,
    progress: ProgressReporter,
    resumption: Resumption = Resumption(),
    on_round: Callable[[ExploreRecord], None] | None = None,
) -> Exploration:
    """Reopen an exploration; its own settings are used, and finished work comes from the record and the cache."""
    run_dir, record = reopen_run(run, store, ExploreRecord)
    moved = resumption.models.get("text_embedder")
    if moved is not None:
        record.config.text_embedder = moved_text_embedder(record.config.text_embedder, moved)
        resumption = resumption.without_model("text_embedder")
    point_models(record.config, resumption)
    named = record.config.text_embedder
    # The default is optional on a first attempt (without it the guard matches exactly), not once it has judged
    # proposals: the rounds keep the guard they ran with. An exploration without one (``none`` restated) needs none.
    required = named is not None and (
        moved is not None or named.fingerprint is not None or named_model_is_required(named.spec, DEFAULT_TEXT_EMBEDDER)
    )
    return Exploration(
        run_dir, record, cache, progress, device=resumption.device, text_embedder_required=required, on_round=on_round
    )
