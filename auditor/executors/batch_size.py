"""``--batch-size auto``: the largest generation batch that fits, found once per model, device and executor.

The probe (a backend's ``probe_batch_size``, e.g. the diffusers backend halving the batch
from 64 until one fits) costs a few short pipeline calls; its answer is remembered in the
content cache database under the stage ``batch-size``, keyed on the backend's
``batch_size_key`` (weights, dtype, image size, guidance; the device's name, memory and
speed-ups), the executor and the models that share the GPU with generation. Under
``overlapped`` the study's other models (VQA, embedder, ...) stay loaded beside generation and
the probe runs with them loaded (:class:`~auditor.executors.local.OverlappedExecutor`), so a
size found for generation alone, or beside other models, is not taken beside these. A later
run reads the size instead of probing. Backends without a probe (an images API, a folder)
take :data:`DEFAULT_BATCH_SIZE`.

Not counted, so left to the probe's 20% headroom (``MEMORY_HEADROOM``): the models a batch or
an exploration keeps loaded between its prompts under ``sequential`` (its first prompt probes
before they load), and Ray workers that share one GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from auditor.core.cache import ContentCache
    from auditor.generation.base import TextToImage
    from auditor.studies.progress import ProgressReporter

STAGE = "batch-size"
#: The batch size of a backend that cannot probe (and the CLI's default).
DEFAULT_BATCH_SIZE = 4


def resolve_batch_size(
    backend: TextToImage, cache: ContentCache, progress: ProgressReporter, executor: str, beside: Sequence[str] = ()
) -> int:
    """The remembered batch size of this model on this device under this executor with the models ``beside`` it
    (their specs) on the GPU, probing (and remembering) it the first time."""
    probe = getattr(backend, "probe_batch_size", None)
    if probe is None:
        return DEFAULT_BATCH_SIZE
    key = {**backend.batch_size_key(), "executor": executor, "beside": sorted(beside)}
    found = cache.get_json(STAGE, key["model"], key)
    if found is not None:
        return int(found)
    where = f"{key['device']} under the {executor} executor"
    progress.notice(f"--batch-size auto: finding the largest batch that fits on {where} (once per model and device)")
    size = int(probe())
    cache.put_json(STAGE, key["model"], key, size)
    progress.notice(f"--batch-size auto: {size} images per batch on {where}")
    return size
