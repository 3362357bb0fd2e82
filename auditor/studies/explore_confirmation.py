"""Explore's confirmation: the top K re-run on fresh seeds, and the findings that hold there.

Apart from the loop (:mod:`auditor.studies.explore`) because it is a different question
from exploring: not which arm leads, but whether the direction an arm showed survives on
seeds past every exploration seed, tested with Benjamini-Hochberg across the arms against
the winner's curse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from auditor.metrics.multiple_testing import benjamini_hochberg
from auditor.records import Arm, ArmStep, Confirmation, ExploreRecord
from auditor.scoring.arms import arm_audit, difference_on, direction, score_arm
from auditor.scoring.intervals import record_interval
from auditor.studies.explore_rounds import fit_images, play_round, start_round
from auditor.studies.explore_standings import find_arm, find_candidate, leading_arms

if TYPE_CHECKING:  # pragma: no cover
    from auditor.studies.explore import Exploration


def confirm_leaders(study: Exploration) -> None:
    """Re-run the top K on fresh seeds; findings are the effects that hold there (Benjamini-Hochberg)."""
    if any(r.phase == "confirm" and r.status == "done" for r in study.record.rounds):
        return
    config = study.config
    current = study.running_round("confirm")
    if current is None:
        top = leading_arms(study.record)
        if not top:
            return
        if config.confirm_images == 0:
            for arm in top:
                arm.confirmation = Confirmation(seeds=0, note="no confirmation was asked for (--confirm-images 0)")
            return
        fresh = range(config.max_images_per_prompt, config.max_images_per_prompt + config.confirm_images)
        # best first: if the budget runs short, the strongest are confirmed
        allocation = fit_images(study, [(arm, fresh) for arm in top], config.max_images - study.record.images_spent)
        for arm in top:
            if arm.arm_id not in allocation.arms:
                arm.confirmation = Confirmation(seeds=0, note=f"--max-images {config.max_images} left no images for it")
        current = start_round(study, len(study.record.rounds) + 1, "confirm", allocation)
    if current.allocated:
        play_round(study, current)
    tested = []
    for arm_id, indices in current.allocated.items():
        arm = find_arm(study.record, arm_id)
        with study.stage("confirm") as outcome:
            arm.confirmation = _confirmation(study.record, arm, indices)
            outcome.computed = 1
        if arm.confirmation.p_value is not None:
            tested.append(arm)
    for arm, q in zip(tested, benjamini_hochberg([arm.confirmation.p_value for arm in tested]), strict=True):
        arm.confirmation.p_adjusted = q
        arm.confirmation.confirmed = q < config.scoring.alpha
    current.scores = [
        ArmStep(arm_id=arm_id, seeds=len(indices), value=find_arm(study.record, arm_id).confirmation.score.value,
                ci=find_arm(study.record, arm_id).confirmation.score.ci)
        for arm_id, indices in current.allocated.items()
    ]  # fmt: skip
    current.top = [arm.arm_id for arm in leading_arms(study.record)]
    current.status = "done"
    study.on_round(study.record)


def _confirmation(record: ExploreRecord, arm: Arm, indices: Sequence[int]) -> Confirmation:
    """The arm's score on fresh seeds and the test of the direction it showed in exploration."""
    audit = arm_audit(record, find_candidate(record, arm.candidate_id), arm.axis, indices)
    score = score_arm(audit, record.config.objective)
    pair = direction(arm.score.axis, record.config.objective)
    if pair is None:
        return Confirmation(
            seeds=len(indices), score=score, note="its exploration scores name no direction to test (no CAS spread)"
        )
    test = difference_on(audit, *pair)
    return Confirmation(
        seeds=len(indices), score=score, first=pair[0], second=pair[1], difference=test.interval.estimate,
        difference_ci=record_interval(test.interval), difference_lower_bound=test.lower_bound, p_value=test.p_value,
        test_method=test.method,
        note=None if test.p_value is not None else "the difference is undefined on the fresh images",
    )  # fmt: skip
