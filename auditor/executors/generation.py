"""The generate stage's bookkeeping: prompt sets -> images on disk, through the content cache.

For each prompt set and image index the stage first asks the content cache (key: the
backend's cache fingerprint, the prompt, and the seed — or the index for backends that
take no seed). Only the misses go to the model, in batches that may mix prompts. Every
finished image is encoded, hashed, cached and written to the run folder by the run's
background writer (:mod:`auditor.executors.writer`) while the model makes the next batch,
and the record is rewritten after every batch. An interrupted run (Ctrl-C, an error)
loses at most the batch in flight: the writer first stores what is queued. A killed
process also loses the batches queued for the writer (at most
:data:`~auditor.executors.writer.QUEUE_DEPTH`).

Images are handed on to the stages that read them (VQA, embeddings) in prompt-set and
index order, as soon as every image before them is stored: an executor that overlaps
the stages subscribes with :meth:`GenerationStage.subscribe`.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.core.store import atomic_write_bytes, sha256_bytes
from auditor.executors.base import ModelRecipe
from auditor.generation.base import GeneratedPicture, GenerationItem, TextToImage
from auditor.records import GeneratedImage, GenerationSettings, PromptSet
from auditor.studies.progress import StageCounts

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

    from auditor.executors.writer import BackgroundWriter
    from auditor.studies.run import StudyRun

STAGE = "generate"
_SAFE_COMPONENT = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class PromptRequest:
    """A prompt set to fill: its id (``initial``, ``gender/0``, ...), its text and axis."""

    prompt_id: str
    prompt: str
    axis: str | None = None


@dataclass(frozen=True)
class EncodedPicture:
    """A generated image as PNG bytes (encoded where it was made), and whether the safety checker fired."""

    png: bytes
    flagged_nsfw: bool = False


@dataclass(frozen=True)
class StoredImage:
    """An image of a prompt set as the reading stages get it: its record entry and its pixels."""

    prompt_id: str
    image: GeneratedImage
    #: The RGB picture (decoded on demand for images that came from the cache).
    picture: Callable[[], Image.Image]


def image_relpath(prompt_id: str, index: int) -> str:
    """Where image ``index`` of a prompt set lives inside the run folder."""
    parts = [_SAFE_COMPONENT.sub("_", part) or "_" for part in prompt_id.split("/")]
    return "/".join(["images", *parts, f"{index:03d}.png"])


def png_bytes(image: Image.Image) -> bytes:
    """Encode an image as PNG (lossless, deterministic for the same pixels)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def encode(picture: GeneratedPicture) -> EncodedPicture:
    return EncodedPicture(png_bytes(picture.image), picture.flagged_nsfw)


def compile_backend(backend: TextToImage) -> str | None:
    """``--compile``: torch.compile the model; None when it worked, else the notice to show (it runs eagerly)."""
    compile_model = getattr(backend, "compile", None)
    reason = "only diffusers models compile" if compile_model is None else compile_model()
    return None if reason is None else f"--compile: running without torch.compile ({reason})"


def decode_png(data: bytes) -> Image.Image:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as handle:
        return handle.convert("RGB")


def _pack(data: bytes, flagged_nsfw: bool) -> bytes:
    """Cache value of one image: a flag byte (safety checker fired) followed by the PNG."""
    return bytes([flagged_nsfw]) + data


def _unpack(value: bytes) -> tuple[bytes, bool]:
    return value[1:], bool(value[0])


class GenerationStage:
    """Fills every prompt set with ``len(seeds)`` images (image i from seed i) through the cache.

    An executor calls :meth:`scan` (cache look-ups; returns the items to generate), runs
    the backend on batches of them and hands each batch to :meth:`store` through the
    writer. :meth:`snapshot` gives the prompt sets so far, in request order.
    """

    def __init__(self, study: StudyRun, requests: Sequence[PromptRequest]):
        self.study = study
        self.requests = list(requests)
        self.seeds = list(study.record.config.seeds)
        self.counts = StageCounts()
        self._images: dict[str, dict[int, GeneratedImage]] = {r.prompt_id: {} for r in self.requests}
        self._order = [(r.prompt_id, i) for r in self.requests for i in range(len(self.seeds))]
        self._ready: dict[tuple[str, int], StoredImage] = {}
        self._released = 0
        self._subscribers: list[Callable[[StoredImage | None], None]] = []
        self._fingerprint = ""
        self._seeded = True
        #: The generation settings the run asks for; :meth:`settle` records the ones that ran.
        self._asked = study.record.config.generation

    @property
    def total(self) -> int:
        """Images the prompt sets hold once the stage is done."""
        return len(self._order)

    def recipe(self) -> ModelRecipe:
        """The model under audit with the settings the run asks for (the run's, before :meth:`settle`)."""
        config = self.study.record.config
        return ModelRecipe("t2i", config.t2i.spec, self._asked)

    def open(self) -> TextToImage:
        """Load the model under audit in this process: :meth:`adopt` it, compile it for ``--compile``
        (with a notice where it cannot), and :meth:`settle` the settings that run."""
        backend = self.recipe().load(self.study.load_options())
        self.adopt(backend)
        if self._asked.compile:
            problem = compile_backend(backend)
            if problem is not None:
                self.study.progress.notice(problem)
        self.settle(backend.settings)
        return backend

    def adopt(self, backend: TextToImage) -> None:
        """Record the model that runs and give it the batch size (probed for ``--batch-size auto``).

        ``backend`` may be loaded here or elsewhere (a Ray worker's model as the driver sees it):
        what is recorded comes from the model itself, with its defaults filled in.
        """
        from auditor.executors.batch_size import resolve_batch_size

        study, asked = self.study, self._asked
        config = study.record.config
        config.t2i = backend.ref.model_copy(update={"spec": config.t2i.spec})
        size = resolve_batch_size(backend, study.cache, study.progress) if asked.batch_size_auto else asked.batch_size
        backend.settings = backend.settings.model_copy(update={"batch_size": size})

    def settle(self, settings: GenerationSettings) -> None:
        """Record the settings that run: the model's defaults filled in and its speed-ups; batch size,
        ``batch_size_auto`` and ``compile`` are ours."""
        asked = self._asked
        self.study.record.config.generation = settings.model_copy(
            update={"batch_size_auto": asked.batch_size_auto, "compile": asked.compile}
        )

    def subscribe(self, receive: Callable[[StoredImage | None], None]) -> None:
        """Get every stored image in prompt-set and index order, then ``None`` when all are stored."""
        self._subscribers.append(receive)

    def scan(self, backend: TextToImage, writer: BackgroundWriter) -> list[tuple[PromptRequest, GenerationItem]]:
        """Look every image up in the cache: hits are stored (by the writer), misses returned in order."""
        self._fingerprint = backend.cache_fingerprint()
        self._seeded = backend.seeded
        cache, progress = self.study.cache, self.study.progress
        progress.start(STAGE, self.total, "generating images")
        pending: list[tuple[PromptRequest, GenerationItem]] = []
        hits: list[tuple[PromptRequest, GenerationItem, bytes, bool]] = []
        for request in self.requests:
            for index, seed in enumerate(self.seeds):
                item = GenerationItem(prompt=request.prompt, index=index, seed=seed)
                hit = cache.get(STAGE, self._fingerprint, self._cache_inputs(item))
                if hit is None:
                    pending.append((request, item))
                else:
                    hits.append((request, item, *_unpack(hit)))

        def store_hits() -> None:
            for request, item, data, flagged in hits:
                self._keep(request, item, data, flagged, lambda data=data: decode_png(data))
                self.counts.cached += 1
                progress.advance(STAGE)
            self._checkpoint()
            self._release()

        writer.submit(store_hits)
        return pending

    def store(self, batch: Sequence[tuple[PromptRequest, GenerationItem]], pictures: Sequence[GeneratedPicture]) -> None:
        """Encode, hash, cache and write one generated batch; rewrite the record (run by the writer)."""
        self.store_encoded(batch, [encode(picture) for picture in pictures], [p.image for p in pictures])

    def store_encoded(
        self,
        batch: Sequence[tuple[PromptRequest, GenerationItem]],
        encoded: Sequence[EncodedPicture],
        images: Sequence[Image.Image] | None = None,
    ) -> None:
        """Hash, cache and write one batch of PNG-encoded images; rewrite the record (run by the writer).

        ``images`` are the pictures themselves when they are at hand (the subscribers then
        need not decode the PNG files again).
        """
        cache = self.study.cache
        for position, ((request, item), picture) in enumerate(zip(batch, encoded, strict=True)):
            data = picture.png
            cache.put(STAGE, self._fingerprint, self._cache_inputs(item), _pack(data, picture.flagged_nsfw))
            load = partial(decode_png, data) if images is None else partial(images[position].convert, "RGB")
            self._keep(request, item, data, picture.flagged_nsfw, load)
            self.counts.computed += 1
        self._checkpoint()
        self.study.progress.advance(STAGE, len(batch))
        self._release()

    def finish(self) -> None:
        """Tell the subscribers that every image is stored (run by the writer, after the last batch)."""
        for receive in self._subscribers:
            receive(None)

    def snapshot(self) -> list[PromptSet]:
        """The prompt sets with the images stored so far, in request and index order."""
        return [
            PromptSet(
                prompt_id=request.prompt_id,
                prompt=request.prompt,
                axis=request.axis,
                images=[self._images[request.prompt_id][i] for i in sorted(self._images[request.prompt_id])],
            )
            for request in self.requests
        ]

    # ------------------------------------------------------------------ internals

    def _cache_inputs(self, item: GenerationItem) -> dict:
        if self._seeded:
            return {"prompt": item.prompt, "seed": item.seed}
        return {"prompt": item.prompt, "index": item.index}

    def _keep(
        self,
        request: PromptRequest,
        item: GenerationItem,
        data: bytes,
        flagged: bool,
        picture: Callable[[], Image.Image],
    ) -> None:
        relpath = image_relpath(request.prompt_id, item.index)
        target: Path = self.study.run_dir / relpath
        if not target.is_file() or target.read_bytes() != data:
            atomic_write_bytes(target, data)
        image = GeneratedImage(
            index=item.index,
            file=relpath,
            seed=item.seed if self._seeded else None,
            sha256=sha256_bytes(data),
            flagged_nsfw=flagged,
        )
        self._images[request.prompt_id][item.index] = image
        if self._subscribers:
            self._ready[request.prompt_id, item.index] = StoredImage(request.prompt_id, image, picture)

    def _checkpoint(self) -> None:
        self.study.record.prompt_sets = self.snapshot()
        self.study.save()

    def _release(self) -> None:
        """Hand the subscribers every image whose predecessors (in set and index order) are all stored."""
        while self._released < len(self._order) and self._order[self._released] in self._ready:
            stored = self._ready.pop(self._order[self._released])
            self._released += 1
            for receive in self._subscribers:
                receive(stored)
