"""Embedding in batches: what every embedder does after its own preprocessing and forward pass.

Inputs are encoded ``batch_size`` at a time, moved to the model's device (floating inputs
also to its dtype), run without autograd, and the resulting vectors are L2-normalised in
float32: rows of unit length, so a dot product is a cosine similarity.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def embed_in_batches(
    model: Any,
    items: Sequence[Any],
    batch_size: int,
    dimension: int,
    encode: Callable[[list[Any]], Any],
    features: Callable[..., Any],
) -> np.ndarray:
    """(len(items), dimension) float32 unit rows.

    ``encode`` turns a batch of items into the model's inputs (a processor call);
    ``features`` maps those inputs (as keyword arguments) to a (batch, dimension) tensor.
    """
    import torch

    rows = [np.zeros((0, dimension), dtype=np.float32)]
    device, dtype = model.device, model.dtype
    for start in range(0, len(items), batch_size):
        inputs = encode(list(items[start : start + batch_size]))
        inputs = {
            name: value.to(device, dtype=dtype) if value.is_floating_point() else value.to(device)
            for name, value in inputs.items()
        }
        with torch.inference_mode():
            vectors = features(**inputs)
        vectors = torch.nn.functional.normalize(vectors.float(), dim=-1)
        rows.append(vectors.cpu().numpy().astype(np.float32))
    return np.concatenate(rows)
