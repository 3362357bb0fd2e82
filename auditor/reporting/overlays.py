"""A triplet's images side by side, and below them the attention map of its gender word on each.

The trace study saves one such picture per shown triplet in the run folder; the reports
link it. Drawn with numpy and Pillow only: a four-stop colour scale (blue, cyan, yellow,
red for attention 0, 1/3, 2/3, 1) blended over the image with an opacity that grows
with the attention, so low-attention areas stay readable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

#: Colour of attention 0, 1/3, 2/3 and 1.
_STOPS = np.array([[40, 60, 200], [0, 200, 220], [250, 220, 0], [220, 20, 20]], dtype=np.float64)
#: Opacity of the colour where the attention is 1.
OPACITY = 0.65
#: White space between the pictures, in pixels.
GAP = 4


def heat_colours(heatmap: np.ndarray) -> np.ndarray:
    """(H, W) values in [0, 1] -> (H, W, 3) float RGB on the colour scale."""
    values = np.clip(np.asarray(heatmap, dtype=np.float64), 0.0, 1.0)
    positions = np.linspace(0.0, 1.0, len(_STOPS))
    return np.stack([np.interp(values, positions, _STOPS[:, channel]) for channel in range(3)], axis=-1)


def overlay(image: Image.Image, heatmap: np.ndarray) -> Image.Image:
    """``image`` with ``heatmap`` (its size, values in [0, 1]) blended over it."""
    from PIL import Image

    pixels = np.asarray(image.convert("RGB"), dtype=np.float64)
    if heatmap.shape != pixels.shape[:2]:
        raise AuditorError(f"an attention map of shape {heatmap.shape} does not fit an image of {pixels.shape[:2]}")
    weight = OPACITY * np.clip(heatmap, 0.0, 1.0)[..., None]
    blended = pixels * (1 - weight) + heat_colours(heatmap) * weight
    return Image.fromarray(np.round(blended).astype(np.uint8), "RGB")


def triplet_picture(images: Sequence[Image.Image], heatmaps: Sequence[np.ndarray | None]) -> Image.Image:
    """The images in a row, and below each its overlay (the plain image again where there is no map)."""
    from PIL import Image

    if not images or len(images) != len(heatmaps):
        raise AuditorError(
            f"a triplet picture needs one map (or None) per image: {len(images)} images, {len(heatmaps)}"
        )
    width, height = images[0].size
    if any(image.size != (width, height) for image in images):
        raise AuditorError("the images of a triplet picture must share one size")
    canvas = Image.new("RGB", (len(images) * width + (len(images) - 1) * GAP, 2 * height + GAP), "white")
    for column, (image, heatmap) in enumerate(zip(images, heatmaps)):
        x = column * (width + GAP)
        canvas.paste(image.convert("RGB"), (x, 0))
        canvas.paste(image.convert("RGB") if heatmap is None else overlay(image, heatmap), (x, height + GAP))
    return canvas
