"""Explore's propose -> guard -> plan step: a round's candidate prompts, and which of them become arms.

Apart from the loop (:mod:`auditor.studies.explore`) because it owns its own state (the
proposers and the duplicate finder, made once and kept across rounds) and its own budget
bookkeeping (each LLM request charged before it is sent).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from auditor.core.errors import AuditorError
from auditor.core.redaction import redact
from auditor.records import Arm, Candidate, ExploreConfig, ExploreRecord
from auditor.reporting.wording import plan_notes
from auditor.scoring.arms import has_lean
from auditor.studies.explore_standings import (
    can_propose,
    find_candidate,
    leading_candidates,
    llm_calls_left,
    prompts_left,
    ranked_arms,
)
from auditor.studies.planning_stage import PlanRequest, cached_plan, is_cached, replayable_turns

if TYPE_CHECKING:  # pragma: no cover
    from auditor.planning.proposer import LLMProposer
    from auditor.prompting.guard import DuplicateFinder
    from auditor.prompting.topics import OfflineProposer
    from auditor.studies.explore import Exploration

#: Arms shown to the LLM proposer (best first).
LEADERBOARD_LINES = 12


class LLMBudgetSpent(AuditorError):
    """A plan needed a request that ``--max-llm-calls`` no longer covers: a safety net, since a plan starts only
    when the budget covers what it can send (its cached turns could vanish meanwhile, e.g. forgotten by another
    process)."""


class CandidateIntake:
    """Proposes an exploration's candidates, guards them and plans them; the accepted ones bring their arms."""

    def __init__(self, study: Exploration):
        self.study = study
        self._offline: OfflineProposer | None = None
        self._llm: LLMProposer | None = None
        self._duplicates: DuplicateFinder | None = None

    @property
    def record(self) -> ExploreRecord:
        return self.study.record

    @property
    def config(self) -> ExploreConfig:
        return self.study.record.config

    def propose(self, number: int) -> None:
        """Add this round's candidates (seeds in round 1, then the proposer's), then guard and plan each.

        The proposals are recorded before any is admitted, so an interrupted round admits the
        same candidates when it resumes.
        """
        if not any(c.round == number for c in self.record.candidates):
            proposals: list[tuple[str, str | None, str | None, str]] = []  # prompt, parent, origin, proposed by
            if number == 1:
                proposals += [(seed, None, "seed prompt", "seed") for seed in self.config.seed_prompts]
            count = int(min(self.config.proposals_per_round, prompts_left(self.record) - len(proposals)))
            if count > 0 and can_propose(self.record):
                if self.config.llm == "offline":
                    from auditor.prompting.guard import normalised

                    earlier = {
                        normalised(text)
                        for text in [c.prompt for c in self.record.candidates] + [p[0] for p in proposals]
                    }
                    offered = self._offline_proposer().propose(count, earlier, leading_candidates(self.record))
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
                    )
                )
            self.study.save()
        for candidate in self.record.candidates:
            if candidate.round == number and not candidate.accepted and candidate.rejected_for is None:
                self._admit(candidate)
                self.study.save()

    def _offline_proposer(self) -> OfflineProposer:
        if self._offline is None:
            from auditor.prompting.topics import OfflineProposer

            self._offline = OfflineProposer.build(self.config.topic, self.config.seed_prompts)
        return self._offline

    def _llm_proposals(self, number: int, count: int) -> list[tuple[str, str | None, str | None, str]]:
        from auditor.planning.proposer import LLMProposer, ProposerRequest

        if self._llm is None:
            self._llm = LLMProposer(
                self.config.llm, self.study.cache, temperature=self.config.llm_temperature, seed=self.config.llm_seed
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
            self.study.save()
        proposed, conversation = self._llm.propose(request, [c.candidate_id for c in self.record.candidates])
        self.record.proposals += conversation
        return [(p.prompt, p.parent, f"LLM round {number}", "llm") for p in proposed]

    def _leaderboard_lines(self) -> list[str]:
        lines = []
        for arm in ranked_arms(self.record)[:LEADERBOARD_LINES]:
            candidate = find_candidate(self.record, arm.candidate_id)
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
        if prompts_left(self.record) <= 0:
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

            self._duplicates = DuplicateFinder(self.config.duplicate_threshold, self._text_embedder(), self.study.cache)
        return self._duplicates

    def _text_embedder(self):
        """The guard's sentence embedder, or None (exact matches) when none is set or the default is missing."""
        from auditor.perception.registry import SENTENCE_EMBEDDERS

        ref = self.config.text_embedder
        if ref is None:
            return None
        try:
            embedder = self.study.models.get(
                "sentence", ref.spec, lambda: SENTENCE_EMBEDDERS.load(ref.spec, options=self.study.load_options())
            )
        except AuditorError as exc:
            if self.study.text_embedder_required:
                raise
            reason = redact(str(exc))
            self.config.text_embedder = None
            self.study.record.text_embedder_skipped = reason  # kept before it is said, as an embedder's skip is
            self.study.progress.notice(
                f"near-duplicates by exact match only: {reason} (pass --text-embedder none to silence this)"
            )
            return None
        loaded = embedder.ref.model_copy(update={"spec": ref.spec})
        if ref.fingerprint is not None and loaded.fingerprint != ref.fingerprint:  # a resume's --text-embedder
            raise AuditorError(
                f"this exploration's earlier rounds found near-duplicates with other weights than --text-embedder "
                f"{ref.spec} (fingerprint {ref.fingerprint[:12]}; now {(loaded.fingerprint or 'none')[:12]}); "
                "resume it with the embedder it ran with, or start a new exploration"
            )
        self.config.text_embedder = loaded
        return embedder

    def _plan(self, candidate: Candidate):
        """The candidate's plan through the cache; each LLM request is charged before it is sent.

        A plan may take 3 + retries requests, so it starts only when the budget holds that many,
        less the turns the cache replays (those of an attempt cut off mid-conversation, or of
        another plan of the same conversation).
        """
        config = self.config
        request = PlanRequest.asked(candidate.prompt, config)
        if request.planner != "offline" and not is_cached(self.study.cache, request):
            replayed = replayable_turns(self.study.cache, request)
            needed = 0 if replayed is None else 3 + config.llm_retries - replayed
            if needed > llm_calls_left(self.record):
                self._reject(
                    candidate, "budget", f"--max-llm-calls {config.max_llm_calls} leaves too few requests to plan it"
                )
                return None
        with self.study.stage("plan") as outcome:
            try:  # inside the stage: a rejected candidate is not a failing run (the stage would be named in its error)
                plan, cached = cached_plan(self.study.cache, request, lambda: self._charge(candidate))
            except AuditorError as exc:
                self._reject(candidate, "budget" if isinstance(exc, LLMBudgetSpent) else "plan", str(exc))
                return None
            outcome.cached, outcome.computed = (1, 0) if cached else (0, 1)
        for note in plan_notes(plan):
            self.study.progress.notice(note)
        return plan

    def _charge(self, candidate: Candidate) -> None:
        """Count one plan request before it is sent (saved, so a kill cannot lose it); none past the budget."""
        if llm_calls_left(self.record) < 1:
            raise LLMBudgetSpent(f"--max-llm-calls {self.config.max_llm_calls} was spent while planning it")
        self.record.llm_calls += 1
        candidate.llm_calls += 1
        self.study.save()
