"""Device and dtype choice for torch backends: float16 on CUDA, float32 on CPU."""

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
