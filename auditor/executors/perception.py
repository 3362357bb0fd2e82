"""The stages that read generated images: VQA answers and image embeddings, through the cache.

Answers are cached per (VQA fingerprint, image sha256, question) and embeddings per
(embedder fingerprint, image sha256), so a rerun with a new axis asks only the new
question, and an image that appears in two runs is looked at once. Images the safety
checker blacked out are skipped: they carry no concepts.

Both stages are :class:`ImageReader` s: they take images one at a time, in prompt-set and
index order, through a :class:`Feed` that looks each image up in the cache and groups
the ones still to compute into chunks. Every executor feeds them the same images in the
same order, so the chunks, and with them every answer and embedding, are the same
whether the reader runs after generation or alongside it. The model runs in the
executor's thread; cache writes, record updates and progress go to the run's writer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from auditor.core.errors import AuditorError
from auditor.executors.base import ModelRecipe
from auditor.executors.generation import StoredImage, decode_png
from auditor.records import GeneratedImage, ImageAnswers, PromptSet, Stage
from auditor.studies.progress import StageCounts

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

    from auditor.executors.writer import BackgroundWriter
    from auditor.perception.base import Embedder, VisualQuestionAnswerer
    from auditor.studies.run import StudyRun

PERCEIVE = "perceive"
EMBED = "embed"
#: Threads that decode a chunk's PNG files while nothing else is on the CPU.
DECODE_THREADS = 4


class ImageReader(ABC):
    """A stage that reads every usable image of a run: load a model, look up, compute, store."""

    stage: ClassVar[Stage]
    description: ClassVar[str]

    def __init__(self, study: StudyRun, chunk_size: int):
        self.study = study
        self.chunk_size = chunk_size
        self.counts = StageCounts()
        #: The loaded model, or a remote model's description under Ray (None until :meth:`open`).
        self.model: Any = None

    @abstractmethod
    def recipe(self) -> ModelRecipe:
        """The stage's model, as the run's config names it."""

    @abstractmethod
    def open(self, load: Callable[[ModelRecipe], Any] | None = None) -> bool:
        """Load the model (here, or wherever ``load`` loads a recipe) and record it; False when the stage
        is to be skipped."""

    def close(self) -> None:
        """Release the model."""
        self.model = None

    def _load(self, load: Callable[[ModelRecipe], Any] | None) -> Any:
        return self.recipe().load(self.study.load_options()) if load is None else load(self.recipe())

    @abstractmethod
    def missing(self, image: GeneratedImage) -> bool:
        """Cache look-ups for a new image: True when something about it must be computed."""

    def task(self, images: list[GeneratedImage]) -> Any:
        """What the model is to compute for a chunk of these images, besides reading them (picklable)."""
        return None

    @staticmethod
    @abstractmethod
    def compute(model: Any, pictures: list[Image.Image], task: Any) -> Any:
        """The model's results for one chunk's pictures (in the executor's compute thread, or on a worker)."""

    @abstractmethod
    def store(self, images: list[GeneratedImage], result: Any) -> None:
        """Cache one chunk's results (runs in the writer)."""

    @abstractmethod
    def complete(self, prompt_id: str, image: GeneratedImage) -> None:
        """Every result for this image is known: note it for its prompt set (runs in the writer)."""

    def checkpoint(self) -> None:
        """Write what is known so far into the record (runs in the writer, after each chunk)."""

    def finish(self) -> None:
        """Every image is read and stored; the model is still loaded (e.g. to embed texts too)."""


@dataclass(frozen=True)
class Chunk:
    """Images a reader computes together (distinct contents, in feed order) and what it asks of them."""

    stored: list[StoredImage]
    task: Any

    @property
    def images(self) -> list[GeneratedImage]:
        return [stored.image for stored in self.stored]


class Feed:
    """Takes a reader's images in order, finds what is missing, and cuts the rest into chunks.

    Two images with the same bytes are computed once; the second is completed when the
    first one's chunk is stored. ``counts.cached`` counts the images whose results were
    all in the cache, ``counts.computed`` the distinct images computed.

    Without ``dispatch`` each chunk is computed here, in the calling thread, as soon as it
    is full (the in-process executors). With it, each chunk is handed to ``dispatch`` and
    its result comes back through :meth:`store` once computed elsewhere, after every image
    has been added (the Ray executor): the chunks are the same either way.
    """

    def __init__(self, reader: ImageReader, writer: BackgroundWriter, dispatch: Callable[[Chunk], None] | None = None):
        self.reader = reader
        self.writer = writer
        self._dispatch = dispatch
        self._state: dict[str, str] = {}  # sha256 -> "cached" | "queued" | "computed"
        self._chunk: list[StoredImage] = []
        self._waiting: dict[str, list[StoredImage]] = {}

    def start(self, total: int) -> None:
        self.reader.study.progress.start(self.reader.stage, total, self.reader.description)

    def add(self, stored: StoredImage) -> None:
        reader, image = self.reader, stored.image
        if image.flagged_nsfw:
            self.writer.submit(partial(reader.study.progress.advance, reader.stage), reader.stage)
            return
        sha = image.sha256
        if sha not in self._state:
            if reader.missing(image):
                self._state[sha] = "queued"
                self._chunk.append(stored)
            else:
                self._state[sha] = "cached"
        if self._state[sha] == "queued":
            self._waiting.setdefault(sha, []).append(stored)
        else:
            if self._state[sha] == "cached":
                reader.counts.cached += 1
            self.writer.submit(partial(self._complete, [stored]), reader.stage)
        if len(self._chunk) >= reader.chunk_size:
            self.flush()

    def flush(self) -> None:
        """Cut the chunk gathered so far (the last one may be short) and compute or dispatch it."""
        if not self._chunk:
            return
        stored, self._chunk = self._chunk, []
        chunk = Chunk(stored, self.reader.task([entry.image for entry in stored]))
        if self._dispatch is not None:
            self._dispatch(chunk)
            return
        with ThreadPoolExecutor(max_workers=min(DECODE_THREADS, len(stored))) as pool:
            pictures = list(pool.map(lambda entry: entry.picture(), stored))
        self.store(chunk, self.reader.compute(self.reader.model, pictures, chunk.task))

    def store(self, chunk: Chunk, result: Any) -> None:
        """Hand a computed chunk's result to the writer, with every image waiting for it."""
        done = [entry for stored in chunk.stored for entry in self._waiting.pop(stored.image.sha256)]
        for stored in chunk.stored:
            self._state[stored.image.sha256] = "computed"
        self.reader.counts.computed += len(chunk.stored)
        images = chunk.images

        def store() -> None:
            self.reader.store(images, result)
            self._complete(done, checkpoint=True)

        self.writer.submit(store, self.reader.stage)

    def _complete(self, entries: list[StoredImage], checkpoint: bool = False) -> None:
        for stored in entries:
            self.reader.complete(stored.prompt_id, stored.image)
        if checkpoint:
            self.reader.checkpoint()
        self.reader.study.progress.advance(self.reader.stage, len(entries))


def stored_images(study: StudyRun) -> list[StoredImage]:
    """The run's images as readers take them, in set and index order, read from the run folder."""
    return [
        StoredImage(s.prompt_id, image, partial(_read_png, study, image))
        for s in study.record.prompt_sets
        for image in s.images
    ]


def _read_png(study: StudyRun, image: GeneratedImage) -> Image.Image:
    return decode_png((study.run_dir / image.file).read_bytes())


def usable(prompt_sets: Sequence[PromptSet]) -> list[tuple[str, GeneratedImage]]:
    return [(s.prompt_id, image) for s in prompt_sets for image in s.images if not image.flagged_nsfw]


# --------------------------------------------------------------------------- VQA


class AnswerReader(ImageReader):
    """Asks every axis question (``questions``: axis -> question) and the caption of every usable image.

    The backend gets a chunk of images at a time, encodes each once and asks all of their
    questions in one batch. ``on_answers`` gets the answers so far after every chunk (the
    study puts them into its record) and ``on_model`` the loaded backend (to record it).
    """

    stage = PERCEIVE
    description = "asking VQA questions"

    def __init__(
        self,
        study: StudyRun,
        chunk_size: int,
        questions: dict[str, str],
        caption_question: str | None,
        on_model: Callable[[VisualQuestionAnswerer], None],
        on_answers: Callable[[dict[str, list[ImageAnswers]]], None],
    ):
        super().__init__(study, chunk_size)
        self.questions = questions
        self.caption_question = caption_question
        asked = list(questions.values()) + ([caption_question] if caption_question else [])
        self.asked = list(dict.fromkeys(asked))  # two axes may share a question (race, ethnicity): ask it once
        self.on_model = on_model
        self.on_answers = on_answers
        self._fingerprint = ""
        self._known: dict[tuple[str, str], str] = {}
        self._finished: dict[str, dict[int, ImageAnswers]] = {}

    def recipe(self) -> ModelRecipe:
        config = self.study.record.config
        return ModelRecipe("vqa", config.vqa.spec, config.perception)

    def open(self, load: Callable[[ModelRecipe], Any] | None = None) -> bool:
        self.model = vqa = self._load(load)
        self._fingerprint = vqa.cache_fingerprint()
        self.on_model(vqa)
        return True

    def missing(self, image: GeneratedImage) -> bool:
        lacking = False
        for question in self.asked:
            hit = self.study.cache.get_json(PERCEIVE, self._fingerprint, {"image": image.sha256, "question": question})
            if hit is None:
                lacking = True
            else:
                self._known[image.sha256, question] = hit
        return lacking

    def task(self, images: list[GeneratedImage]) -> Any:
        """The questions some image of the chunk lacks an answer to, and the caption question."""
        asked = [q for q in self.asked if any((image.sha256, q) not in self._known for image in images)]
        return asked, self.caption_question

    @staticmethod
    def compute(model: VisualQuestionAnswerer, pictures: list[Image.Image], task: Any) -> Any:
        asked, caption_question = task
        return asked, model.answer(pictures, asked, caption_question)

    def store(self, images: list[GeneratedImage], result: Any) -> None:
        asked, replies = result
        for image, row in zip(images, replies, strict=True):
            for question, reply in zip(asked, row, strict=True):
                self._known[image.sha256, question] = reply
                self.study.cache.put_json(
                    PERCEIVE, self._fingerprint, {"image": image.sha256, "question": question}, reply
                )

    def complete(self, prompt_id: str, image: GeneratedImage) -> None:
        known = self._known
        self._finished.setdefault(prompt_id, {})[image.index] = ImageAnswers(
            image_index=image.index,
            answers={axis: known[image.sha256, q] for axis, q in self.questions.items()},
            caption=known[image.sha256, self.caption_question] if self.caption_question else None,
        )

    def checkpoint(self) -> None:
        self.on_answers(self.answers())

    def answers(self) -> dict[str, list[ImageAnswers]]:
        """Prompt id -> answers of its images in index order (every prompt set, even one without answers)."""
        order = [s.prompt_id for s in self.study.record.prompt_sets]
        for prompt_id in order:
            self._finished.setdefault(prompt_id, {})
        return {pid: [self._finished[pid][i] for i in sorted(self._finished[pid])] for pid in order}


# --------------------------------------------------------------------------- embeddings


class EmbedReader(ImageReader):
    """Unit-length image embeddings of every usable image (cached by image sha256).

    ``required=False``: an embedder that cannot be loaded is skipped with a notice (and
    dropped from the config) instead of failing the run. ``also`` is called with the
    loaded embedder before it is released (e.g. to embed prompt texts too).
    """

    stage = EMBED
    description = "embedding images"

    def __init__(
        self,
        study: StudyRun,
        chunk_size: int,
        required: bool = True,
        also: Callable[[Embedder], None] | None = None,
    ):
        super().__init__(study, chunk_size)
        self.required = required
        self.also = also
        self.skipped = False
        self.fingerprint = ""
        #: Image sha256 -> unit-length embedding, for every image read so far.
        self.by_image: dict[str, np.ndarray] = {}

    def recipe(self) -> ModelRecipe:
        return ModelRecipe("embedder", self.study.record.config.embedder.spec)

    def open(self, load: Callable[[ModelRecipe], Any] | None = None) -> bool:
        config = self.study.record.config
        try:
            self.model = embedder = self._load(load)
        except AuditorError as exc:
            if self.required:
                raise
            self.study.progress.notice(f"embedding scores skipped: {exc} (pass --embedder none to silence this)")
            config.embedder = None
            self.skipped = True
            return False
        config.embedder = embedder.ref.model_copy(update={"spec": config.embedder.spec})
        self.fingerprint = embedder.cache_fingerprint()
        return True

    def finish(self) -> None:
        if self.also is not None:
            self.also(self.model)

    def missing(self, image: GeneratedImage) -> bool:
        hit = self.study.cache.get(EMBED, self.fingerprint, {"image": image.sha256})
        if hit is None:
            return True
        self.by_image[image.sha256] = np.frombuffer(hit, dtype=np.float32)
        return False

    @staticmethod
    def compute(model: Embedder, pictures: list[Image.Image], task: Any) -> Any:
        return model.embed_images(pictures)

    def store(self, images: list[GeneratedImage], result: Any) -> None:
        for image, row in zip(images, result, strict=True):
            self.by_image[image.sha256] = np.asarray(row, dtype=np.float32)
            self.study.cache.put(EMBED, self.fingerprint, {"image": image.sha256}, self.by_image[image.sha256].tobytes())

    def complete(self, prompt_id: str, image: GeneratedImage) -> None:
        pass  # the vectors are gathered per prompt set once all are known

    def vectors(self) -> dict[str, np.ndarray] | None:
        """Prompt id -> (n_images, dim) array of unit-length embeddings of its usable images."""
        if self.skipped:
            return None
        by_set: dict[str, list[np.ndarray]] = {s.prompt_id: [] for s in self.study.record.prompt_sets}
        for prompt_id, image in usable(self.study.record.prompt_sets):
            by_set[prompt_id].append(self.by_image[image.sha256])
        return {pid: np.stack(rows) if rows else np.zeros((0, 0), np.float32) for pid, rows in by_set.items()}
