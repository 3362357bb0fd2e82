"""The executor interface: who runs the generate -> perceive -> embed stages, where and when.

A study says *what* to compute: a :class:`~auditor.executors.generation.GenerationStage`
(prompt sets to fill) and the :class:`~auditor.executors.perception.ImageReader` s that
read its images (VQA answers, embeddings). The stages own the bookkeeping: content-cache
look-ups, files, the record, progress. An executor owns the *compute*: it loads the
models, runs the backends on the stages' batches and chunks, and hands every result back
to the stage through the run's writer. So every executor writes the same cache entries
and the same record, and a run started with one can be resumed with another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:  # pragma: no cover
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
