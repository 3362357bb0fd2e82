"""Execution of the generate -> perceive -> embed stages (see :mod:`auditor.executors.base`).

Two executors run in this process:

* ``sequential`` (the default): one stage after the other, one model in memory at a
  time, as auditor always ran; the CPU bookkeeping of each batch (PNG encoding, hashing,
  cache and record writes) runs on a writer thread while the model computes the next one;
* ``overlapped``: the readers (VQA, embeddings) run in their own threads alongside
  generation, on each prompt set's images as soon as they are stored, so the accelerator
  is not left waiting between stages. All the stages' models are in memory at once.

Both give identical records: the readers see the same images in the same order and
compute the same chunks. Importing this package imports no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    from auditor.executors.base import Executor

#: ``--executor`` names, the default first.
EXECUTOR_NAMES = ("sequential", "overlapped")
DEFAULT_EXECUTOR = EXECUTOR_NAMES[0]


def check_executor(name: str) -> str:
    """``name`` if an executor has it, else a one-line error listing the names."""
    if name not in EXECUTOR_NAMES:
        raise AuditorError(f"unknown executor {name!r} for --executor: use {' or '.join(EXECUTOR_NAMES)}")
    return name


def make_executor(name: str) -> Executor:
    """The executor called ``name``."""
    from auditor.executors.local import OverlappedExecutor, SequentialExecutor

    executors = {executor.name: executor for executor in (SequentialExecutor, OverlappedExecutor)}
    return executors[check_executor(name)]()
