"""``clip:<hub id or folder>``: CLIP image and text embeddings through transformers.

Loaded with ``CLIPModel``/``CLIPProcessor.from_pretrained`` in float16 on CUDA and
float32 on CPU. Inputs are embedded ``batch_size`` at a time; the projected features are
L2-normalised in float32 and returned as float32 numpy rows, so a dot product is a
cosine similarity (what T2IAT's Asc and the embedding similarity use).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from auditor.core.errors import AuditorError
from auditor.core.registry import Spec
from auditor.core.weights import LoadOptions
from auditor.perception.embedding import PretrainedImageEmbedder, embed_in_batches
from auditor.perception.loading import load_pretrained
from auditor.perception.registry import EMBEDDERS

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

_WHAT = "CLIP embedder"


class ClipEmbedder(PretrainedImageEmbedder):
    """A loaded CLIP model and processor (implements :class:`auditor.perception.base.Embedder`)."""

    features = "projection-l2"

    @property
    def dimension(self) -> int:
        """Length of an embedding (CLIP's projection dimension)."""
        return int(self.model.config.projection_dim)

    @property
    def logit_scale(self) -> float:
        """CLIP's learned temperature ``exp(logit_scale)``: zero-shot logits are this times the cosine
        similarity (100 for OpenAI's released models), as in ``CLIPModel``'s ``logits_per_image``."""
        return float(self.model.logit_scale.detach().float().exp().item())

    def embed_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        """(len(images), dim) float32 rows of unit length."""
        return self.embed_pictures(images, lambda **inputs: _projected(self.model.get_image_features(**inputs)))

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32 rows of unit length; texts past CLIP's 77 tokens are truncated."""
        return embed_in_batches(
            self.model,
            texts,
            self.batch_size,
            self.dimension,
            lambda batch: self.processor(text=batch, padding=True, truncation=True, return_tensors="pt"),
            lambda **inputs: _projected(self.model.get_text_features(**inputs)),
        )


def _projected(output: Any) -> Any:
    """The projected features: transformers >= 5 returns a model output whose pooler_output holds them."""
    import torch

    return output if isinstance(output, torch.Tensor) else output.pooler_output


def load(spec: Spec, options: LoadOptions = LoadOptions(), batch_size: int = 32) -> ClipEmbedder:
    """Load the CLIP model named by ``spec.target`` (hub id or local folder); a folder of another model type is
    refused by name, before its weights are read."""
    if not spec.target:
        raise AuditorError("the clip embedder needs a model: --embedder clip:<hub id or folder>")
    loaded = load_pretrained(
        spec, options, what=_WHAT, option="--embedder", model_class="CLIPModel", processor_class="CLIPProcessor",
        model_types=EMBEDDERS.model_types(spec.prefix),
    )  # fmt: skip
    return ClipEmbedder(loaded.model, loaded.processor, loaded.ref, batch_size=batch_size)
