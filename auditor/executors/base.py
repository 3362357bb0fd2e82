"""The executor interface: who runs the generate -> perceive -> embed stages, where and when.

A study says *what* to compute: a :class:`~auditor.executors.generation.GenerationStage`
(prompt sets to fill) and the :class:`~auditor.executors.perception.ImageReader` s that
read its images (VQA answers, embeddings). The stages own the bookkeeping: content-cache
look-ups, files, the record, progress. An executor owns the *compute*: it loads the
models, runs the backends on the stages' batches and chunks, and hands every result back
to the stage through the run's writer. So every executor writes the same cache entries
and the same record, and a run started with one can be resumed with another.

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
