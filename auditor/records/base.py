"""What every record shares: strict models, the run envelope, and run bookkeeping.

A study's record is a :class:`StudyRecord` (schema version, kind, id, status, times,
config, images, timings, errors, environment) plus the fields of its own kind; its config
is a :class:`StudyConfig` (the model under audit, the paired seeds, generation settings,
an embedder) plus its own settings. :class:`~auditor.studies.run.StudyRun` runs any such
record, and :func:`auditor.records.load_record` reads any of them by its ``kind`` field.
"""

from __future__ import annotations

import shlex
from datetime import datetime, timezone
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, JsonValue

from auditor.core.errors import StartAgainError
from auditor.records.images import PromptSet
from auditor.records.models import GenerationSettings, ModelRef
from auditor.records.record import Record

#: Version of the record schema; :mod:`auditor.records.migrations` upgrades older records on load.
SCHEMA_VERSION = "2"

RunStatus = Literal["running", "completed", "failed", "interrupted"]
Stage = Literal[
    "plan", "generate", "perceive", "embed", "score", "report", "propose", "explore", "confirm",
    "select", "embed_captions", "faces", "classify", "detect", "group",
]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class StageTiming(Record):
    """Wall time and cache use of one stage."""

    stage: Stage = Field(description="Pipeline stage.")
    seconds: float = Field(ge=0, description="Wall-clock seconds spent in the stage.")
    computed: int = Field(default=0, ge=0, description="Items computed in this run.")
    cached: int = Field(default=0, ge=0, description="Items taken from the content cache.")


class RunError(Record):
    """Why a run stopped."""

    stage: Stage | None = Field(default=None, description="Stage that failed, when known.")
    type: str = Field(description="Exception class name.")
    message: str = Field(description="Error message (never contains API keys).")


class Environment(Record):
    """Software and hardware the run used."""

    auditor_version: str = Field(description="Version of auditor.")
    python: str = Field(description="Python version.")
    platform: str = Field(description="OS and machine.")
    packages: dict[str, str] = Field(default_factory=dict, description="Versions of the libraries that matter.")
    cuda: str | None = Field(default=None, description="CUDA version torch was built with, if any.")
    gpu: str | None = Field(default=None, description="GPU name when one was used.")
    wordnet: str | None = Field(
        default=None, description="Version of the WordNet concept extraction read (e.g. '3.0'), when it read one."
    )


#: The text-to-image backends (registry prefixes) that take no seed: image i of a prompt is just its i-th (an images
#: API, a folder of images). Their classes say so with ``seeded = False``; a test keeps the two in step.
UNSEEDED_BACKENDS = frozenset({"openai", "folder"})


class StudyConfig(Record):
    """What every study that generates images was asked to do: the model, the seeds, the settings.

    A study's own config adds its fields (the prompt and planner, the test definition,
    the occupations, ...) and may make ``embedder`` required.
    """

    t2i: ModelRef = Field(description="The text-to-image model under audit.")
    embedder: ModelRef | None = Field(default=None, description="Image/text embedder, if the study uses one.")
    images_per_prompt: int = Field(ge=1, description="Images generated per prompt.")
    seeds: list[int] = Field(
        description="Seed of image i, shared by every prompt set (paired seeds); unused by a backend that takes no "
        "seed, whose images record none."
    )
    generation: GenerationSettings = Field(default_factory=GenerationSettings, description="Generation settings.")
    allow_partial_weights: bool = Field(
        default=False,
        description="Whether checkpoints that do not match their model were loaded anyway (--allow-partial-weights); "
        "each model's partial_weights lists what was missing.",
    )
    executor: Literal["sequential", "overlapped", "ray"] = Field(
        default="sequential",
        description="Which executor ran the generate -> perceive -> embed stages (--executor): 'sequential' "
        "(one stage after the other) or 'overlapped' (VQA and embeddings alongside generation) in this process, "
        "or 'ray' (each stage on a pool of Ray workers). All give the same images, answers and "
        "embeddings; with 'overlapped' the stage timings overlap.",
    )


class StudyRecord(Record):
    """The envelope of every study's record: identity, status, config, images and bookkeeping.

    Subclasses fix ``kind`` to a literal (the discriminator records load by), narrow
    ``config`` to their own :class:`StudyConfig`, and say what they are called and which
    command makes them (for messages and listings).
    """

    #: What people call this kind of run, e.g. "prompt audit".
    title: ClassVar[str] = "study"
    #: The command that makes it, e.g. "auditor prompt".
    made_by: ClassVar[str] = "auditor"
    #: The fields a listing of runs reads (:func:`~auditor.records.loading.load_record_summary`): the run's identity,
    #: config, state and errors, and whatever :meth:`subject` needs; not its images and results, which are most of a
    #: large run's record.
    SUMMARY_FIELDS: ClassVar[frozenset[str]] = frozenset({
        "schema_version", "kind", "run_id", "status", "created_at", "updated_at", "config", "timings", "errors",
        "environment", "results_from", "command_options",
    })  # fmt: skip

    schema_version: Literal["2"] = Field(default=SCHEMA_VERSION, description="Version of this schema.")
    kind: str = Field(description="What kind of run this is.")
    run_id: str = Field(description="Run folder name under the runs directory.")
    status: RunStatus = Field(default="running", description="Where the run stands.")
    created_at: datetime = Field(default_factory=utc_now, description="When the run started (UTC).")
    updated_at: datetime = Field(default_factory=utc_now, description="When the record was last written (UTC).")
    config: StudyConfig = Field(description="What the run was asked to do.")
    prompt_sets: list[PromptSet] = Field(default_factory=list, description="Images of every prompt, in order.")
    timings: list[StageTiming] = Field(default_factory=list, description="Time spent per stage.")
    errors: list[RunError] = Field(default_factory=list, description="Errors that ended or marred the run.")
    environment: Environment = Field(description="Software and hardware versions.")
    results_from: dict[str, ModelRef] = Field(
        default_factory=dict,
        description="Model field ('t2i', 'vqa') -> the model the record's images and answers were last made with, "
        "kept across attempts (a resume points the config at other weights before they load, and may stop before "
        "they do). Set when the model opens, so while an attempt runs the record may still hold some results of "
        "the model before. A resume whose weights differ makes them again, or is refused by a study that adds to "
        "them (an exploration). A batch's is its audits'.",
    )
    command_options: dict[str, JsonValue] | None = Field(
        default=None,
        description="The options of the command that started the run, as its command line set them (defaults "
        "included), by parameter name; the options a resume may change are left out. A resume that gives any "
        "of them again continues the run only where each is the run's own. Null for a run started from Python.",
    )

    @classmethod
    def a_title(cls) -> str:
        """The kind as a sentence names it: "a prompt audit", "an exploration"."""
        return f"{'an' if cls.title[:1] in 'aeiou' else 'a'} {cls.title}"

    def subject(self) -> str:
        """What the run audited, in a few words, for listings (the prompt, the test, the occupations)."""
        return self.run_id

    def image_seeds(self) -> list[int] | None:
        """The seeds behind image i of every set: the config's, or None when the images say their backend takes no
        seed (an images API, a folder of images), whose image i is just its i-th. Before any image exists, what
        the model's backend will do (:data:`UNSEEDED_BACKENDS`)."""
        images = [image for prompt_set in self.prompt_sets for image in prompt_set.images]
        if images:
            return None if all(image.seed is None for image in images) else list(self.config.seeds)
        return None if self.config.t2i.backend in UNSEEDED_BACKENDS else list(self.config.seeds)

    def fails_again_on_resume(self) -> bool:
        """Whether the run failed on an error its own settings would meet again
        (:class:`~auditor.core.errors.StartAgainError`): a resume keeps them, so none is worth offering."""
        return self.status == "failed" and bool(self.errors) and self.errors[-1].type == StartAgainError.__name__

    def resume_command(self, folder: Path) -> str:
        """The command line that continues this run, kept in ``folder``, where it did not complete."""
        return f"{self.made_by} --resume {shlex.quote(str(folder))}"

    def models(self) -> list[ModelRef]:
        """Every model the run used, in config order."""
        return [ref for _, ref in self.models_by_role()]

    def models_by_role(self) -> list[tuple[str, ModelRef]]:
        """Every model the run used, each with its role: the config field that holds it, as its option reads
        (``t2i``, ``vqa``, ``text-embedder``), so a listing says which model made the images and which answered."""
        fields = ((name, getattr(self.config, name)) for name in type(self.config).model_fields)
        return [(name.replace("_", "-"), value) for name, value in fields if isinstance(value, ModelRef)]
