"""The executor interface: who runs the generate -> perceive -> embed stages, where and when.

A study says *what* to compute: a :class:`~auditor.executors.generation.GenerationStage`
(prompt sets to fill) and the :class:`~auditor.executors.perception.ImageReader` s that
read its images (VQA answers, embeddings). The stages own the bookkeeping: content-cache
look-ups, files, the record, progress. An executor owns the *compute*: it loads the
models, runs the backends on the stages' batches and chunks, and hands every result back
to the stage through the run's writer. So every executor writes the same results into the
cache and the same record (only the in-process ones also remember their models'
descriptions: :mod:`~auditor.executors.recall`), and a run started with one can be resumed
with another.

A stage names its model with a :class:`ModelRecipe`, so the model can be loaded in this
process or, with the same code, in a worker on another machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from auditor.core.registry import Registry
    from auditor.core.weights import LoadOptions
    from auditor.executors.generation import GenerationStage
    from auditor.executors.perception import ImageReader
    from auditor.studies.progress import StageCounts
    from auditor.studies.run import StudyRun


class Executor(Protocol):
    """Runs a study's image stages: generation, then every reader over the generated images."""

    #: The name ``--executor`` takes and the run's config records.
    name: ClassVar[str]

    def run(self, study: StudyRun, generation: GenerationStage, readers: Sequence[ImageReader]) -> None:
        """Fill ``study.record.prompt_sets`` through ``generation``, then let every reader read every image.

        On return every stage's results are cached and in the record, and each stage's
        timing is recorded. On an exception (Ctrl-C included) what was computed is
        cached and recorded first, and the stage that failed is marked on the study.
        """
        ...

    def read_stored(self, study: StudyRun, readers: Sequence[ImageReader]) -> None:
        """Let every reader read the images already in the run folder (``study.record.prompt_sets``).

        For a study that makes its images its own way (the trace study) and reads them with
        the shared VQA and embedding stages. Results are cached and recorded as in :meth:`run`.
        """
        ...

    def run_batches(self, study: StudyRun, stage: BatchStage) -> None:
        """Load the stage's model, let the stage say what is missing, compute it batch by batch, store it.

        As in :meth:`run`, everything computed is stored (through ``stage.store``) before an
        exception leaves, and the stage is timed under its name.
        """
        ...


class BatchStage(Protocol):
    """A stage a study computes its own way, on one model, batch by batch (the trace study's traced generation).

    The study keeps the bookkeeping (cache look-ups, files, the record) in this process;
    the executor loads the model and runs :meth:`compute` where the model is, in this
    process or on a Ray worker. So, as with the shared stages, a run moves between executors.
    """

    #: The stage's name: its timing, its progress bar, and the pool of Ray workers it gets.
    stage: str
    #: Computed and cached items, for the stage's timing.
    counts: StageCounts

    def recipe(self) -> ModelRecipe:
        """The model to load; after :meth:`open`, with what ``open`` settled (a probed batch size)."""
        ...

    def open(self, model: Any) -> list[Any]:
        """Given the loaded model (or a Ray worker's, as the driver sees it): record it, store what the
        cache already holds, and return the batches left to compute."""
        ...

    @staticmethod
    def compute(model: Any, batch: Any) -> Any:
        """One batch's results, computed where the model is: picklable, and compact (they may cross the network)."""
        ...

    def store(self, batch: Any, result: Any) -> None:
        """Keep one batch's results (on the run's writer thread, in batch order in-process, as they arrive on Ray)."""
        ...

    def finish(self) -> None:
        """Every batch is stored."""
        ...


@dataclass(frozen=True)
class ModelRecipe:
    """How to load a stage's model anywhere: the registry that serves it, its spec and settings.

    Small and picklable: a Ray worker gets the recipe, not the model, and loads it with
    the registry's loading code as the in-process executors do.
    """

    #: ``t2i`` (text-to-image), ``vqa`` or ``embedder``.
    registry: Literal["t2i", "vqa", "embedder"]
    spec: str
    #: The backend's settings (generation or perception settings), or None for a backend that takes none.
    settings: Any = None

    def backends(self) -> Registry:
        """The registry that serves the spec."""
        from auditor.generation.registry import T2I_BACKENDS
        from auditor.perception.registry import EMBEDDERS, VQA_BACKENDS

        return {"t2i": T2I_BACKENDS, "vqa": VQA_BACKENDS, "embedder": EMBEDDERS}[self.registry]

    def load(self, options: LoadOptions) -> Any:
        """The loaded backend (heavy imports happen here)."""
        if self.settings is None:
            return self.backends().load(self.spec, options=options)
        return self.backends().load(self.spec, settings=self.settings, options=options)
