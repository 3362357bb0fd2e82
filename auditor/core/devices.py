"""Device and dtype choice for torch backends (float16 on CUDA, float32 on CPU), and freeing a finished model."""

from __future__ import annotations

from typing import Any


def pick_device(requested: str | None = None) -> str:
    """``requested`` when given, else ``cuda`` when available, else ``cpu``."""
    import torch

    if requested:
        return requested
    return "cuda" if torch.cuda.is_available() else "cpu"


def pick_dtype(device: str, requested: str | None = None) -> Any:
    """The torch dtype to load weights in: ``requested`` or float16 on CUDA and float32 elsewhere."""
    import torch

    if requested:
        return getattr(torch, requested)
    return torch.float16 if device.startswith("cuda") else torch.float32


def release_accelerator_memory() -> None:
    """Free a finished stage's model before the next one loads (a GPU rarely holds two big models)."""
    import gc
    import sys

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
