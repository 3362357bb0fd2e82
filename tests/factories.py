"""Small, valid records for tests that need one without running models."""

from __future__ import annotations

from auditor.core.environment import collect_environment
from auditor.records import AuditPlan, AxisPlan, ModelRef, RunConfig, RunRecord


def make_config(prompt: str = "a photo of a pharmacist", images: int = 2) -> RunConfig:
    return RunConfig(
        prompt=prompt,
        llm="offline",
        t2i=ModelRef(spec="folder:images", backend="folder"),
        vqa=ModelRef(spec="blip2:tiny", backend="blip2", model_id="tiny", fingerprint="abc"),
        images_per_prompt=images,
        seeds=list(range(images)),
    )


def make_plan(prompt: str = "a photo of a pharmacist") -> AuditPlan:
    return AuditPlan(
        prompt=prompt,
        llm="offline",
        axes=[
            AxisPlan(
                name="gender",
                kind="societal",
                counterfactuals=["a photo of a male pharmacist", "a photo of a female pharmacist"],
                question="What is the gender (male, female, other) of the person in the image?",
            )
        ],
    )


def make_record(run_id: str = "test-run", prompt: str = "a photo of a pharmacist") -> RunRecord:
    return RunRecord(
        run_id=run_id,
        config=make_config(prompt),
        plan=make_plan(prompt),
        environment=collect_environment(),
    )
