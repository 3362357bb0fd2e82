"""The traced generation stage: prompts -> images on disk, and their traces in the content cache.

The shared generation stage (:mod:`auditor.executors.generation`) makes images; this
one makes the same images through :func:`auditor.generation.tracing.trace`, which also
records, in the same pipeline call, the text encoder's output, the final latent z₀ and
the attention map of each chosen prompt word. One cache entry per (prompt, seed, words)
under :func:`~auditor.generation.tracing.trace_fingerprint` holds all of it
(:class:`TraceEntry`), so a rerun or resume generates nothing and the later stages read
the traces back instead of generating twice. Each finished batch is cached and written
to the run folder at once: an interrupted run loses at most one batch.

Attention maps are kept as 8-bit values (round(255·a)): an image-sized float map per
word would make the cache larger than the images themselves.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from auditor.core.cache import ContentCache
from auditor.core.store import atomic_write_bytes, sha256_bytes
from auditor.executors.generation import image_relpath, png_bytes
from auditor.generation.base import GenerationItem
from auditor.records import GeneratedImage, PromptSet
from auditor.studies.progress import ProgressReporter, StageCounts

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

    from auditor.generation.diffusers_backend import DiffusersTextToImage
    from auditor.generation.tracing import TracedPicture

#: Cache stage of traced generations (the timing and progress stage is "generate").
STAGE = "trace"
PROGRESS = "generate"
#: Levels of a stored attention map.
MAP_LEVELS = 255


class TraceEntry:
    """One traced image as the cache holds it: the PNG, the safety flag, encodings, z₀ and word maps.

    Built from a :class:`~auditor.generation.tracing.TracedPicture` or read from cache
    bytes (an ``.npz``); arrays are decompressed only when asked for.
    """

    def __init__(self, arrays: Mapping[str, np.ndarray]):
        self._arrays = arrays

    @classmethod
    def from_traced(cls, traced: TracedPicture, png: bytes) -> TraceEntry:
        words = list(traced.word_maps)
        maps = [np.round(np.clip(traced.word_maps[word], 0.0, 1.0) * MAP_LEVELS).astype(np.uint8) for word in words]
        height, width = traced.picture.image.height, traced.picture.image.width
        return cls(
            {
                "png": np.frombuffer(png, dtype=np.uint8),
                "flagged": np.array(traced.picture.flagged_nsfw),
                "eos": np.asarray(traced.encoding.eos, dtype=np.float32),
                "mean": np.asarray(traced.encoding.mean, dtype=np.float32),
                "latent": np.asarray(traced.latent, dtype=np.float32),
                "words": np.array(words, dtype=str),
                "maps": np.stack(maps) if maps else np.zeros((0, height, width), dtype=np.uint8),
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> TraceEntry:
        return cls(np.load(io.BytesIO(data), allow_pickle=False))

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **{name: self._arrays[name] for name in self._arrays})
        return buffer.getvalue()

    @property
    def png(self) -> bytes:
        return self._arrays["png"].tobytes()

    @property
    def flagged_nsfw(self) -> bool:
        return bool(self._arrays["flagged"])

    @property
    def eos(self) -> np.ndarray:
        """The text encoder's final hidden state at the EOS token."""
        return self._arrays["eos"]

    @property
    def mean(self) -> np.ndarray:
        """The text encoder's final hidden states averaged over the prompt's tokens."""
        return self._arrays["mean"]

    @property
    def latent(self) -> np.ndarray:
        """z₀ before the VAE decode."""
        return self._arrays["latent"]

    @property
    def words(self) -> list[str]:
        return [str(word) for word in self._arrays["words"]]

    def word_map(self, word: str) -> np.ndarray | None:
        """The word's image-sized attention map in [0, 1] (at 8-bit precision), or None when it was not traced."""
        words = self.words
        if word not in words:
            return None
        return self._arrays["maps"][words.index(word)].astype(np.float64) / MAP_LEVELS

    def image(self) -> Image.Image:
        from PIL import Image

        with Image.open(io.BytesIO(self.png)) as handle:
            return handle.convert("RGB")


@dataclass(frozen=True)
class TraceRequest:
    """A prompt set to fill with traced images: its id, its prompt and the words to map."""

    prompt_id: str
    prompt: str
    words: tuple[str, ...]


def trace_inputs(request: TraceRequest, seed: int) -> dict[str, Any]:
    """The cache inputs of one traced image (the fingerprint covers the model, settings and trace method)."""
    return {"prompt": request.prompt, "seed": seed, "words": list(request.words)}


class TraceReader:
    """Reads traced images back from the cache, for the stages after generation."""

    def __init__(self, cache: ContentCache, fingerprint: str):
        self.cache = cache
        self.fingerprint = fingerprint

    def entry(self, request: TraceRequest, seed: int) -> TraceEntry:
        from auditor.core.errors import AuditorError

        data = self.cache.get(STAGE, self.fingerprint, trace_inputs(request, seed))
        if data is None:
            raise AuditorError(
                f"the traces of {request.prompt!r} (seed {seed}) are not in the cache {self.cache.path}; "
                "resume the run to generate them again"
            )
        return TraceEntry.from_bytes(data)


def generate_traced(
    backend: DiffusersTextToImage,
    requests: Sequence[TraceRequest],
    seeds: Sequence[int],
    cache: ContentCache,
    run_dir: Path,
    progress: ProgressReporter,
    checkpoint: Callable[[list[PromptSet]], None] = lambda _sets: None,
) -> tuple[list[PromptSet], StageCounts, str]:
    """Fill every prompt set with ``len(seeds)`` traced images (image i from seed i).

    Returns the sets, the computed/cached counts and the trace fingerprint the entries are
    cached under. Misses are generated ``backend.settings.batch_size`` at a time, batches
    mixing prompts; ``checkpoint`` gets the sets so far after every batch.
    """
    from auditor.generation.tracing import trace, trace_fingerprint

    fingerprint = trace_fingerprint(backend)
    images: dict[str, dict[int, GeneratedImage]] = {request.prompt_id: {} for request in requests}
    pending: list[tuple[TraceRequest, GenerationItem]] = []
    outcome = StageCounts()

    def store(request: TraceRequest, item: GenerationItem, data: bytes, flagged: bool) -> None:
        relpath = image_relpath(request.prompt_id, item.index)
        target = run_dir / relpath
        if not target.is_file() or target.read_bytes() != data:
            atomic_write_bytes(target, data)
        images[request.prompt_id][item.index] = GeneratedImage(
            index=item.index, file=relpath, seed=item.seed, sha256=sha256_bytes(data), flagged_nsfw=flagged
        )

    def snapshot() -> list[PromptSet]:
        return [
            PromptSet(
                prompt_id=request.prompt_id,
                prompt=request.prompt,
                images=[images[request.prompt_id][i] for i in sorted(images[request.prompt_id])],
            )
            for request in requests
        ]

    progress.start(PROGRESS, len(requests) * len(seeds), "generating traced images")
    try:
        for request in requests:
            for index, seed in enumerate(seeds):
                item = GenerationItem(prompt=request.prompt, index=index, seed=seed)
                hit = cache.get(STAGE, fingerprint, trace_inputs(request, seed))
                if hit is None:
                    pending.append((request, item))
                    continue
                entry = TraceEntry.from_bytes(hit)
                store(request, item, entry.png, entry.flagged_nsfw)
                outcome.cached += 1
                progress.advance(PROGRESS)
        checkpoint(snapshot())
        size = backend.settings.batch_size
        for start in range(0, len(pending), size):
            batch = pending[start : start + size]
            traced = trace(backend, [item for _, item in batch], [list(request.words) for request, _ in batch])
            for (request, item), picture in zip(batch, traced, strict=True):
                data = png_bytes(picture.picture.image)
                entry = TraceEntry.from_traced(picture, data)
                cache.put(STAGE, fingerprint, trace_inputs(request, item.seed), entry.to_bytes())
                store(request, item, data, picture.picture.flagged_nsfw)
                outcome.computed += 1
            checkpoint(snapshot())
            progress.advance(PROGRESS, len(batch))
    finally:
        progress.finish(PROGRESS)
    return snapshot(), outcome, fingerprint
