"""The generate stage's bookkeeping: prompt sets -> images on disk, through the content cache.

For each prompt set and image index the stage first asks the content cache (key: the
backend's cache fingerprint, the prompt, and the seed — or the index for backends that
take no seed). Only the misses go to the model, in batches that may mix prompts, and two
requests for the same image (the same prompt and seed in two sets) make it once. A request
may ask for some image indices of its set only (an exploration's round adds seeds to a set
it started earlier); the images it makes join those the record already holds. Every
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
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor.core.store import atomic_write_bytes, sha256_bytes
from auditor.core.text import elided
from auditor.core.weights import computes_alike
from auditor.executors.base import ModelRecipe
from auditor.generation.base import GeneratedPicture, GenerationItem, TextToImage
from auditor.records import GeneratedImage, GenerationSettings, PromptSet
from auditor.studies.progress import StageCounts

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

    from auditor.core.cache import ContentCache
    from auditor.executors.writer import BackgroundWriter
    from auditor.studies.run import StudyRun

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


#: zlib's level for the PNG files: 1 encodes a 512x512 photo in about 18 ms instead of 55-87 ms at Pillow's default
#: 6, for files about 14% larger. The encoder (the run's writer thread) then keeps up with a fast GPU.
PNG_COMPRESS_LEVEL = 1


def png_bytes(image: Image.Image) -> bytes:
    """Encode an image as PNG (lossless, deterministic for the same pixels)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
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


def load_text_to_image(study: StudyRun) -> TextToImage:
    """Load the run's model under audit in this process, ready to generate: its batch size set
    (:func:`give_batch_size`), with ``--compile`` compiled (with a notice where it cannot), and what it then says
    about itself remembered (:mod:`auditor.executors.recall`). Done once per load: a study's model pool
    (:class:`~auditor.studies.run.ModelPool`) may keep it for later stages."""
    from auditor.executors.recall import load_remembering

    config = study.record.config
    recipe = text_to_image_recipe(study)

    def load() -> TextToImage:
        backend = recipe.load(study.load_options())
        give_batch_size(study, backend)
        if config.generation.compile and (problem := compile_backend(backend)) is not None:
            study.progress.notice(problem)
        return backend

    return load_remembering(study, recipe, load)


def described_text_to_image(study: StudyRun) -> Any:
    """What keys the run's images in the cache (``seeded``, ``cache_fingerprint``): the description an earlier load
    of the same model left (:mod:`auditor.executors.recall`), else the model loaded here."""
    from auditor.executors.recall import recall

    return recall(study, text_to_image_recipe(study)) or study.text_to_image()


def text_to_image_recipe(study: StudyRun) -> ModelRecipe:
    """The run's model under audit with the generation settings its config holds now."""
    config = study.record.config
    return ModelRecipe("t2i", config.t2i.spec, config.generation)


#: The most characters of a prompt (or of its cut end) a notice quotes.
QUOTED_PROMPT = 300


def say_cut_prompts(study: StudyRun, backend: TextToImage, prompts: Sequence[str]) -> None:
    """A notice for each prompt to generate whose end the model's text encoder never reads (a model loaded in this
    process with ``cut_prompts``): its images cannot show what that end says, a counterfactual word included."""
    cut_prompts = getattr(backend, "cut_prompts", None)
    if cut_prompts is None:
        return
    for prompt, end in cut_prompts(list(dict.fromkeys(prompts))):
        study.progress.notice(  # a prompt of thousands of characters is quoted by its start and end
            f"the text encoder reads only the start of {elided(prompt, QUOTED_PROMPT)!r}: "
            f"{elided(end, QUOTED_PROMPT)!r} is cut, so the images cannot show it"
        )


def say_unused_seeds(study: StudyRun) -> None:
    """A notice when ``--seed`` asked for seeds the model cannot take (an images API, a folder of images): its image
    i of a prompt is the i-th one drawn, whatever the seed, so the person should not expect the seed to pin them."""
    config = study.record.config
    if config.seeds != list(range(len(config.seeds))):
        study.notice_once(
            f"--seed is not used: {config.t2i.spec} takes no seed, so image i of each prompt set is its i-th draw "
            "and images of different sets share no starting noise"
        )


def say_unused_settings(study: StudyRun, asked: GenerationSettings, applied: GenerationSettings) -> None:
    """A notice naming the options asked for that the model does not apply (its settings leave them None, and so
    does the record): a person should not read its images as made with them."""
    unused = [option for name, option in GenerationSettings.IMAGE_OPTIONS.items() if getattr(asked, name) is not None
              and getattr(applied, name) is None]  # fmt: skip
    if unused:
        study.notice_once(
            f"{', '.join(unused)} {'is' if len(unused) == 1 else 'are'} not used: {study.record.config.t2i.spec} "
            "does not make its images with them (the record leaves them out)"
        )


def give_batch_size(study: StudyRun, backend: TextToImage) -> None:
    """Give a loaded model (here, or on a Ray worker as the driver sees it) the run's batch size: the
    one asked, or the one probed (and remembered) for ``--batch-size auto``."""
    from auditor.executors.batch_size import resolve_batch_size

    asked = study.record.config.generation
    if asked.batch_size_auto:
        config = study.record.config
        others = [ref.spec for ref in study.record.models() if ref is not config.t2i]
        beside = others if config.executor == "overlapped" else []  # there they stay loaded beside generation
        size = resolve_batch_size(backend, study.cache, study.progress, config.executor, beside)
    else:
        size = asked.batch_size
    backend.settings = backend.settings.model_copy(update={"batch_size": size})


def cache_inputs(seeded: bool, item: GenerationItem) -> dict:
    """An image's cache key: its prompt and seed, or its index for a backend that takes no seed (``seeded`` False)."""
    if seeded:
        return {"prompt": item.prompt, "seed": item.seed}
    return {"prompt": item.prompt, "index": item.index}


def _image_key(inputs: dict) -> str:
    return json.dumps(inputs, sort_keys=True)


def uncached(backend: TextToImage, cache: ContentCache, items: Sequence[GenerationItem]) -> list[GenerationItem]:
    """The distinct images among ``items`` that the cache lacks: what generating them would cost.

    Two items for the same image count once, as the stage makes them once. Looking counts
    no cache hit or miss.
    """
    fingerprint = backend.cache_fingerprint()
    missing: dict[str, GenerationItem] = {}
    for item in items:
        inputs = cache_inputs(backend.seeded, item)
        key = _image_key(inputs)
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


def _pack(data: bytes, flagged_nsfw: bool) -> bytes:
    """Cache value of one image: a flag byte (safety checker fired) followed by the PNG."""
    return bytes([flagged_nsfw]) + data


def _unpack(value: bytes) -> tuple[bytes, bool]:
    return value[1:], bool(value[0])


class GenerationStage:
    """Fills the requested images of every prompt set (image i from seed i) through the cache.

    An executor calls :meth:`open` (the model), :meth:`scan` (cache look-ups; returns the
    images to generate), runs the backend on batches of them and hands each batch to
    :meth:`store` through the writer, then :meth:`close`. The record's prompt sets are
    those it held before with this stage's images merged in (:meth:`snapshot`).
    """

    def __init__(self, study: StudyRun, requests: Sequence[PromptRequest]):
        self.study = study
        self.requests = list(requests)
        self.seeds = list(study.record.config.seeds)
        self.counts = StageCounts()
        self._before = list(study.record.prompt_sets)
        self._images: dict[str, dict[int, GeneratedImage]] = {r.prompt_id: {} for r in self.requests}
        self._wanted = [(r, item) for r in self.requests for item in r.items(self.seeds)]
        self._order = [(r.prompt_id, item.index) for r, item in self._wanted]
        self._waiting: dict[str, list[tuple[PromptRequest, GenerationItem]]] = {}  # image key -> sets waiting for it
        self._ready: dict[tuple[str, int], StoredImage] = {}
        self._released = 0
        self._subscribers: list[Callable[[StoredImage | None], None]] = []
        self._fingerprint = ""
        self._seeded = True
        #: The generation settings the run asks for; :meth:`settle` records the ones that ran.
        self._asked = study.record.config.generation
        #: The model the record's images were made with (before :meth:`adopt` records this attempt's).
        self._made_by = study.record.results_from.get("t2i")

    @property
    def total(self) -> int:
        """Images this stage stores once it is done."""
        return len(self._order)

    def recipe(self) -> ModelRecipe:
        """The model under audit with the settings the run asks for (the run's, before :meth:`settle`)."""
        config = self.study.record.config
        return ModelRecipe("t2i", config.t2i.spec, self._asked)

    def prompts(self) -> list[str]:
        """The distinct prompts of the images this stage wants, in order."""
        return list(dict.fromkeys(item.prompt for _, item in self._wanted))

    def open(self) -> TextToImage:
        """The model under audit, recorded as it runs (:meth:`adopt`).

        When the cache holds every image this stage wants and an earlier load of the same weights with the same
        settings was remembered, that load's description (:mod:`auditor.executors.recall`): nothing is loaded.
        Otherwise the model in this process, from the study's pool (loaded, given its batch size and compiled the
        first time: :func:`load_text_to_image`).
        """
        backend: Any = self._remembered or self.study.text_to_image()
        self.adopt(backend)
        return backend

    def loads_model(self) -> bool:
        """Whether :meth:`open` will load the model in this process (and so probe ``--batch-size auto``)."""
        return self._remembered is None

    @cached_property
    def _remembered(self) -> Any:
        """An earlier load's description of the model when the cache holds every image this stage wants, else None;
        looked up once, for :meth:`loads_model` and :meth:`open` alike."""
        from auditor.executors.recall import recall

        backend = recall(self.study, self.recipe())
        if backend is None or uncached(backend, self.study.cache, [item for _, item in self._wanted]):
            return None
        return backend

    def adopt(self, backend: TextToImage) -> None:
        """Record the model that runs and the settings it runs with (:meth:`settle`).

        ``backend`` may be loaded here or elsewhere (a Ray worker's model as the driver sees it,
        given its batch size with :func:`give_batch_size`): what is recorded comes from the model
        itself, with its defaults filled in.
        """
        self.study.adopt_model("t2i", backend.ref)
        say_unused_settings(self.study, self._asked, backend.settings)
        self.settle(backend.settings)

    def settle(self, settings: GenerationSettings) -> None:
        """Record the settings that run: the model's defaults filled in and its speed-ups; batch size,
        ``batch_size_auto`` and ``compile`` are ours."""
        asked = self._asked
        self.study.record.config.generation = settings.model_copy(
            update={"batch_size_auto": asked.batch_size_auto, "compile": asked.compile}
        )

    def close(self) -> None:
        """The stage is done with the model: the pool releases it unless the study keeps its models."""
        self.study.models.done("t2i")

    def subscribe(self, receive: Callable[[StoredImage | None], None]) -> None:
        """Get every stored image in request and index order, then ``None`` when all are stored."""
        self._subscribers.append(receive)

    def scan(self, backend: TextToImage, writer: BackgroundWriter) -> list[GenerationItem]:
        """Look every image up in the cache: hits are stored (by the writer), the distinct misses returned in order."""
        self._seeded = backend.seeded
        if not self._seeded:
            say_unused_seeds(self.study)
        self._fingerprint = backend.cache_fingerprint()
        cache, progress = self.study.cache, self.study.progress
        progress.start(STAGE, self.total, "generating images")
        pending: list[GenerationItem] = []
        hits: list[tuple[PromptRequest, GenerationItem, bytes, bool]] = []
        in_folder = self._folder_images(backend)
        for request, item in self._wanted:
            inputs = cache_inputs(self._seeded, item)
            key = _image_key(inputs)
            if key in self._waiting:
                self._waiting[key].append((request, item))
                continue
            hit = cache.get(STAGE, self._fingerprint, inputs)
            if hit is None and (kept := self._kept_in_folder(in_folder, request, item)) is not None:
                hit = _pack(*kept)
                cache.put(STAGE, self._fingerprint, inputs, hit)  # the cache gets it back, as if made here
            if hit is None:
                self._waiting[key] = [(request, item)]
                pending.append(item)
            else:
                hits.append((request, item, *_unpack(hit)))

        def store_hits() -> None:
            for request, item, data, flagged in hits:
                self._keep(request, item, data, flagged, partial(decode_png, data))
                self.counts.cached += 1
                progress.advance(STAGE)
            self._checkpoint()
            self._release()

        writer.submit(store_hits)
        if (check := getattr(backend, "check", None)) is not None:
            check(pending)
        say_cut_prompts(self.study, backend, [item.prompt for item in pending])
        return pending

    def store(self, batch: Sequence[GenerationItem], pictures: Sequence[GeneratedPicture]) -> None:
        """Encode, hash, cache and write one generated batch; rewrite the record (run by the writer)."""
        self.store_encoded(batch, [encode(picture) for picture in pictures], [p.image for p in pictures])

    def store_encoded(
        self,
        batch: Sequence[GenerationItem],
        encoded: Sequence[EncodedPicture],
        images: Sequence[Image.Image] | None = None,
    ) -> None:
        """Hash, cache and write one batch of PNG-encoded images for every set waiting for them; rewrite
        the record (run by the writer).

        ``images`` are the pictures themselves when they are at hand (the subscribers then
        need not decode the PNG files again).
        """
        keys = [cache_inputs(self._seeded, item) for item in batch]
        values = [_pack(picture.png, picture.flagged_nsfw) for picture in encoded]
        self.study.cache.put_many(STAGE, self._fingerprint, zip(keys, values, strict=True))
        stored = 0
        for position, (inputs, picture) in enumerate(zip(keys, encoded, strict=True)):
            data = picture.png
            load = partial(decode_png, data) if images is None else partial(images[position].convert, "RGB")
            waiting = self._waiting.pop(_image_key(inputs))
            for request, wanted in waiting:
                self._keep(request, wanted, data, picture.flagged_nsfw, load)
            self.counts.computed += 1
            self.counts.cached += len(waiting) - 1  # the same image for another set: made once
            stored += len(waiting)
        self._checkpoint()
        self.study.progress.advance(STAGE, stored)
        self._release()

    def finish(self) -> None:
        """Tell the subscribers that every image is stored (run by the writer, after the last batch)."""
        for receive in self._subscribers:
            receive(None)

    def snapshot(self) -> list[PromptSet]:
        """The record's prompt sets: those it held before, with the images stored so far merged in."""
        return merge_sets(
            self._before,
            [
                PromptSet(
                    prompt_id=request.prompt_id,
                    prompt=request.prompt,
                    axis=request.axis,
                    images=[self._images[request.prompt_id][i] for i in sorted(self._images[request.prompt_id])],
                )
                for request in self.requests
            ],
        )

    def stored(self) -> list[StoredImage]:
        """This stage's images as readers take them, in request and index order, read back from the run folder."""
        return [
            stored_image(self.study, prompt_id, image)
            for prompt_id, index in self._order
            if (image := self._images[prompt_id].get(index)) is not None
        ]

    # ------------------------------------------------------------------ internals

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

    def _folder_images(self, backend: TextToImage) -> dict[tuple[str, str, int], GeneratedImage]:
        """The images an earlier attempt recorded, by prompt id, prompt and index, where the record says the same
        weights made them in the same precision on the same kind of device as ``backend``; none otherwise."""
        if not computes_alike(self._made_by, backend.ref):
            return {}
        return {(s.prompt_id, s.prompt, image.index): image for s in self._before for image in s.images}

    def _kept_in_folder(
        self, in_folder: dict[tuple[str, str, int], GeneratedImage], request: PromptRequest, item: GenerationItem
    ) -> tuple[bytes, bool] | None:
        """The image an earlier attempt left in the run folder for this prompt and seed (:meth:`_folder_images`),
        with its safety flag, when the cache lacks it (the run was moved, or the cache cleared): taken only where
        the file is still the one recorded."""
        image = in_folder.get((request.prompt_id, request.prompt, item.index))
        if image is None or image.seed != (item.seed if self._seeded else None):
            return None
        path = self.study.run_dir / image.file
        data = path.read_bytes() if path.is_file() else None
        return (data, image.flagged_nsfw) if data is not None and sha256_bytes(data) == image.sha256 else None

    def _checkpoint(self) -> None:
        self.study.record.prompt_sets = self.snapshot()
        self.study.checkpoint()

    def _release(self) -> None:
        """Hand the subscribers every image whose predecessors (in request and index order) are all stored."""
        while self._released < len(self._order) and self._order[self._released] in self._ready:
            stored = self._ready.pop(self._order[self._released])
            self._released += 1
            for receive in self._subscribers:
                receive(stored)


def stored_image(study: StudyRun, prompt_id: str, image: GeneratedImage) -> StoredImage:
    """An image of the run folder as readers take it: its pixels are read from the file when needed."""
    return StoredImage(prompt_id, image, partial(_read_png, study.run_dir / image.file))


def _read_png(path: Path) -> Image.Image:
    return decode_png(path.read_bytes())
