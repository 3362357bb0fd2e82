"""The batch's record (``auditor batch``): one prompt audit per prompt, referenced, and a leaderboard.

Each prompt of the list is audited as ``auditor prompt`` would audit it, in its own run
folder under the batch's (``audits/<id>/``, with its own ``record.json``, images and
``report.html``), so every tool that reads a prompt audit reads it. The batch's record
says which prompts it audited, where, how each ended, and ranks every prompt x axis.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from auditor.core.store import RUN_ID
from auditor.records.base import RunStatus, StudyConfig, StudyRecord
from auditor.records.images import PromptSet
from auditor.records.intervals import Interval
from auditor.records.models import ModelRef, PerceptionSettings, ScoringSettings
from auditor.records.record import Record


class BatchConfig(StudyConfig):
    """Everything a batch was asked to do; each audit's own config repeats what applies to it."""

    source: str = Field(description="The prompts file as given.")
    values: str | None = Field(default=None, description="The values file that filled the file's templates, if any.")
    prompts: list[str] = Field(min_length=1, description="The prompts audited, in order (templates filled in).")
    llm: str = Field(description="Planner spec, e.g. 'openai:gpt-4o-mini' or 'offline'.")
    llm_temperature: float | None = Field(default=None, description="Sampling temperature sent to the LLM.")
    llm_seed: int | None = Field(default=None, description="Seed sent to the LLM when it accepts one.")
    llm_retries: int = Field(default=2, ge=0, description="Repair turns allowed when a plan is invalid.")
    max_axes: int | None = Field(default=None, ge=1, description="Cap on the number of axes kept from each plan.")
    max_counterfactuals: int | None = Field(default=None, ge=2, description="Cap on counterfactuals per axis.")
    axes: list[str] | None = Field(
        default=None, description="Axes fixed by --axes (axis library, no LLM); null = the planner chooses."
    )
    vqa: ModelRef = Field(description="The vision-language model that answers questions and captions.")
    perception: PerceptionSettings = Field(default_factory=PerceptionSettings, description="VQA settings.")
    scoring: ScoringSettings = Field(default_factory=ScoringSettings, description="Scoring settings of every audit.")


class BatchAudit(Record):
    """One prompt of the batch and its audit."""

    audit_id: str = Field(description="Run id of the prompt's audit, e.g. '003-a-photo-of-a-nurse'.")
    prompt: str = Field(description="The prompt.")
    folder: str = Field(
        pattern=f"^audits/{RUN_ID}$",  # a hand-edited '../x' would leave the batch's folder
        description="The audit's run folder, relative to the batch's: audits/<run id>.",
    )
    status: RunStatus = Field(default="running", description="How the audit ended (as its own record says).")
    error: str | None = Field(default=None, description="Why it failed, when it did (e.g. no valid plan).")
    dropped_axes: dict[str, str] = Field(
        default_factory=dict,
        description="Axes asked for with --axes that its plan leaves out -> why (its plan's dropped_axes), so the "
        "batch's notes can sum them up.",
    )


class BatchRow(Record):
    """One prompt x axis of the leaderboard."""

    audit_id: str = Field(description="The prompt's audit.")
    prompt: str = Field(description="The prompt.")
    axis: str = Field(description="The axis.")
    bav: float | None = Field(description="The axis's BAV in the prompt's audit.")
    bav_ci: Interval | None = Field(default=None, description="Its bootstrap interval.")
    lean: float | None = Field(default=None, description="CAS(male) - CAS(female), when the axis has both.")
    lean_ci: Interval | None = Field(default=None, description="Its bootstrap interval.")


class BatchRecord(StudyRecord):
    """A batch of prompt audits: where each is, how it ended, and the prompt x axis leaderboard."""

    title: ClassVar[str] = "batch"
    made_by: ClassVar[str] = "auditor batch"

    kind: Literal["batch"] = Field(default="batch", description="What kind of run this is.")
    config: BatchConfig = Field(description="What the run was asked to do.")
    prompt_sets: list[PromptSet] = Field(
        default_factory=list, description="Empty: each prompt's images are in its audit's record."
    )
    audits: list[BatchAudit] = Field(default_factory=list, description="One audit per prompt, in order.")
    leaderboard: list[BatchRow] = Field(
        default_factory=list, description="Every axis of every completed audit, highest BAV first (no BAV last)."
    )

    def subject(self) -> str:
        count = len(self.config.prompts)
        return f"{count} prompt{'' if count == 1 else 's'} from {self.config.source}"
