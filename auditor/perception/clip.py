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
from auditor.core.weights import (
    LoadOptions,
    check_complete,
    dtype_keyword,
    hub_options,
    loaded_model_ref,
    loading_model,
    loading_problems,
)
from auditor.perception.embedding import PretrainedImageEmbedder, embed_in_batches

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

_WHAT = "CLIP embedder"
_HINT = "pass --embedder clip:/path/to/local/copy"


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
    """Load the CLIP model named by ``spec.target`` (hub id or local folder)."""
    from transformers import CLIPModel, CLIPProcessor

    from auditor.core.devices import pick_device, pick_dtype

    model_id = spec.target
    if not model_id:
        raise AuditorError("the clip embedder needs a model: --embedder clip:<hub id or folder>")
    device = pick_device(options.device)
    dtype = pick_dtype(device)
    hub = hub_options(model_id)
    with loading_model(_WHAT, model_id, _HINT):
        model, info = CLIPModel.from_pretrained(
            model_id, output_loading_info=True, **{dtype_keyword("transformers"): dtype}, **hub
        )
        processor = CLIPProcessor.from_pretrained(model_id, **hub)
    partial = check_complete(_WHAT, model_id, loading_problems(info), options)
    model = model.to(device).eval()
    ref = loaded_model_ref(spec, "config.json", dtype, device, options, partial)
    return ClipEmbedder(model, processor, ref, batch_size=batch_size)
