"""Embedding in batches: what every embedder does after its own preprocessing and forward pass.

Inputs are encoded ``batch_size`` at a time, moved to the model's device (floating inputs
also to its dtype), run without autograd, and the resulting vectors are L2-normalised in
float32: rows of unit length, so a dot product is a cosine similarity.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from auditor.core.fingerprint import settings_fingerprint
from auditor.core.weights import device_kind
from auditor.perception.loading import check_batch_size, on_model

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

    from auditor.records import ModelRef


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
    for start in range(0, len(items), batch_size):
        inputs = encode(list(items[start : start + batch_size]))
        inputs = on_model(inputs, model)
        with torch.inference_mode():
            vectors = features(**inputs)
        vectors = torch.nn.functional.normalize(vectors.float(), dim=-1)
        rows.append(vectors.cpu().numpy().astype(np.float32))
    return np.concatenate(rows)


class PretrainedImageEmbedder(ABC):
    """A loaded transformers model and its processor, embedding images: what CLIP and the vision backbones share.

    Subclasses name the vector they take (``features``, part of the cache key) and give
    its ``dimension``; :meth:`embed_pictures` runs their forward pass over batches.
    """

    #: Which vector of the model's output becomes the embedding (changes the numbers, so it is in the cache key).
    features: ClassVar[str]

    def __init__(self, model: Any, processor: Any, ref: ModelRef, batch_size: int = 32):
        check_batch_size(batch_size, "the embedder")
        self.model = model
        self.processor = processor
        self.ref = ref
        self.batch_size = batch_size

    @property
    @abstractmethod
    def dimension(self) -> int:
        """Length of an embedding."""

    def cache_fingerprint(self) -> str:
        """The weights, the dtype and kind of device they ran on, and which vector is taken.

        Batch size does not matter; float16 on CUDA gives other numbers than float32 on a CPU.
        """
        return settings_fingerprint(
            self.ref.fingerprint, dtype=self.ref.dtype, device=device_kind(self.ref.device), features=self.features
        )

    def embed_pictures(self, images: Sequence[Image.Image], vectors: Callable[..., Any]) -> np.ndarray:
        """(len(images), dim) float32 unit rows; ``vectors`` maps the processor's inputs to (batch, dim)."""
        return embed_in_batches(
            self.model,
            images,
            self.batch_size,
            self.dimension,
            lambda batch: self.processor(images=[image.convert("RGB") for image in batch], return_tensors="pt"),
            vectors,
        )
