"""``sam:<id>``: object masks from boxes with Segment Anything through transformers.

The paper's Grounded-SAM turns each detected box into the object's region (SAM), and
the dependency groups measure how much of that region a word's attention mask covers.
Without a segmenter the box itself is the region. A :class:`Segmenter` takes images and
per image its boxes, and returns per image one boolean mask per box at the image's size
(SAM's single-mask output for a box prompt, thresholded by its processor at logit 0).
The image encoder, the expensive part, runs ``batch_size`` images at a time; the prompt
encoder and mask decoder then run per image on all of its boxes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from auditor.core.errors import AuditorError
from auditor.core.fingerprint import settings_fingerprint
from auditor.core.registry import Spec
from auditor.core.weights import LoadOptions, device_kind
from auditor.perception.detectors import Box
from auditor.perception.loading import check_batch_size, load_pretrained
from auditor.perception.registry import SEGMENTERS
from auditor.records import ModelRef

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image


class Segmenter(Protocol):
    """Boxes -> object masks."""

    ref: ModelRef

    def cache_fingerprint(self) -> str:
        ...

    def segment(self, images: Sequence[Image.Image], boxes: Sequence[Sequence[Box]]) -> list[np.ndarray]:
        """Per image, a (len(boxes[i]), height, width) bool array: the object's mask inside each box."""
        ...


class SamSegmenter:
    """A loaded ``SamModel`` and ``SamProcessor``."""

    def __init__(self, model: Any, processor: Any, ref: ModelRef, batch_size: int = 4):
        check_batch_size(batch_size, "the segmenter")
        self.model = model
        self.processor = processor
        self.ref = ref
        self.batch_size = batch_size

    def cache_fingerprint(self) -> str:
        return settings_fingerprint(
            self.ref.fingerprint, dtype=self.ref.dtype, device=device_kind(self.ref.device), masks="single-mask-logit>0"
        )

    def segment(self, images: Sequence[Image.Image], boxes: Sequence[Sequence[Box]]) -> list[np.ndarray]:
        import torch

        if len(boxes) != len(images):
            raise AuditorError(f"the segmenter got box lists for {len(boxes)} images and {len(images)} images")
        masks = [np.zeros((0, image.height, image.width), dtype=bool) for image in images]
        wanted = [i for i, image_boxes in enumerate(boxes) if image_boxes]
        device, dtype = self.model.device, self.model.dtype
        for start in range(0, len(wanted), self.batch_size):
            chunk = wanted[start : start + self.batch_size]
            inputs = [
                self.processor(
                    images=images[i].convert("RGB"), input_boxes=[[list(box) for box in boxes[i]]], return_tensors="pt"
                )
                for i in chunk
            ]
            with torch.inference_mode():
                pixels = torch.cat([encoded["pixel_values"] for encoded in inputs]).to(device, dtype=dtype)
                embeddings = self.model.get_image_embeddings(pixels)
                for row, (i, encoded) in enumerate(zip(chunk, inputs)):
                    output = self.model(
                        image_embeddings=embeddings[row : row + 1],
                        input_boxes=encoded["input_boxes"].to(device, dtype=dtype),
                        multimask_output=False,
                    )
                    found = self.processor.image_processor.post_process_masks(
                        output.pred_masks.float().cpu(), encoded["original_sizes"], encoded["reshaped_input_sizes"]
                    )[0]
                    masks[i] = found[:, 0].numpy().astype(bool)
        return masks


def load_sam(spec: Spec, options: LoadOptions = LoadOptions(), batch_size: int = 4) -> SamSegmenter:
    """``sam:<hub id or folder>``: a ``SamModel`` and its ``SamProcessor``."""
    loaded = load_pretrained(
        spec,
        options,
        what="segmenter",
        option="--segmenter",
        model_class="SamModel",
        processor_class="SamProcessor",
        model_types=SEGMENTERS.model_types(spec.prefix),
    )
    return SamSegmenter(loaded.model, loaded.processor, loaded.ref, batch_size=batch_size)
