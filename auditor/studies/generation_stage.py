"""The generation stage shared by every study: prompt sets -> images on disk, through the cache.

For each prompt set and image index the stage first asks the content cache (key: the
backend's cache fingerprint, the prompt, and the seed — or the index for backends that
take no seed). Only the misses are generated, in batches that may mix prompts, and two
requests for the same image (the same prompt and seed in two sets) make it once; each
finished image is cached and written to the run folder at once, so an interrupted run
loses at most one batch. A request may ask for some image indices of its set only (an
exploration's round adds seeds to a set it started earlier).
"""

from __future__ import annotations

import io
import json
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
    """A prompt set to fill: its id (``initial``, ``gender/0``, ...), its text and axis.

    ``indices`` are the image indices to fill (image i from seed i of the run's seeds);
    None fills every index.
    """

    prompt_id: str
    prompt: str
    axis: str | None = None
    indices: tuple[int, ...] | None = None

    def items(self, seeds: Sequence[int]) -> list[GenerationItem]:
        """The images this request asks for."""
        indices = range(len(seeds)) if self.indices is None else self.indices
        return [GenerationItem(prompt=self.prompt, index=index, seed=seeds[index]) for index in indices]


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


def uncached(backend: TextToImage, cache: ContentCache, items: Sequence[GenerationItem]) -> list[GenerationItem]:
    """The distinct images among ``items`` that the cache lacks: what generating them would cost.

    Two items for the same image (same prompt and seed, or index) count once, as
    :func:`generate_images` makes them once. Looking does not count as a cache hit or miss.
    """
    fingerprint = backend.cache_fingerprint()
    missing: dict[str, GenerationItem] = {}
    for item in items:
        inputs = _cache_inputs(backend, item)
        key = json.dumps(inputs, sort_keys=True)
        if key not in missing and not cache.contains(STAGE, fingerprint, inputs):
            missing[key] = item
    return list(missing.values())


def merge_sets(earlier: Sequence[PromptSet], newer: Sequence[PromptSet]) -> list[PromptSet]:
    """``earlier`` with ``newer``'s images added (an image index in both takes ``newer``'s), new sets at the end."""
    merged = {prompt_set.prompt_id: prompt_set for prompt_set in earlier}
    for prompt_set in newer:
        old = merged.get(prompt_set.prompt_id)
        if old is not None:
            images = {image.index: image for image in old.images} | {image.index: image for image in prompt_set.images}
            prompt_set = prompt_set.model_copy(update={"images": [images[i] for i in sorted(images)]})
        merged[prompt_set.prompt_id] = prompt_set
    return list(merged.values())


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
    """Fill every prompt set with its requested images (image i from seed i; by default all
    ``len(seeds)``) and return the sets with the images of this call.

    ``checkpoint`` is called with the sets so far after every batch, so the caller can
    write a partial record that a crash or Ctrl-C leaves behind.
    """
    fingerprint = backend.cache_fingerprint()
    images: dict[str, dict[int, GeneratedImage]] = {request.prompt_id: {} for request in requests}
    pending: dict[str, list[tuple[PromptRequest, GenerationItem]]] = {}  # image -> the sets waiting for it
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

    wanted = [(request, item) for request in requests for item in request.items(seeds)]
    progress.start(STAGE, len(wanted), "generating images")
    try:
        for request, item in wanted:
            inputs = _cache_inputs(backend, item)
            key = json.dumps(inputs, sort_keys=True)
            if key in pending:
                pending[key].append((request, item))
                continue
            hit = cache.get(STAGE, fingerprint, inputs)
            if hit is None:
                pending[key] = [(request, item)]
                continue
            store(request, item, *_unpack(hit))
            outcome.cached += 1
            progress.advance(STAGE)
        checkpoint(snapshot())
        waiting = list(pending.values())
        for start in range(0, len(waiting), batch_size):
            batch = waiting[start : start + batch_size]
            pictures = backend.generate([sets[0][1] for sets in batch])
            for sets, picture in zip(batch, pictures, strict=True):
                data = png_bytes(picture.image)
                cache.put(STAGE, fingerprint, _cache_inputs(backend, sets[0][1]), _pack(data, picture.flagged_nsfw))
                for request, item in sets:
                    store(request, item, data, picture.flagged_nsfw)
                outcome.computed += 1
                outcome.cached += len(sets) - 1  # the same image for another set: made once
            checkpoint(snapshot())
            progress.advance(STAGE, sum(len(sets) for sets in batch))
    finally:
        progress.finish(STAGE)
    return snapshot(), outcome
