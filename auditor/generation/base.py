"""The text-to-image protocol every generation backend implements.

The study decides what to generate (it consults the content cache first) and hands a
backend one batch of :class:`GenerationItem` at a time; the backend returns one
:class:`GeneratedPicture` per item, in order. Image i of every prompt set uses seed i
(paired seeds), so differences between sets come from the prompt, not the noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from auditor.records import GenerationSettings, ModelRef

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image


@dataclass(frozen=True)
class GenerationItem:
    """One image to make: image ``index`` of ``prompt``'s set, from ``seed``."""

    prompt: str
    index: int
    seed: int


@dataclass
class GeneratedPicture:
    """A generated image and what the backend knows about it."""

    image: Image.Image
    flagged_nsfw: bool = False


class TextToImage(Protocol):
    """A text-to-image model under audit.

    A backend that can tell up front that it cannot make some items (a folder of images lacking some) may
    have ``check(items)``, raising one error for all of them: the generate stage calls it with every image
    it is to make before the first batch.
    """

    #: Model identity for the record; ``fingerprint`` (with the settings) keys the cache.
    ref: ModelRef
    #: Whether ``seed`` determines the image (False for APIs that take no seed, and folders).
    seeded: bool
    #: The settings in effect, with the model's defaults filled in (steps, guidance, size, scheduler).
    settings: GenerationSettings

    def cache_fingerprint(self) -> str:
        """Model fingerprint plus every setting that changes an image (steps, guidance, size, ...)."""
        ...

    def generate(self, items: Sequence[GenerationItem]) -> list[GeneratedPicture]:
        """Make one image per item, in order (one forward pass per call where the backend can)."""
        ...
