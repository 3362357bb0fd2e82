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

Then :meth:`Exploration.confirm` re-runs the top K on fresh seeds (indices past every
exploration seed) and keeps as findings only the effects that hold there, with
Benjamini-Hochberg across the arms, against the winner's curse.

**Budgets.** An image counts against ``--max-images`` when it has to be generated; an image
found in the content cache costs nothing and is not counted. A round's images are priced
(a cache look-up per image) and charged before any is generated, so no run, interrupted or
not, generates more than the budget; a resumed round generates only what its charge
covered. LLM requests are charged the same way (a plan its worst case, 3 + retries, settled
once it is made). ``--time`` is checked between rounds.

**Resume.** The record holds every candidate, arm and round, the last round's allocation
included, and every image, answer, plan and proposal comes from the content cache, so an
interrupted exploration continues where it stopped and recomputes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.core.cache import ContentCache
from auditor.core.environment import collect_environment
from auditor.core.errors import AuditorError
from auditor.core.store import RECORD_FILE, RunStore, new_run_id
from auditor.executors.generation import PromptRequest, uncached
from auditor.executors.perception import AnswerReader, merge_answers
from auditor.metrics.allocation import Bounds, eliminated, separated, top_arms
from auditor.metrics.multiple_testing import benjamini_hochberg
from auditor.records import (
    INITIAL_PROMPT_ID,
    Arm,
    ArmStep,
    Candidate,
    Confirmation,
    ExploreConfig,
    ExploreRecord,
    GenerationSettings,
    Objective,
    PerceptionSettings,
    Round,
    ScoringSettings,
    StopReason,
    load_record,
)
from auditor.scoring.arms import (
    arm_audit,
    arm_prompts,
    axis_plan,
    difference_on,
    direction,
    has_lean,
    score_arm,
    set_id,
)
from auditor.studies.planning_stage import PlanRequest, cached_plan, is_cached
from auditor.studies.progress import ProgressReporter
from auditor.studies.prompt_audit import IMAGES_PER_VQA_CALL, point_models
from auditor.studies.run import ModelPool, StudyRun, spec_ref

if TYPE_CHECKING:  # pragma: no cover
    from auditor.planning.proposer import LLMProposer
    from auditor.prompting.guard import DuplicateFinder
    from auditor.prompting.topics import OfflineProposer

#: The sentence embedder the guard uses by default (skipped, with exact matching, when absent).
DEFAULT_TEXT_EMBEDDER = "minilm"
#: Seconds between partial saves of the record during a stage.
CHECKPOINT_SECONDS = 2.0
#: Arms shown to the LLM proposer (best first).
LEADERBOARD_LINES = 12


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
    from auditor.executors import check_executor
    from auditor.generation.registry import T2I_BACKENDS
    from auditor.perception.registry import SENTENCE_EMBEDDERS, VQA_BACKENDS
    from auditor.planning import check_llm_spec
    from auditor.planning.offline import check_axes

    options.seeds = [" ".join(seed.split()) for seed in options.seeds if seed.strip()]
    options.topic = " ".join(options.topic.split()) if options.topic and options.topic.strip() else None
    if not options.seeds and not options.topic:
        raise AuditorError('give seed prompts or --topic, e.g. auditor explore --topic "people at work"')
    options.llm = check_llm_spec(options.llm)
    if options.axes is not None:
        options.axes = check_axes(options.axes)
        if options.objective == "lean" and "gender" not in options.axes:
            raise AuditorError("--objective lean measures CAS(male) - CAS(female): --axes must include gender")
    checks = [
        (options.top_k >= 1, f"--top must be at least 1 (got {options.top_k})"),
        (
            options.seeds_per_round >= 2,
            f"--seeds-per-round must be at least 2, for an interval (got {options.seeds_per_round})",
        ),
        (options.proposals_per_round >= 1, f"--proposals must be at least 1 (got {options.proposals_per_round})"),
        (options.max_images >= 1, f"--max-images must be at least 1 (got {options.max_images})"),
        (
            options.max_images_per_prompt >= options.seeds_per_round,
            f"--max-images-per-prompt ({options.max_images_per_prompt}) must be at least --seeds-per-round "
            f"({options.seeds_per_round})",
        ),
        (options.confirm_images >= 0, f"--confirm-images must be 0 or more (got {options.confirm_images})"),
        (options.confirm_images != 1, "--confirm-images must be 0 (no confirmation) or at least 2, for an interval"),
        (options.max_llm_calls is None or options.max_llm_calls >= 0, "--max-llm-calls must be 0 or more"),
        (options.max_prompts is None or options.max_prompts >= 1, "--max-prompts must be at least 1"),
        (options.time_limit is None or options.time_limit > 0, "--time must be more than 0"),
        (0 < options.duplicate_threshold <= 1, "--duplicate-threshold must lie in (0, 1]"),
        (options.scoring.bootstrap >= 1, "explore needs intervals: --bootstrap must be at least 1"),
    ]
    for ok, message in checks:
        if not ok:
            raise AuditorError(message)
    check_executor(options.executor)
    T2I_BACKENDS.preflight(options.t2i)
    VQA_BACKENDS.preflight(options.vqa)
    if options.text_embedder:
        SENTENCE_EMBEDDERS.check(options.text_embedder)


def new_config(options: ExploreOptions) -> ExploreConfig:
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


class RoundQuestions(AnswerReader):
    """A round's VQA stage: each image is asked the questions of the arms it serves (an initial prompt's
    image: every arm of its candidate that was given its seed), with one load of the VQA model."""

    def __init__(
        self,
        study: Exploration,
        asked: dict[tuple[str, int], dict[str, str]],
        caption_question: str | None,
        on_answers: Callable[[dict], None],
    ):
        super().__init__(study, IMAGES_PER_VQA_CALL, {}, caption_question, on_answers)
        self.asked = asked

    def questions_for(self, prompt_id: str, index: int) -> dict[str, str]:
        return self.asked[prompt_id, index]


class Exploration(StudyRun[ExploreRecord]):
    """One exploration in its run folder: rounds of propose -> guard -> plan -> allocate, then confirm."""

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
        self._offline: OfflineProposer | None = None
        self._llm: LLMProposer | None = None
        self._duplicates: DuplicateFinder | None = None

    @property
    def config(self) -> ExploreConfig:
        return self.record.config

    def run(self) -> ExploreRecord:
        """Run (or resume) the exploration and the confirmation; the record's status says how it ended."""
        self.execute([("explore", self.explore), ("confirm", self.confirm)])
        return self.record

    def after_end(self) -> None:
        """Release the models and write ``report.html``, however the run ended."""
        from auditor.reporting.explore import write_explore_report

        self.models.release()
        with self.stage("report"):
            write_explore_report(self.record, self.run_dir)
        self.save()

    # ------------------------------------------------------------------ the loop

    def explore(self) -> None:
        """Rounds until a budget is spent, the leaders are separated, or nothing is left to do."""
        record = self.record
        started, before = time.monotonic(), record.elapsed

        def tick() -> None:
            record.elapsed = before + time.monotonic() - started

        while record.stop_reason is None:
            current = self._running("explore")
            if current is None:
                tick()
                if self.config.time_limit is not None and record.elapsed >= self.config.time_limit:
                    self._stop("time", f"--time {self.config.time_limit:g} s spent ({record.elapsed:.0f} s explored)")
                    break
                number = sum(1 for r in record.rounds if r.phase == "explore") + 1
                if record.proposed_rounds < number:
                    with self.stage("propose") as outcome:
                        self._propose(number)
                        outcome.computed = sum(1 for c in record.candidates if c.round == number)
                    record.proposed_rounds = number
                    self.save()
                current = self._allocate(number)
                if current is None:
                    break
            self._play(current)
            tick()
            self.save()
            self.on_round(record)
            if separated(self._bounds(), self._leaders(), self.config.top_k):
                top = ", ".join(arm.arm_id for arm in self._top())
                self._stop("separated", f"the top {self.config.top_k} ({top}) are separated from every other arm")
        tick()
        self.save()

    def _running(self, phase: str) -> Round | None:
        last = self.record.rounds[-1] if self.record.rounds else None
        return last if last is not None and last.status == "running" and last.phase == phase else None

    def _stop(self, reason: StopReason, detail: str) -> None:
        self.record.stop_reason, self.record.stop_detail = reason, detail
        self.save()

    # ------------------------------------------------------------------ propose, guard, plan

    def _propose(self, number: int) -> None:
        """Add this round's candidates (seeds in round 1, then the proposer's), then guard and plan each.

        The proposals are recorded before any is admitted, so an interrupted round admits the
        same candidates when it resumes.
        """
        if not any(c.round == number for c in self.record.candidates):
            proposals: list[tuple[str, str | None, str | None, str]] = []  # prompt, parent, origin, proposed by
            if number == 1:
                proposals += [(seed, None, "seed prompt", "seed") for seed in self.config.seed_prompts]
            count = int(min(self.config.proposals_per_round, self._room() - len(proposals)))
            if count > 0 and self._can_propose():
                if self.config.llm == "offline":
                    from auditor.prompting.guard import normalised

                    earlier = {
                        normalised(text)
                        for text in [c.prompt for c in self.record.candidates] + [p[0] for p in proposals]
                    }
                    offered = self._offline_proposer().propose(count, earlier, self._leading_candidates())
                    proposals += [(p.prompt, p.parent, p.origin, "offline") for p in offered]
                else:
                    proposals += self._llm_proposals(number, count)
            for prompt, parent, origin, proposer in proposals:
                self.record.candidates.append(
                    Candidate(
                        candidate_id=f"c{len(self.record.candidates) + 1:03d}",
                        prompt=prompt,
                        round=number,
                        proposed_by=proposer,
                        parent=parent,
                        origin=origin,
                        accepted=False,
                    )  # fmt: skip
                )
            self.save()
        for candidate in self.record.candidates:
            if candidate.round == number and not candidate.accepted and candidate.rejected_for is None:
                self._admit(candidate)
                self.save()

    def _room(self) -> float:
        """Candidates that may still be accepted (--max-prompts)."""
        if self.config.max_prompts is None:
            return float("inf")
        return self.config.max_prompts - sum(1 for c in self.record.candidates if c.accepted)

    def _can_propose(self) -> bool:
        """Whether the proposer may run: offline always; the LLM while --max-llm-calls leaves a request for the
        proposals and, when the LLM plans too (no --axes), the worst case of one plan."""
        if self.config.llm == "offline":
            return True
        plan = 0 if self.config.axes is not None else 3 + self.config.llm_retries
        return self._calls_left() >= 1 + plan

    def _calls_left(self) -> float:
        limit = self.config.max_llm_calls
        return float("inf") if limit is None else limit - self.record.llm_calls

    def _offline_proposer(self) -> OfflineProposer:
        if self._offline is None:
            from auditor.prompting.topics import OfflineProposer

            self._offline = OfflineProposer.build(self.config.topic, self.config.seed_prompts)
        return self._offline

    def _llm_proposals(self, number: int, count: int) -> list[tuple[str, str | None, str | None, str]]:
        from auditor.planning.proposer import LLMProposer, ProposerRequest

        if self._llm is None:
            self._llm = LLMProposer(
                self.config.llm, self.cache, temperature=self.config.llm_temperature, seed=self.config.llm_seed
            )
        request = ProposerRequest(
            count=count,
            topic=self.config.topic,
            seeds=self.config.seed_prompts,
            axes=self.config.axes or [],
            leaderboard=self._leaderboard_lines() if number > 1 else (),
            earlier=[c.prompt for c in self.record.candidates],
        )
        if not self._llm.is_cached(request):
            self.record.llm_calls += 1  # charged before the request, so an interrupted one is counted
            self.save()
        proposed, conversation = self._llm.propose(request, [c.candidate_id for c in self.record.candidates])
        self.record.proposals += conversation
        return [(p.prompt, p.parent, f"LLM round {number}", "llm") for p in proposed]

    def _leaderboard_lines(self) -> list[str]:
        lines = []
        for arm in self._ranked()[:LEADERBOARD_LINES]:
            candidate = self._candidate(arm.candidate_id)
            score = arm.score
            interval = (
                f" [{score.ci.low:.4f}, {score.ci.high:.4f}]"
                if score.ci is not None and score.ci.low is not None and score.ci.high is not None
                else ""
            )
            lines.append(f"{candidate.candidate_id} | {candidate.prompt} | {arm.axis} | {score.value:.4f}{interval}")
        return lines

    def _admit(self, candidate: Candidate) -> bool:
        """Guard and plan a candidate; on success its arms join. Whether it was accepted."""
        from auditor.prompting.guard import IndicatorWords

        words = IndicatorWords.builtin()
        found = words.found(candidate.prompt, self.config.axes or words.axes())
        if found is not None:
            return self._reject(candidate, "indicator_word", f"names {found[1]!r}, a value of the {found[0]} axis")
        earlier = [(c.candidate_id, c.prompt) for c in self.record.candidates if c.accepted]
        duplicate = self._duplicate_finder().find(candidate.prompt, earlier)
        if duplicate is not None:
            how = (
                "repeats"
                if duplicate.similarity >= 1.0
                else f"is a near-duplicate (cosine {duplicate.similarity:.3f}) of"
            )
            return self._reject(candidate, "duplicate", f"{how} {duplicate.candidate_id} {duplicate.prompt!r}")
        if self._room() <= 0:
            return self._reject(candidate, "budget", f"--max-prompts {self.config.max_prompts} reached")
        plan = self._plan(candidate)
        if plan is None:
            return False
        axes = [axis for axis in plan.axes if self.config.objective == "bav" or has_lean(axis.counterfactuals)]
        if not axes:
            return self._reject(candidate, "no_arm", "its plan has no axis with one male and one female counterfactual")
        candidate.plan = plan
        candidate.accepted = True
        self.record.arms += [
            Arm(arm_id=f"{candidate.candidate_id}/{axis.name}", candidate_id=candidate.candidate_id, axis=axis.name)
            for axis in axes
        ]
        return True

    def _reject(self, candidate: Candidate, why: str, reason: str) -> bool:
        candidate.rejected_for, candidate.reason = why, reason
        return False

    def _duplicate_finder(self) -> DuplicateFinder:
        if self._duplicates is None:
            from auditor.prompting.guard import DuplicateFinder

            self._duplicates = DuplicateFinder(self.config.duplicate_threshold, self._text_embedder(), self.cache)
        return self._duplicates

    def _text_embedder(self):
        """The guard's sentence embedder, or None (exact matches) when none is set or the default is missing."""
        from auditor.perception.registry import SENTENCE_EMBEDDERS

        ref = self.config.text_embedder
        if ref is None:
            return None
        try:
            embedder = self.models.get(
                "sentence", ref.spec, lambda: SENTENCE_EMBEDDERS.load(ref.spec, options=self.load_options())
            )
        except AuditorError as exc:
            if self.text_embedder_required:
                raise
            self.progress.notice(
                f"near-duplicates by exact match only: {exc} (pass --text-embedder none to silence this)"
            )
            self.config.text_embedder = None
            return None
        self.config.text_embedder = embedder.ref.model_copy(update={"spec": ref.spec})
        return embedder

    def _plan(self, candidate: Candidate):
        """The candidate's plan through the cache; LLM requests charged first (worst case), then settled."""
        from auditor.planning import transcript_of

        config = self.config
        request = PlanRequest(
            prompt=candidate.prompt,
            llm=config.llm,
            max_axes=config.max_axes,
            max_counterfactuals=config.max_counterfactuals,
            retries=config.llm_retries,
            temperature=config.llm_temperature,
            seed=config.llm_seed,
            axes=tuple(config.axes) if config.axes is not None else None,
        )
        worst = 0 if request.planner == "offline" or is_cached(self.cache, request) else 3 + config.llm_retries
        if worst > self._calls_left():
            self._reject(
                candidate, "budget", f"--max-llm-calls {config.max_llm_calls} leaves too few requests to plan it"
            )
            return None
        self.record.llm_calls += worst
        self.save()
        try:
            with self.stage("plan") as outcome:
                plan, cached = cached_plan(self.cache, request)
                outcome.cached, outcome.computed = (1, 0) if cached else (0, 1)
        except AuditorError as exc:
            self._settle(candidate, worst, transcript_of(exc))
            self._reject(candidate, "plan", str(exc))
            return None
        self._settle(candidate, worst, [] if cached else plan.transcript)
        return plan

    def _settle(self, candidate: Candidate, charged: int, transcript) -> None:
        """Replace a plan's worst-case charge by the requests it made (its LLM replies)."""
        if charged:
            made = sum(1 for message in transcript if message.role == "assistant")
            candidate.llm_calls = made
            self.record.llm_calls += made - charged

    # ------------------------------------------------------------------ allocate

    def _allocate(self, number: int) -> Round | None:
        """The round's images per arm, charged to the budget; None (and a stop reason) when no round is possible."""
        config = self.config
        wanting = [arm for arm in self.record.arms if arm.state == "alive" and arm.seeds < config.max_images_per_prompt]
        if not wanting:
            self._stop(*self._why_nothing_left())
            return None
        reserve = config.confirm_images * sum(
            sorted((self._sets(arm) for arm in self.record.arms), reverse=True)[: config.top_k]
        )
        left = config.max_images - self.record.images_spent - reserve
        allocated, charged = self._fit(
            [
                (arm, range(arm.seeds, min(arm.seeds + config.seeds_per_round, config.max_images_per_prompt)))
                for arm in self._priority(wanting)
            ],
            left,
        )
        if not allocated:
            self._stop(
                "max_images",
                f"--max-images {config.max_images}: {self.record.images_spent} spent and {reserve} kept for confirming "
                f"the top {config.top_k}; the next arm needs more than the {max(left, 0)} left",
            )
            return None
        spent = self.record.images_spent + charged
        current = Round(
            round=number,
            phase="explore",
            status="running",
            allocated=allocated,
            images_charged=charged,
            images_spent=spent,
        )
        self.record.images_spent = spent
        self.record.rounds.append(current)
        self.save()
        return current

    def _why_nothing_left(self) -> tuple[StopReason, str]:
        """Why no arm wants images: a candidate budget is spent, or the last proposals brought nothing new."""
        config = self.config
        if config.max_prompts is not None and self._room() <= 0:
            return "max_prompts", f"--max-prompts {config.max_prompts} reached and every arm is decided"
        if not self._can_propose():
            return "max_llm_calls", f"--max-llm-calls {config.max_llm_calls} spent and every arm is decided"
        return "exhausted", "every arm is decided and the last proposals brought no new candidate"

    def _sets(self, arm: Arm) -> int:
        """Prompt sets of an arm: the initial prompt and its axis's counterfactuals."""
        return len(arm_prompts(self._candidate(arm.candidate_id), arm.axis))

    def _priority(self, arms: Sequence[Arm]) -> list[Arm]:
        """New arms first (in order), then the highest upper bounds: where more images can change the most."""

        def key(arm: Arm) -> tuple:
            if arm.score is None:
                return (0, 0.0)
            high = arm.score.ci.high if arm.score.ci is not None and arm.score.ci.high is not None else float("inf")
            return (1, -high)

        return sorted(arms, key=key)

    def _fit(self, wanted: Sequence[tuple[Arm, range]], left: int) -> tuple[dict[str, list[int]], int]:
        """Arms (in order) whose new images fit in ``left``; images shared between arms are priced once."""
        backend = self.text_to_image()
        present = {(s.prompt_id, image.index) for s in self.record.prompt_sets for image in s.images}
        counted: set[tuple[str, int]] = set()
        allocated: dict[str, list[int]] = {}
        charged = 0
        for arm, indices in wanted:
            if not indices:
                continue
            candidate = self._candidate(arm.candidate_id)
            requests = [
                PromptRequest(set_id(candidate.candidate_id, pid), prompt, indices=tuple(indices))
                for pid, prompt in arm_prompts(candidate, arm.axis).items()
            ]
            items = [
                item
                for request in requests
                for item in request.items(self.config.seeds)
                if (request.prompt_id, item.index) not in present
            ]
            new = [item for item in uncached(backend, self.cache, items) if (item.prompt, item.index) not in counted]
            if charged + len(new) <= left:
                allocated[arm.arm_id] = list(indices)
                charged += len(new)
                counted |= {(item.prompt, item.index) for item in new}
        return allocated, charged

    # ------------------------------------------------------------------ a round's work

    def _play(self, current: Round) -> None:
        """Generate and perceive the round's images, then score its arms and update who leads."""
        self._work(current)
        if current.phase == "confirm":
            return
        steps = []
        for arm_id, indices in current.allocated.items():
            arm = self._arm(arm_id)
            arm.seeds = max(arm.seeds, max(indices) + 1)
            with self.stage("score") as outcome:
                arm.score = score_arm(
                    arm_audit(self.record, self._candidate(arm.candidate_id), arm.axis, range(arm.seeds)),
                    self.config.objective,
                )
                outcome.computed = 1
            if arm.score.value is None:
                arm.state, arm.ended_round = "undefined", current.round
                arm.ended_reason = f"its {self.config.objective} is undefined on {arm.seeds} seeds (see its warnings)"
            elif arm.seeds >= self.config.max_images_per_prompt:
                arm.state, arm.ended_round = "full", current.round
                arm.ended_reason = f"reached --max-images-per-prompt {self.config.max_images_per_prompt}"
            steps.append(ArmStep(arm_id=arm_id, seeds=arm.seeds, value=arm.score.value, ci=arm.score.ci))
        current.scores = steps
        self._eliminate(current)
        current.top = [arm.arm_id for arm in self._top()]
        current.alive = sum(1 for arm in self.record.arms if arm.state == "alive")
        current.status = "done"

    def _work(self, current: Round) -> None:
        """One batch of (prompt set, seed indices) requests through the generate and perceive stages."""
        wanted: dict[str, tuple[str, str | None, set[int]]] = {}
        asked: dict[tuple[str, int], dict[str, str]] = {}  # (set, index) -> the questions of its arms (axis -> question)
        caption = None
        for arm_id, indices in current.allocated.items():
            arm = self._arm(arm_id)
            candidate = self._candidate(arm.candidate_id)
            question = axis_plan(candidate, arm.axis).question
            caption = candidate.plan.caption_question if self.config.scoring.include_captions else None
            for pid, prompt in arm_prompts(candidate, arm.axis).items():
                key = set_id(candidate.candidate_id, pid)
                entry = wanted.setdefault(key, (prompt, None if pid == INITIAL_PROMPT_ID else arm.axis, set()))
                entry[2].update(indices)
                for index in indices:
                    asked.setdefault((key, index), {})[arm.axis] = question
        requests = [
            PromptRequest(key, prompt, axis, tuple(sorted(indices))) for key, (prompt, axis, indices) in wanted.items()
        ]
        before = dict(self.record.answers)

        def checkpoint(answers) -> None:
            self.record.answers = merge_answers(before, answers)
            self.checkpoint()

        reader = RoundQuestions(self, {key: dict(sorted(q.items())) for key, q in asked.items()}, caption, checkpoint)
        counts = self.run_images(requests, [reader])
        self.record.answers = merge_answers(before, reader.answers())
        current.images_generated += counts.computed
        current.images_reused += counts.cached
        self.record.images_reused += counts.cached
        if current.images_generated > current.images_charged:
            raise AuditorError(
                f"internal error: round {current.round} generated {current.images_generated} images but was charged "
                f"{current.images_charged}"
            )
        self.save()

    # ------------------------------------------------------------------ who leads

    def _bounds(self) -> list[Bounds]:
        """Every arm's bounds; eliminated and undefined arms keep theirs but never lead (see :meth:`_leaders`)."""
        return [
            Bounds(
                value=arm.score.value if arm.score is not None else None,
                low=arm.score.ci.low if arm.score is not None and arm.score.ci is not None else None,
                high=arm.score.ci.high if arm.score is not None and arm.score.ci is not None else None,
            )
            for arm in self.record.arms
        ]

    def _leaders(self) -> list[int]:
        """Indices of the top K among the arms still in contention (alive or full)."""
        bounds = self._bounds()
        contending = [
            Bounds(None, None, None) if arm.state in ("eliminated", "undefined") else bound
            for arm, bound in zip(self.record.arms, bounds, strict=True)
        ]
        return top_arms(contending, self.config.top_k)

    def _top(self) -> list[Arm]:
        return [self.record.arms[i] for i in self._leaders()]

    def _eliminate(self, current: Round) -> None:
        bounds = self._bounds()
        leaders = self._leaders()
        threshold = min((bounds[i].low for i in leaders if bounds[i].low is not None), default=None)
        for i in eliminated(bounds, leaders):
            arm = self.record.arms[i]
            if arm.state in ("alive", "full"):
                arm.state, arm.ended_round = "eliminated", current.round
                arm.ended_reason = (
                    f"upper bound {bounds[i].high:.4f} below the top {self.config.top_k}'s lowest lower bound "
                    f"{threshold:.4f}"
                )
                current.eliminated.append(arm.arm_id)

    def _ranked(self) -> list[Arm]:
        """Scored arms, highest objective first."""
        scored = [arm for arm in self.record.arms if arm.score is not None and arm.score.value is not None]
        return sorted(scored, key=lambda arm: -arm.score.value)

    def _leading_candidates(self) -> list[tuple[str, str]]:
        """``(candidate id, prompt)`` of the leading arms' candidates, best first, each once."""
        found: dict[str, str] = {}
        for arm in self._top():
            found.setdefault(arm.candidate_id, self._candidate(arm.candidate_id).prompt)
        return list(found.items())

    def _candidate(self, candidate_id: str) -> Candidate:
        return next(c for c in self.record.candidates if c.candidate_id == candidate_id)

    def _arm(self, arm_id: str) -> Arm:
        return next(arm for arm in self.record.arms if arm.arm_id == arm_id)

    # ------------------------------------------------------------------ confirm

    def confirm(self) -> None:
        """Re-run the top K on fresh seeds; findings are the effects that hold there (Benjamini-Hochberg)."""
        if any(r.phase == "confirm" and r.status == "done" for r in self.record.rounds):
            return
        config = self.config
        current = self._running("confirm")
        if current is None:
            top = self._top()
            if not top:
                return
            if config.confirm_images == 0:
                for arm in top:
                    arm.confirmation = Confirmation(seeds=0, note="no confirmation was asked for (--confirm-images 0)")
                return
            fresh = range(config.max_images_per_prompt, config.max_images_per_prompt + config.confirm_images)
            # best first: if the budget runs short, the strongest are confirmed
            allocated, charged = self._fit([(arm, fresh) for arm in top], config.max_images - self.record.images_spent)
            for arm in top:
                if arm.arm_id not in allocated:
                    arm.confirmation = Confirmation(
                        seeds=0, note=f"--max-images {config.max_images} left no images for it"
                    )
            number = len(self.record.rounds) + 1
            current = Round(
                round=number, phase="confirm", status="running", allocated=allocated, images_charged=charged,
                images_spent=self.record.images_spent + charged,
            )  # fmt: skip
            self.record.images_spent += charged
            self.record.rounds.append(current)
            self.save()
        if current.allocated:
            self._play(current)
        tested = []
        for arm_id, indices in current.allocated.items():
            arm = self._arm(arm_id)
            with self.stage("confirm") as outcome:
                arm.confirmation = self._confirmation(arm, indices)
                outcome.computed = 1
            if arm.confirmation.p_value is not None:
                tested.append(arm)
        for arm, q in zip(tested, benjamini_hochberg([arm.confirmation.p_value for arm in tested]), strict=True):
            arm.confirmation.p_adjusted = q
            arm.confirmation.confirmed = q < config.scoring.alpha
        current.scores = [
            ArmStep(arm_id=arm_id, seeds=len(indices), value=self._arm(arm_id).confirmation.score.value,
                    ci=self._arm(arm_id).confirmation.score.ci)
            for arm_id, indices in current.allocated.items()
        ]  # fmt: skip
        current.top = [arm.arm_id for arm in self._top()]
        current.status = "done"
        self.on_round(self.record)

    def _confirmation(self, arm: Arm, indices: Sequence[int]) -> Confirmation:
        """The arm's score on fresh seeds and the test of the direction it showed in exploration."""
        audit = arm_audit(self.record, self._candidate(arm.candidate_id), arm.axis, indices)
        score = score_arm(audit, self.config.objective)
        pair = direction(arm.score.axis, self.config.objective)
        if pair is None:
            return Confirmation(
                seeds=len(indices), score=score, note="its exploration scores name no direction to test (no CAS spread)"
            )
        difference, ci, p = difference_on(audit, *pair)
        return Confirmation(
            seeds=len(indices), score=score, first=pair[0], second=pair[1], difference=difference, difference_ci=ci,
            p_value=p, note=None if p is not None else "the difference is undefined on the fresh images",
        )  # fmt: skip


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
    run_dir = store.create(run_name or new_run_id(f"explore {subject}"))
    record = ExploreRecord(run_id=run_dir.name, config=config, environment=collect_environment())
    exploration = Exploration(
        run_dir, record, cache, progress,
        device=options.device, text_embedder_required=options.text_embedder_required, on_round=on_round,
    )  # fmt: skip
    exploration.save()
    return exploration


def resume_exploration(
    run: str,
    store: RunStore,
    cache: ContentCache,
    progress: ProgressReporter,
    *,
    device: str | None = None,
    models: dict[str, str] | None = None,
    vqa_concurrency: int | None = None,
    allow_partial_weights: bool = False,
    executor: str | None = None,
    on_round: Callable[[ExploreRecord], None] | None = None,
) -> Exploration:
    """Reopen an exploration; its own settings are used, and finished work comes from the record and the cache."""
    run_dir = store.resolve(run)
    record = load_record(run_dir / RECORD_FILE, ExploreRecord)
    point_models(record.config, models, vqa_concurrency, allow_partial_weights, executor)
    return Exploration(run_dir, record, cache, progress, device=device, on_round=on_round)
