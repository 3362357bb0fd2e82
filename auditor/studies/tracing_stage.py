"""The traced generation stage: prompts -> images on disk, and their traces in the content cache.

The shared generation stage (:mod:`auditor.executors.generation`) makes images; this
one makes the same images through :func:`auditor.generation.tracing.trace`, which also
records, in the same pipeline call, the text encoder's output, the final latent z₀ and
the attention map of each chosen prompt word. One cache entry per (prompt, seed, words)
under :func:`~auditor.generation.tracing.trace_fingerprint` holds all of it
(:class:`TraceEntry`), so a rerun or resume generates nothing and the later stages read
the traces back instead of generating twice. Each finished batch is cached and written
to the run folder at once: an interrupted run loses at most one batch.

The stage runs on the run's executor (:meth:`~auditor.executors.base.Executor.run_batches`):
the pipeline calls in this process or on Ray workers, which send each batch's entries
back compressed; the cache, the files and the record are written here either way.

Attention maps are kept as 8-bit values (round(255·a)): an image-sized float map per
word would make the cache larger than the images themselves.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from auditor.core.cache import ContentCache
from auditor.core.errors import AuditorError
from auditor.core.store import atomic_write_bytes, sha256_bytes
from auditor.executors.base import ModelRecipe
from auditor.executors.generation import image_relpath, png_bytes
from auditor.generation.base import GenerationItem
from auditor.records import GeneratedImage, PromptSet
from auditor.studies.progress import StageCounts

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

    from auditor.generation.diffusers_backend import DiffusersTextToImage
    from auditor.generation.tracing import TracedPicture
    from auditor.studies.run import StudyRun

#: Cache stage of traced generations (the timing and progress stage is "generate").
STAGE = "trace"
PROGRESS = "generate"
#: Levels of a stored attention map.
MAP_LEVELS = 255

#: A model's ``prompt_words``: each prompt's words as its tokenizer splits them.
PromptWords = Callable[[list[str]], list[list[str]]]


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
        data = self.cache.get(STAGE, self.fingerprint, trace_inputs(request, seed))
        if data is None:
            raise AuditorError(
                f"the traces of {request.prompt!r} (seed {seed}) are not in the cache {self.cache.path}; "
                "resume the run to generate them again"
            )
        return TraceEntry.from_bytes(data)


@dataclass(frozen=True)
class TraceJob:
    """One image to generate and trace: its prompt set's request, its index in the set and its seed."""

    request: TraceRequest
    index: int
    seed: int


class TracedGeneration:
    """Fills every prompt set with one traced image per seed (image i from seed i), through the run's executor.

    A :class:`~auditor.executors.base.BatchStage`: the executor loads the model (here or on
    Ray workers) and runs :meth:`compute` where it is; everything else runs in this process.
    ``choose`` gets the model's ``prompt_words`` and returns the prompt sets to fill, with
    the words to trace. Misses are generated ``batch_size`` at a time, batches mixing
    prompts; the record's prompt sets are updated, and checkpointed, after every batch.
    """

    stage: ClassVar[str] = PROGRESS

    def __init__(self, study: StudyRun, choose: Callable[[PromptWords], list[TraceRequest]]):
        self.study = study
        self.choose = choose
        self.counts = StageCounts()
        #: The cache key of the traces, known once :meth:`open` has seen the model.
        self.fingerprint: str | None = None
        self._asked = study.record.config.generation
        self._requests: list[TraceRequest] = []
        self._images: dict[str, dict[int, GeneratedImage]] = {}

    def recipe(self) -> ModelRecipe:
        return ModelRecipe("t2i", self.study.record.config.t2i.spec, self._asked)

    def open(self, model: DiffusersTextToImage) -> list[list[TraceJob]]:
        from auditor.executors.generation import give_batch_size, say_cut_prompts
        from auditor.generation.tracing import trace_fingerprint

        study, config = self.study, self.study.record.config
        if getattr(model, "prompt_words", None) is None:
            raise AuditorError(f"{config.t2i.spec} has no tokenizer, so its prompt words cannot be traced")
        give_batch_size(study, model)
        self._asked = self._asked.model_copy(update={"batch_size": model.settings.batch_size})
        study.adopt_model("t2i", model.ref)
        config.generation = model.settings.model_copy(update={"batch_size_auto": self._asked.batch_size_auto})
        self._requests = self.choose(model.prompt_words)
        self._images = {request.prompt_id: {} for request in self._requests}
        self.fingerprint = trace_fingerprint(model)
        study.progress.start(PROGRESS, len(self._requests) * len(config.seeds), "generating traced images")
        pending = []
        for request in self._requests:
            for index, seed in enumerate(config.seeds):
                job = TraceJob(request, index, seed)
                hit = study.cache.get(STAGE, self.fingerprint, trace_inputs(request, seed))
                if hit is None:
                    pending.append(job)
                    continue
                self._keep(job, TraceEntry.from_bytes(hit))
                self.counts.cached += 1
                study.progress.advance(PROGRESS)
        self._checkpoint()
        say_cut_prompts(study, model, [job.request.prompt for job in pending])
        size = model.settings.batch_size
        return [pending[start : start + size] for start in range(0, len(pending), size)]

    @staticmethod
    def compute(model: DiffusersTextToImage, batch: list[TraceJob]) -> list[bytes]:
        """One pipeline call: the batch's cache entries (the PNG, traces and word maps, compressed)."""
        from auditor.generation.tracing import trace

        items = [GenerationItem(prompt=job.request.prompt, index=job.index, seed=job.seed) for job in batch]
        traced = trace(model, items, [list(job.request.words) for job in batch])
        return [TraceEntry.from_traced(picture, png_bytes(picture.picture.image)).to_bytes() for picture in traced]

    def store(self, batch: list[TraceJob], entries: list[bytes]) -> None:
        keys = [trace_inputs(job.request, job.seed) for job in batch]
        self.study.cache.put_many(STAGE, self.fingerprint, zip(keys, entries, strict=True))
        for job, data in zip(batch, entries, strict=True):
            self._keep(job, TraceEntry.from_bytes(data))
            self.counts.computed += 1
        self._checkpoint()
        self.study.progress.advance(PROGRESS, len(batch))

    def finish(self) -> None:
        self.study.record.prompt_sets = self.prompt_sets()

    def prompt_sets(self) -> list[PromptSet]:
        """The prompt sets with the images stored so far, in request and index order."""
        return [
            PromptSet(
                prompt_id=request.prompt_id,
                prompt=request.prompt,
                images=[self._images[request.prompt_id][i] for i in sorted(self._images[request.prompt_id])],
            )
            for request in self._requests
        ]

    def _keep(self, job: TraceJob, entry: TraceEntry) -> None:
        """Write the image into the run folder (unless it is there with these bytes) and list it in its set."""
        data = entry.png
        relpath = image_relpath(job.request.prompt_id, job.index)
        target = self.study.run_dir / relpath
        if not target.is_file() or target.read_bytes() != data:
            atomic_write_bytes(target, data)
        self._images[job.request.prompt_id][job.index] = GeneratedImage(
            index=job.index, file=relpath, seed=job.seed, sha256=sha256_bytes(data), flagged_nsfw=entry.flagged_nsfw
        )

    def _checkpoint(self) -> None:
        self.study.record.prompt_sets = self.prompt_sets()
        self.study.checkpoint()
