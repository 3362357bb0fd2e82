"""``dinov2:<id>`` and ``hf-vision:<id>``: image embeddings from transformers vision backbones.

Prompt-to-image tracing compares images by the cosine of their embeddings from several
networks (the paper: CLIP, DINO, ResNet). Any vision backbone transformers' ``AutoModel``
loads serves through ``hf-vision:``; ``dinov2:`` is the same path restricted to DINOv2
checkpoints. Images go through the model's own image processor, ``batch_size`` at a time,
and come back as float32 rows of unit length (a dot product is a cosine).

Which vector: the model's pooled output (``pooler_output``, flattened) when it gives one,
else its first token (CLS). That is, by architecture:

* DINOv2: the CLS token after the final layer norm (its ``pooler_output`` is exactly that);
* ViT, DeiT, BEiT: the pooler (dense + tanh over CLS) when the checkpoint has its weights;
  a checkpoint without them, as self-supervised DINO ViTs (``facebook/dino-vits16``, the
  paper's DINO-S/16), has the untrained pooler dropped on load and gives the CLS token;
* CNNs (ResNet, ConvNeXt) and Swin: their global average pool.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from auditor.core.errors import AuditorError, BackendError
from auditor.core.registry import Spec
from auditor.core.weights import LoadOptions
from auditor.perception.embedding import PretrainedImageEmbedder
from auditor.perception.loading import load_pretrained
from auditor.perception.registry import EMBEDDERS

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

_WHAT = "image embedder"
_OPTION = "--embedder"
_MISSING_POOLER = re.compile(r"^missing (\w+\.)?pooler\.")


class VisionEmbedder(PretrainedImageEmbedder):
    """A loaded vision backbone and image processor (an :class:`auditor.perception.base.Embedder` for images).

    The vector is the pooled output, else the first token, L2-normalised; whether an
    untrained pooler was dropped follows from the weights, so their fingerprint covers it.
    """

    features = "pooler-else-cls-l2"

    @property
    def dimension(self) -> int:
        """Length of an embedding: the backbone's last width."""
        config = self.model.config
        sizes = getattr(config, "hidden_sizes", None)
        return int(sizes[-1] if sizes else config.hidden_size)

    def embed_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        """(len(images), dim) float32 rows of unit length."""
        return self.embed_pictures(images, lambda **inputs: image_vector(self.model(**inputs)))

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        raise AuditorError(
            f"{self.ref.spec} embeds images only, not texts; "
            "text embeddings need a CLIP embedder (clip:<hub id or folder>)"
        )


def image_vector(output: Any) -> Any:
    """(batch, dim): the pooled output, flattened (CNNs give (batch, dim, 1, 1)), else the first token."""
    pooled = getattr(output, "pooler_output", None)
    if pooled is not None:
        return pooled.flatten(1)
    states = output.last_hidden_state
    if states.ndim != 3:
        raise BackendError(
            f"the vision model gives no pooled output and no token sequence (its output is {tuple(states.shape)})"
        )
    return states[:, 0]


def load_dinov2(spec: Spec, options: LoadOptions = LoadOptions(), batch_size: int = 32) -> VisionEmbedder:
    """``dinov2:<hub id or folder>``: a DINOv2 backbone (``AutoModel``) and its image processor."""
    return _load(spec, options, batch_size)


def load_vision(spec: Spec, options: LoadOptions = LoadOptions(), batch_size: int = 32) -> VisionEmbedder:
    """``hf-vision:<hub id or folder>``: any transformers vision backbone (``AutoModel`` taking pixel values only)."""
    return _load(spec, options, batch_size)


def _load(spec: Spec, options: LoadOptions, batch_size: int) -> VisionEmbedder:
    """Load the backbone; a model of another type than the backend's (in :data:`EMBEDDERS`: DINOv2 for ``dinov2:``,
    any for ``hf-vision:``) is refused before its weights are read."""
    import inspect

    loaded = load_pretrained(
        spec,
        options,
        what=_WHAT,
        option=_OPTION,
        model_class="AutoModel",
        processor_class="AutoImageProcessor",
        model_types=EMBEDDERS.model_types(spec.prefix),
        settle=_drop_untrained_pooler,
    )
    parameters = inspect.signature(loaded.model.forward).parameters
    if "pixel_values" not in parameters or "input_ids" in parameters:
        raise BackendError(
            f"cannot use {spec.target!r} as {spec.prefix}: {type(loaded.model).__name__} is not a vision backbone "
            "(it does not take images alone); use clip: for CLIP models"
        )
    return VisionEmbedder(loaded.model, loaded.processor, loaded.ref, batch_size=batch_size)


def _drop_untrained_pooler(model: Any, problems: list[str]) -> list[str]:
    """When the checkpoint lacks only the pooler's weights, drop the pooler (CLS is used) instead of refusing it."""
    missing = [problem for problem in problems if _MISSING_POOLER.match(problem)]
    if not missing or getattr(model, "pooler", None) is None:
        return problems
    model.pooler = None
    return [problem for problem in problems if problem not in missing]
