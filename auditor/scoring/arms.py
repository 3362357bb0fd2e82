"""An exploration's arms scored as what they are: one-axis prompt audits on some of their seeds.

An arm (candidate prompt x axis) on image indices ``I`` is the prompt audit ``auditor prompt
PROMPT`` would record with a plan of that one axis and the seeds of ``I``: the same images
(same cache keys), the same answers (the axis's question and the caption), scored by the same
:func:`~auditor.scoring.intervals.score_run`, paired bootstrap included. So an arm's BAV and
its interval are the numbers a standalone audit of that prompt and axis would give, and the
allocation's bounds come from :mod:`auditor.scoring.uncertainty` on the arm's images so far.

The objective is BAV, or |lean| = |CAS(male) - CAS(female)|, whose interval is the lean's
folded at 0 (:func:`auditor.metrics.allocation.folded_interval`). Confirmation tests the
direction an arm showed in exploration (the counterfactual its images resembled most against
the one they resembled least, or male against female) on fresh seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from auditor.core.errors import AuditorError
from auditor.metrics.allocation import folded_interval
from auditor.metrics.tibet import prompt_gender
from auditor.records import (
    INITIAL_PROMPT_ID,
    ArmScore,
    AxisPlan,
    AxisScore,
    Candidate,
    ExploreRecord,
    GeneratedImage,
    ImageAnswers,
    Interval,
    Objective,
    PromptSet,
    RunConfig,
    RunRecord,
    counterfactual_id,
)

if TYPE_CHECKING:  # pragma: no cover
    from auditor.scoring.uncertainty import DifferenceTest

#: Separates a candidate's id from its prompt set ids in the exploration's record: ``c003/gender/1``.
SEPARATOR = "/"


def set_id(candidate_id: str, prompt_id: str) -> str:
    """The exploration's id of a candidate's prompt set."""
    return f"{candidate_id}{SEPARATOR}{prompt_id}"


def axis_plan(candidate: Candidate, axis: str) -> AxisPlan:
    if candidate.plan is None:
        raise AuditorError(f"candidate {candidate.candidate_id} has no plan")
    found = next((a for a in candidate.plan.axes if a.name == axis), None)
    if found is None:
        raise AuditorError(f"candidate {candidate.candidate_id} has no axis {axis!r}")
    return found


def arm_prompt_ids(candidate: Candidate, axis: str) -> list[str]:
    """The arm's prompt sets, as a one-axis audit names them: ``initial``, ``<axis>/0``, ..."""
    return [INITIAL_PROMPT_ID] + [
        counterfactual_id(axis, k) for k in range(len(axis_plan(candidate, axis).counterfactuals))
    ]


def arm_prompts(candidate: Candidate, axis: str) -> dict[str, str]:
    """Prompt id -> prompt text of the arm's sets."""
    plan = axis_plan(candidate, axis)
    return dict(zip(arm_prompt_ids(candidate, axis), [candidate.prompt, *plan.counterfactuals], strict=True))


def arm_audit(record: ExploreRecord, candidate: Candidate, axis: str, indices: Sequence[int]) -> RunRecord:
    """The one-axis prompt audit of ``candidate`` on ``axis`` with the images of ``indices``.

    Images and answers are re-indexed 0..n-1 in the order of ``indices`` (their seeds and files
    kept), so a confirmation on fresh seeds is an audit of its own. File paths stay relative
    to the exploration's run folder.
    """
    config = record.config
    plan = candidate.plan.model_copy(update={"axes": [axis_plan(candidate, axis)]})
    position = {index: i for i, index in enumerate(indices)}
    sets_by_id = {prompt_set.prompt_id: prompt_set for prompt_set in record.prompt_sets}
    prompt_sets, answers = [], {}
    for prompt_id, prompt in arm_prompts(candidate, axis).items():
        key = set_id(candidate.candidate_id, prompt_id)
        images = sets_by_id[key].images if key in sets_by_id else []
        prompt_sets.append(
            PromptSet(
                prompt_id=prompt_id,
                prompt=prompt,
                axis=None if prompt_id == INITIAL_PROMPT_ID else axis,
                images=[_moved(image, position) for image in images if image.index in position],
            )
        )
        answers[prompt_id] = [
            ImageAnswers(
                image_index=position[image.image_index],
                answers={axis: image.answers[axis]} if axis in image.answers else {},
                caption=image.caption,
                image_sha256=image.image_sha256,
            )
            for image in record.answers.get(key, [])
            if image.image_index in position
        ]
    run_config = RunConfig(
        prompt=candidate.prompt,
        llm=plan.llm,
        axes=[axis] if config.axes is not None else None,
        max_counterfactuals=config.max_counterfactuals,
        t2i=config.t2i,
        vqa=config.vqa,
        images_per_prompt=len(indices),
        seeds=[config.seeds[index] for index in indices],
        generation=config.generation,
        perception=config.perception,
        scoring=config.scoring,
        allow_partial_weights=config.allow_partial_weights,
    )
    return RunRecord(
        run_id=f"{record.run_id}:{candidate.candidate_id}/{axis}",
        status="completed",
        config=run_config,
        plan=plan,
        prompt_sets=prompt_sets,
        answers=answers,
        environment=record.environment,
    )


def _moved(image: GeneratedImage, position: dict[int, int]) -> GeneratedImage:
    return image.model_copy(update={"index": position[image.index]})


def score_arm(audit: RunRecord, objective: Objective) -> ArmScore:
    """The arm's objective with its interval, and its axis's scores, from :func:`score_run` on its audit."""
    from auditor.scoring.intervals import score_run

    axis = score_run(audit).axes[0]
    value, ci = objective_of(axis, objective)
    return ArmScore(seeds=audit.config.images_per_prompt, value=value, ci=ci, axis=axis)


def objective_of(axis: AxisScore, objective: Objective) -> tuple[float | None, Interval | None]:
    """BAV and its interval, or |lean| and the lean's interval folded at 0."""
    if objective == "bav":
        return axis.bav, axis.bav_ci
    if axis.lean is None:
        return None, None
    ci = axis.lean_ci
    if ci is not None:
        low, high = folded_interval(ci.low, ci.high)
        ci = ci.model_copy(update={"low": low, "high": high})
    return abs(axis.lean), ci


def has_lean(counterfactuals: Sequence[str]) -> bool:
    """Whether an axis has exactly one male and one female counterfactual (so a lean)."""
    genders = [prompt_gender(cf) for cf in counterfactuals]
    return genders.count("male") == 1 and genders.count("female") == 1


def direction(axis: AxisScore, objective: Objective) -> tuple[str, str] | None:
    """``(first, second)``: the counterfactual the images resembled most and least (BAV), or the male
    and female one ordered by the lean's sign; None when the scores do not say, a tie included (every CAS
    equal, a lean of 0), whose order would be the list's, not the images'."""
    if objective == "bav":
        spread = axis.spread
        if spread is None or not spread.value:
            return None
        return spread.first, spread.second
    if not axis.lean:
        return None
    genders = {cf.prompt_id: prompt_gender(cf.prompt) for cf in axis.counterfactuals}
    male = next(pid for pid, gender in genders.items() if gender == "male")
    female = next(pid for pid, gender in genders.items() if gender == "female")
    return (male, female) if axis.lean > 0 else (female, male)


def difference_on(audit: RunRecord, first: str, second: str) -> DifferenceTest:
    """CAS(first) - CAS(second) on the audit's images, tested one-sided (> 0) at the audit's alpha."""
    from auditor.scoring import uncertainty
    from auditor.scoring.intervals import bootstrap_settings, record_counts

    settings = audit.config.scoring
    boot = bootstrap_settings(settings)
    if boot is None:
        raise AuditorError("confirmation needs bootstrap resamples, which --bootstrap 0 turns off")
    plan = audit.plan
    axes = [(axis.name, axis.counterfactuals) for axis in plan.axes]
    return uncertainty.difference_test(axes, record_counts(audit), settings, first, second, boot, alpha=settings.alpha)
