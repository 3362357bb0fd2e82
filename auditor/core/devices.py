"""Device and dtype choice for torch backends (float16 on CUDA, float32 on CPU), and freeing a finished model."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    import torch


def pick_device(requested: str | None = None) -> str:
    """``requested`` when given (and usable here), else ``cuda`` when available, else ``cpu``."""
    import torch

    if requested:
        return check_device(requested)
    return "cuda" if torch.cuda.is_available() else "cpu"


def check_device(requested: str) -> str:
    """``requested`` when this torch can run on it; else one line saying why (``--device``).

    Checked where the model loads (a Ray worker may have the GPU its driver lacks).
    """
    import torch

    try:
        device = torch.device(requested)
    except (RuntimeError, ValueError):
        raise AuditorError(f"--device {requested}: not a torch device (cpu, cuda, cuda:N, mps)") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise AuditorError(f"--device {requested}: this torch ({torch.__version__}) sees no CUDA device")
        if device.index is not None and device.index >= count:
            raise AuditorError(f"--device {requested}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise AuditorError(f"--device {requested}: MPS is not available to this torch")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise AuditorError(f"--device {requested}: auditor runs on cpu, cuda or mps")
    return requested


def pick_dtype(device: str) -> torch.dtype:
    """The torch dtype to load weights in: float16 on CUDA, float32 elsewhere."""
    import torch

    return torch.float16 if device.startswith("cuda") else torch.float32


def release_accelerator_memory() -> None:
    """Free a finished stage's model before the next one loads (a GPU rarely holds two big models).

    A model's modules hold reference cycles, so only a full garbage collection frees them; within
    :func:`collecting_only_new_objects` it looks only at what the attempt made."""
    import sys

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


_frozen_scopes = 0
_frozen_scopes_lock = threading.Lock()
#: Whether the outermost scope froze the process's objects (not when the host had frozen some itself).
_freezing = False


@contextmanager
def collecting_only_new_objects() -> Iterator[None]:
    """Leave what the process holds now (its imported libraries, WordNet, an earlier run's objects) out of every
    garbage collection until the outermost such scope ends (``gc.freeze``).

    A full collection walks every object the process holds: hundreds of thousands after the model libraries and
    WordNet are imported (0.1-0.4 s each time, on every model released). In this scope it walks only the objects
    made since it began, among them the models an attempt loads, which is all a release needs to free. What is
    garbage already (an earlier attempt's model a traceback held) is collected first, once, so it is not frozen;
    frozen objects are still freed as soon as nothing refers to them, and only reference cycles among them wait
    for the end.

    A host process that froze objects itself (its own ``gc.freeze``, e.g. a server before it forks) keeps them
    frozen: there is only one frozen generation, and thawing ours would thaw its too, so the scope then freezes
    nothing.
    """
    global _frozen_scopes, _freezing
    entered = False
    try:
        with _frozen_scopes_lock:
            _frozen_scopes += 1
            entered = True
            if _frozen_scopes == 1:
                _freezing = gc.get_freeze_count() == 0
                if _freezing:
                    gc.collect()
                    gc.freeze()
        yield
    finally:
        if entered:
            with _frozen_scopes_lock:
                _frozen_scopes -= 1
                if _frozen_scopes == 0 and _freezing:
                    gc.unfreeze()
