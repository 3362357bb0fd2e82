"""The generation stage shared by every study: prompt sets -> images on disk, through the cache.

For each prompt set and image index the stage first asks the content cache (key: the
backend's cache fingerprint, the prompt, and the seed — or the index for backends that
take no seed). Only the misses are generated, in batches that may mix prompts; each
finished image is cached and written to the run folder at once, so an interrupted run
loses at most one batch.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.core.cache import ContentCache
from auditor.core.store import atomic_write_bytes, sha256_bytes
from auditor.generation.base import GenerationItem, TextToImage
from auditor.records import GeneratedImage, PromptSet
from auditor.studies.progress import ProgressReporter, StageCounts

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

STAGE = "generate"
_SAFE_COMPONENT = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class PromptRequest:
    """A prompt set to fill: its id (``initial``, ``gender/0``, ...), its text and axis."""

    prompt_id: str
    prompt: str
    axis: str | None = None


def image_relpath(prompt_id: str, index: int) -> str:
    """Where image ``index`` of a prompt set lives inside the run folder."""
    parts = [_SAFE_COMPONENT.sub("_", part) or "_" for part in prompt_id.split("/")]
    return "/".join(["images", *parts, f"{index:03d}.png"])


def png_bytes(image: Image.Image) -> bytes:
    """Encode an image as PNG (lossless, deterministic for the same pixels)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _pack(data: bytes, flagged_nsfw: bool) -> bytes:
    """Cache value of one image: a flag byte (safety checker fired) followed by the PNG."""
    return bytes([flagged_nsfw]) + data


def _unpack(value: bytes) -> tuple[bytes, bool]:
    return value[1:], bool(value[0])


def _cache_inputs(backend: TextToImage, item: GenerationItem) -> dict:
    if backend.seeded:
        return {"prompt": item.prompt, "seed": item.seed}
    return {"prompt": item.prompt, "index": item.index}


def generate_images(
    backend: TextToImage,
    requests: Sequence[PromptRequest],
    seeds: Sequence[int],
    cache: ContentCache,
    run_dir: Path,
    batch_size: int,
    progress: ProgressReporter,
    checkpoint: Callable[[list[PromptSet]], None] = lambda _sets: None,
) -> tuple[list[PromptSet], StageCounts]:
    """Fill every prompt set with ``len(seeds)`` images (image i from seed i) and return them.

    ``checkpoint`` is called with the sets so far after every batch, so the caller can
    write a partial record that a crash or Ctrl-C leaves behind.
    """
    fingerprint = backend.cache_fingerprint()
    images: dict[str, dict[int, GeneratedImage]] = {request.prompt_id: {} for request in requests}
    pending: list[tuple[PromptRequest, GenerationItem]] = []
    outcome = StageCounts()

    def store(request: PromptRequest, item: GenerationItem, data: bytes, flagged: bool) -> None:
        relpath = image_relpath(request.prompt_id, item.index)
        target = run_dir / relpath
        if not target.is_file() or target.read_bytes() != data:
            atomic_write_bytes(target, data)
        images[request.prompt_id][item.index] = GeneratedImage(
            index=item.index,
            file=relpath,
            seed=item.seed if backend.seeded else None,
            sha256=sha256_bytes(data),
            flagged_nsfw=flagged,
        )

    def snapshot() -> list[PromptSet]:
        return [
            PromptSet(
                prompt_id=request.prompt_id,
                prompt=request.prompt,
                axis=request.axis,
                images=[images[request.prompt_id][i] for i in sorted(images[request.prompt_id])],
            )
            for request in requests
        ]

    progress.start(STAGE, len(requests) * len(seeds), "generating images")
    try:
        for request in requests:
            for index, seed in enumerate(seeds):
                item = GenerationItem(prompt=request.prompt, index=index, seed=seed)
                hit = cache.get(STAGE, fingerprint, _cache_inputs(backend, item))
                if hit is None:
                    pending.append((request, item))
                    continue
                store(request, item, *_unpack(hit))
                outcome.cached += 1
                progress.advance(STAGE)
        checkpoint(snapshot())
        for start in range(0, len(pending), batch_size):
            batch = pending[start : start + batch_size]
            pictures = backend.generate([item for _, item in batch])
            for (request, item), picture in zip(batch, pictures, strict=True):
                data = png_bytes(picture.image)
                cache.put(STAGE, fingerprint, _cache_inputs(backend, item), _pack(data, picture.flagged_nsfw))
                store(request, item, data, picture.flagged_nsfw)
                outcome.computed += 1
            checkpoint(snapshot())
            progress.advance(STAGE, len(batch))
    finally:
        progress.finish(STAGE)
    return snapshot(), outcome
