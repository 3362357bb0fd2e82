"""Explore's rounds: which arms get images this round within the budget, and the round's work and scores.

Apart from the loop (:mod:`auditor.studies.explore`) because this is the image bookkeeping:
a round's images are priced (a cache look-up each) and charged before any is generated,
then made and asked in one batch, and every arm that got images is scored again. The
confirmation (:mod:`auditor.studies.explore_confirmation`) prices and plays its round here too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from auditor.core.errors import AuditorError, StartAgainError
from auditor.core.text import first_few
from auditor.executors.generation import PromptRequest, described_text_to_image, uncached
from auditor.executors.perception import AnswerReader, merge_answers
from auditor.records import INITIAL_PROMPT_ID, Arm, ArmStep, ExploreRecord, Round, StopReason
from auditor.reporting.wording import counted
from auditor.scoring.arms import arm_audit, arm_prompts, axis_plan, score_arm, set_id
from auditor.studies.explore_standings import (
    can_propose,
    eliminate_trailing,
    find_arm,
    find_candidate,
    leading_arms,
    prompts_left,
)

if TYPE_CHECKING:  # pragma: no cover
    from auditor.studies.explore import Exploration


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
        super().__init__(study, {}, caption_question, on_answers)
        self.asked = asked

    def questions_for(self, prompt_id: str, index: int) -> dict[str, str]:
        return self.asked[prompt_id, index]


def allocate_round(study: Exploration, number: int) -> Round | None:
    """The round's images per arm, charged to the budget; None (and a stop reason) when no round is possible."""
    config = study.config
    wanting = [arm for arm in study.record.arms if arm.state == "alive" and arm.seeds < config.max_images_per_prompt]
    if not wanting and not study.record.arms:
        rejected = [c for c in study.record.candidates if c.rejected_for is not None]
        reasons = first_few([f"\"{c.prompt}\": {c.reason}" for c in rejected], separator="; ")
        raise StartAgainError(
            f"nothing to explore: every candidate prompt was rejected ({reasons or 'none was proposed'}); "
            "give other seed prompts or another --topic, or more --proposals or --max-prompts"
        )
    if not wanting:
        study.stop_exploring(*why_nothing_left(study.record))
        return None
    reserve = config.confirm_images * sum(
        sorted((prompt_sets(study.record, arm) for arm in study.record.arms), reverse=True)[: config.top_k]
    )
    left = config.max_images - study.record.images_spent - reserve
    allocation = fit_images(
        study,
        [
            (arm, range(arm.seeds, min(arm.seeds + config.seeds_per_round, config.max_images_per_prompt)))
            for arm in by_priority(wanting)
        ],
        left,
    )
    if allocation.arms:
        return start_round(study, number, "explore", allocation)
    top, lower = _confirmed_words(len(study.record.arms), config.top_k)
    if not study.record.rounds:
        raise StartAgainError(
            f"--max-images {config.max_images} buys no round: confirming the {top} keeps {reserve} "
            f"images, and the first arm needs more than the {max(left, 0)} left; raise --max-images, or {lower}"
        )
    study.stop_exploring(
        "max_images",
        f"--max-images {config.max_images}: {study.record.images_spent} spent and {reserve} kept for confirming "
        f"the {top}; the next arm needs more than the {max(left, 0)} left",
    )
    return None


def start_round(study: Exploration, number: int, phase: Literal["explore", "confirm"], allocation: Allocation) -> Round:
    """Charge the allocation to the budget and save the round as running, before any of its images is made."""
    current = Round(
        round=number,
        phase=phase,
        status="running",
        allocated=allocation.arms,
        images_charged=allocation.charged,
        images_reused=allocation.reused,
        images_spent=study.record.images_spent + allocation.charged,
    )
    study.record.images_spent = current.images_spent
    study.record.images_reused += allocation.reused
    study.record.rounds.append(current)
    study.save()
    return current


def why_nothing_left(record: ExploreRecord) -> tuple[StopReason, str]:
    """Why no arm wants images: a candidate budget is spent, or the last proposals brought nothing new."""
    config = record.config
    if config.max_prompts is not None and prompts_left(record) <= 0:
        return "max_prompts", f"--max-prompts {config.max_prompts} reached and every arm is decided"
    if not can_propose(record):
        return "max_llm_calls", f"--max-llm-calls {config.max_llm_calls} spent and every arm is decided"
    return "exhausted", "every arm is decided and the last proposals brought no new arm"


def prompt_sets(record: ExploreRecord, arm: Arm) -> int:
    """Prompt sets of an arm: the initial prompt and its axis's counterfactuals."""
    return len(arm_prompts(find_candidate(record, arm.candidate_id), arm.axis))


def by_priority(arms: Sequence[Arm]) -> list[Arm]:
    """New arms first (in order), then the highest upper bounds: where more images can change the most."""

    def key(arm: Arm) -> tuple:
        if arm.score is None:
            return (0, 0.0)
        high = arm.score.ci.high if arm.score.ci is not None and arm.score.ci.high is not None else float("inf")
        return (1, -high)

    return sorted(arms, key=key)


@dataclass
class Allocation:
    """A round's images per arm, priced before any is made."""

    #: Arm id -> the image indices it gets.
    arms: dict[str, list[int]] = field(default_factory=dict)
    #: Images to generate, charged to the budget (one shared by several arms is charged once).
    charged: int = 0
    #: Images the content cache already holds: taken from it, never charged.
    reused: int = 0


def _confirmed_words(arms: int, top_k: int) -> tuple[str, str]:
    """Which arms a budget keeps images back for, and what would keep fewer back, in words: with fewer arms than
    ``--top`` all of them are kept for, and only a ``--top`` below their number keeps fewer images back."""
    confirm = "--confirm-images (0 keeps none back)"
    if arms >= top_k:
        return f"top {top_k}", f"lower --top or {confirm}" if top_k > 1 else f"lower {confirm}"
    top = f"{counted(arms, 'arm')} there {'is' if arms == 1 else 'are'} (--top {top_k})"
    return top, f"set --top below {arms}, or lower {confirm}" if arms > 1 else f"lower {confirm}"


def fit_images(study: Exploration, wanted: Sequence[tuple[Arm, range]], left: int) -> Allocation:
    """Arms (in order) whose new images fit in ``left``; images shared between arms are priced once.

    What is new and what the cache holds is decided here, before anything is made, so the
    counts stay right when a killed round is resumed and finds its first images cached.
    """
    backend = described_text_to_image(study)
    present = {(s.prompt_id, image.index) for s in study.record.prompt_sets for image in s.images}
    priced: set[tuple[str, int]] = set()
    allocation = Allocation()
    for arm, indices in wanted:
        if not indices:
            continue
        candidate = find_candidate(study.record, arm.candidate_id)
        requests = [
            PromptRequest(set_id(candidate.candidate_id, pid), prompt, indices=tuple(indices))
            for pid, prompt in arm_prompts(candidate, arm.axis).items()
        ]
        items = [
            item
            for request in requests
            for item in request.items(study.config.seeds)
            if (request.prompt_id, item.index) not in present
        ]
        items = [item for item in items if (item.prompt, item.index) not in priced]
        new = uncached(backend, study.cache, items)
        if allocation.charged + len(new) <= left:
            allocation.arms[arm.arm_id] = list(indices)
            allocation.charged += len(new)
            allocation.reused += len(items) - len(new)
            priced |= {(item.prompt, item.index) for item in items}
    return allocation


def play_round(study: Exploration, current: Round) -> None:
    """Generate and perceive the round's images, then score its arms and update who leads."""
    generate_and_perceive(study, current)
    if current.phase == "confirm":
        return
    steps = []
    for arm_id, indices in current.allocated.items():
        arm = find_arm(study.record, arm_id)
        arm.seeds = max(arm.seeds, max(indices) + 1)
        with study.stage("score") as outcome:
            arm.score = score_arm(
                arm_audit(study.record, find_candidate(study.record, arm.candidate_id), arm.axis, range(arm.seeds)),
                study.config.objective,
            )
            outcome.computed = 1
        if arm.score.value is None:
            arm.state, arm.ended_round = "undefined", current.round
            arm.ended_reason = f"its {study.config.objective} is undefined on {arm.seeds} seeds (see its warnings)"
        elif arm.seeds >= study.config.max_images_per_prompt:
            arm.state, arm.ended_round = "full", current.round
            arm.ended_reason = f"reached --max-images-per-prompt {study.config.max_images_per_prompt}"
        steps.append(ArmStep(arm_id=arm_id, seeds=arm.seeds, value=arm.score.value, ci=arm.score.ci))
    current.scores = steps
    eliminate_trailing(study.record, current)
    current.top = [arm.arm_id for arm in leading_arms(study.record)]
    current.alive = sum(1 for arm in study.record.arms if arm.state == "alive")
    current.status = "done"


def generate_and_perceive(study: Exploration, current: Round) -> None:
    """One batch of (prompt set, seed indices) requests through the generate and perceive stages."""
    wanted: dict[str, tuple[str, str | None, set[int]]] = {}
    asked: dict[tuple[str, int], dict[str, str]] = {}  # (set, index) -> the questions of its arms (axis -> question)
    caption = None
    for arm_id, indices in current.allocated.items():
        arm = find_arm(study.record, arm_id)
        candidate = find_candidate(study.record, arm.candidate_id)
        question = axis_plan(candidate, arm.axis).question
        caption = candidate.plan.caption_question if study.config.scoring.include_captions else None
        for pid, prompt in arm_prompts(candidate, arm.axis).items():
            key = set_id(candidate.candidate_id, pid)
            entry = wanted.setdefault(key, (prompt, None if pid == INITIAL_PROMPT_ID else arm.axis, set()))
            entry[2].update(indices)
            for index in indices:
                asked.setdefault((key, index), {})[arm.axis] = question
    requests = [
        PromptRequest(key, prompt, axis, tuple(sorted(indices))) for key, (prompt, axis, indices) in wanted.items()
    ]
    before = dict(study.record.answers)

    def checkpoint(answers) -> None:
        study.record.answers = merge_answers(before, answers)
        study.checkpoint()

    reader = RoundQuestions(study, {key: dict(sorted(q.items())) for key, q in asked.items()}, caption, checkpoint)
    counts = study.run_images(requests, [reader])
    study.record.answers = merge_answers(before, reader.answers())
    current.images_generated += counts.computed
    if current.images_generated > current.images_charged:
        raise AuditorError(
            f"internal error: round {current.round} generated {current.images_generated} images but was charged "
            f"{current.images_charged}"
        )
    study.save()
