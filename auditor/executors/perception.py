"""The stages that read generated images: VQA answers and image embeddings, through the cache.

Answers are cached per (VQA fingerprint, image sha256, question) and embeddings per
(embedder fingerprint, image sha256), so a rerun with a new axis asks only the new
question, and an image that appears in two runs is looked at once. Images the safety
checker blacked out are skipped: they carry no concepts.

Both stages are :class:`ImageReader` s: they take images one at a time, in prompt-set and
index order, through a :class:`Feed` that looks each image up (in what the reader has
computed, then in the cache; the VQA stage then in the answers an earlier attempt recorded
about the same bytes with the same model, for a run whose cache is gone) and groups the
ones still to compute into chunks. Every executor feeds them the same images in the
same order, so the chunks, and with them every answer and embedding, are the same
whether the reader runs after generation or alongside it. The model runs in the
executor's thread; cache writes, record updates and progress go to the run's writer.
A hosted VQA model, paid per request, is asked only what each image lacks, and what a
failed or stopped chunk got before it ended is cached all the same (:meth:`ImageReader.salvage`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from auditor.core.cache import json_bytes
from auditor.core.errors import AuditorError
from auditor.core.redaction import redact
from auditor.core.weights import computes_alike
from auditor.executors.base import ModelRecipe
from auditor.executors.generation import StoredImage
from auditor.executors.recall import RecalledModel, check_recalled, load_remembering, recall
from auditor.perception.base import answered_before
from auditor.records import GeneratedImage, ImageAnswers, ModelRef, PerceptionSettings, PromptSet, Stage
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
#: The fewest images a VQA call gets: each call ends in a checkpoint of the record.
MIN_IMAGES_PER_VQA_CALL = 8


class ImageReader(ABC):
    """A stage that reads every usable image of a run: load a model, look up, compute, store."""

    stage: ClassVar[Stage]
    description: ClassVar[str]
    #: The registry its model comes from, and its kind in the study's model pool.
    kind: ClassVar[Literal["vqa", "embedder"]]

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
        """Record the model: loaded (here, or wherever ``load`` loads a recipe), or as remembered until a result is
        missing (:meth:`_load`); False when the stage is to be skipped."""

    def close(self) -> None:
        """Done with the model: the study's pool releases it unless the study keeps its models."""
        self.model = None
        self.study.models.done(self.kind)

    def _load(self, load: Callable[[ModelRecipe], Any] | None) -> Any:
        """The model to record: with ``load`` (the Ray executor's workers) as it loads the recipe; in this process
        as an earlier load described it when that was remembered (:mod:`auditor.executors.recall`; the model
        itself is loaded by :meth:`loaded` once a result is missing), else from the study's pool."""
        recipe = self.recipe()
        if load is not None:
            return load(recipe)
        return (recall(self.study, recipe) if self.may_recall else None) or self._from_pool(recipe)

    @property
    def may_recall(self) -> bool:
        """Whether :meth:`_load` may record a remembered description and load later: not where a model that fails
        to load is skipped, since only loading it tells."""
        return True

    def loaded(self) -> Any:
        """The model to compute with: loaded now if only its remembered description was at hand."""
        if isinstance(self.model, RecalledModel):
            loaded = self._from_pool(self.recipe())
            check_recalled(self.model, loaded)
            self.model = loaded
        return self.model

    def _from_pool(self, recipe: ModelRecipe) -> Any:
        """The model loaded in this process, from the study's pool (loaded and remembered the first time)."""
        load = partial(load_remembering, self.study, recipe, partial(recipe.load, self.study.load_options()))
        return self.study.models.get(self.kind, recipe.spec, load)

    @abstractmethod
    def missing(self, prompt_id: str, image: GeneratedImage) -> bool:
        """Look-ups for an image of a prompt set: True when it needs something that is neither known
        (cached, computed, or recorded by an earlier attempt) nor to be computed for an image with the same bytes
        already.

        Runs where chunks are cut, in feed order: the answer depends on the images fed before,
        never on how far the computing (on Ray workers, say) or the writer has got.
        """

    def task(self, images: list[GeneratedImage]) -> Any:
        """What the model is to compute for a chunk of these images, besides reading them (picklable):
        what :meth:`missing` found them to need, not given to an earlier chunk. Taken once per chunk."""
        return None

    @staticmethod
    @abstractmethod
    def compute(model: Any, pictures: list[Image.Image], task: Any) -> Any:
        """The model's results for one chunk's pictures (in the executor's compute thread, or on a worker)."""

    @abstractmethod
    def keep(self, images: list[GeneratedImage], result: Any) -> None:
        """Keep one computed chunk's results in memory, where :meth:`missing` and :meth:`complete` see them
        (runs where the results arrive: the compute thread, or the Ray driver)."""

    @abstractmethod
    def store(self, images: list[GeneratedImage], result: Any) -> None:
        """Cache one chunk's results (runs in the writer)."""

    @abstractmethod
    def complete(self, prompt_id: str, image: GeneratedImage) -> None:
        """Every result for this image is known: note it for its prompt set (runs in the writer)."""

    def salvage(self, images: list[GeneratedImage], task: Any, stopped_by: BaseException) -> None:
        """Cache what a chunk's computing got before ``stopped_by`` (a failure, Ctrl-C) ended it, where the model
        says (:func:`~auditor.perception.base.answered_before`); most models keep nothing of a cut call."""

    def checkpoint(self) -> None:
        """Write what is known so far into the record (runs in the writer, after each chunk)."""

    def finish(self) -> None:
        """Every image is read and stored; the model is still loaded (e.g. to embed texts too)."""


@dataclass(frozen=True)
class Chunk:
    """Images a reader computes together (distinct contents, in feed order), what it asks of them,
    and every image completed once its result is stored (those and any with the same bytes)."""

    stored: list[StoredImage]
    task: Any
    waiting: list[StoredImage]

    @property
    def images(self) -> list[GeneratedImage]:
        return [stored.image for stored in self.stored]


class Feed:
    """Takes a reader's images in order, finds what is missing, and cuts the rest into chunks.

    Two images with the same bytes are computed once; the second is completed when the
    first one's chunk is stored, or goes into a later chunk for what only it needs (e.g.
    another set's question). ``counts.cached`` counts the images whose results were all in
    the cache, ``counts.computed`` the images computed.

    Without ``dispatch`` each chunk is computed here, in the calling thread, as soon as it
    is full (the in-process executors). With it, each chunk is handed to ``dispatch`` and
    its result comes back through :meth:`store` once computed elsewhere, in chunk order,
    after every image has been added (the Ray executor). What goes into which chunk depends
    only on the images fed and the cache, so the chunks are the same either way.
    """

    def __init__(self, reader: ImageReader, writer: BackgroundWriter, dispatch: Callable[[Chunk], None] | None = None):
        self.reader = reader
        self.writer = writer
        self._dispatch = dispatch
        self._computed: set[str] = set()  # sha256 of the images computed in this run
        self._gathering: dict[str, list[StoredImage]] = {}  # sha256 in the chunk gathered now -> its images
        self._dispatched: dict[str, Chunk] = {}  # sha256 -> the last chunk with it that is not stored yet

    def start(self, total: int) -> None:
        self.reader.study.progress.start(self.reader.stage, total, self.reader.description)

    def add(self, stored: StoredImage) -> None:
        reader, image = self.reader, stored.image
        if image.flagged_nsfw:
            self.writer.submit(partial(reader.study.progress.advance, reader.stage), reader.stage)
            return
        sha = image.sha256
        lacking = reader.missing(stored.prompt_id, image)  # also notes what this image needs
        if sha in self._gathering:  # its bytes are in the chunk gathered now, whose task covers it
            self._gathering[sha].append(stored)
        elif lacking:
            self._gathering[sha] = [stored]
        elif sha in self._dispatched:  # what it needs is computed elsewhere, in a chunk not stored yet
            self._dispatched[sha].waiting.append(stored)
        else:
            if sha not in self._computed:
                reader.counts.cached += 1
            self.writer.submit(partial(self._complete, [stored]), reader.stage)
        if len(self._gathering) >= reader.chunk_size:
            self.flush()

    def flush(self) -> None:
        """Cut the chunk gathered so far (the last one may be short) and compute or dispatch it."""
        if not self._gathering:
            return
        gathered, self._gathering = list(self._gathering.values()), {}
        stored = [entries[0] for entries in gathered]
        chunk = Chunk(stored, self.reader.task([entry.image for entry in stored]), [e for es in gathered for e in es])
        if self._dispatch is not None:
            self._dispatched.update((entry.image.sha256, chunk) for entry in stored)
            self._dispatch(chunk)
            return
        with ThreadPoolExecutor(max_workers=min(DECODE_THREADS, len(stored))) as pool:
            pictures = list(pool.map(lambda entry: entry.picture(), stored))
        try:
            result = self.reader.compute(self.reader.loaded(), pictures, chunk.task)
        except BaseException as exc:
            self.reader.salvage(chunk.images, chunk.task, exc)
            raise
        self.store(chunk, result)

    def store(self, chunk: Chunk, result: Any) -> None:
        """Keep a computed chunk's result and hand it to the writer, with every image waiting for it.

        Chunks are stored in the order they were cut: an image waiting for one may need what an
        earlier one computed.
        """
        images = chunk.images
        self.reader.keep(images, result)
        for image in images:
            if self._dispatched.get(image.sha256) is chunk:
                del self._dispatched[image.sha256]
        self._computed.update(image.sha256 for image in images)
        self.reader.counts.computed += len(images)
        done = chunk.waiting

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


def usable(prompt_sets: Sequence[PromptSet]) -> list[tuple[str, GeneratedImage]]:
    return [(s.prompt_id, image) for s in prompt_sets for image in s.images if not image.flagged_nsfw]


# --------------------------------------------------------------------------- VQA


def images_per_vqa_call(batch_size: int) -> int:
    """Images a VQA call gets: as many as a batch has rows (``--vqa-batch-size``), at least
    :data:`MIN_IMAGES_PER_VQA_CALL`. Each question is asked of every image of the call, so every
    question's rows, the caption's among them, fill whole batches; fewer images would leave the
    caption's batch (one row per image) part empty, and a larger batch size would change nothing."""
    return max(MIN_IMAGES_PER_VQA_CALL, batch_size)


class AnswerReader(ImageReader):
    """Asks every axis question (``questions``: axis -> question) and the caption of every usable image.

    The backend gets a chunk of images at a time, encodes each once and asks the questions
    any of them still lacks in one batch. ``on_answers`` gets the answers so far after every
    chunk (the study puts them into its record, each row with the sha256 of the bytes it is
    about). An answer the cache lacks is taken from that record when an earlier attempt gave it
    about the same bytes with the same weights (a run moved, or its cache cleared); the cache gets
    it back once the stage ends. A study whose images need different
    questions overrides :meth:`questions_for`; the chunk's :meth:`task` carries the questions to
    wherever the model runs. The VQA model that answers is recorded in the run's config.
    """

    stage = PERCEIVE
    description = "asking VQA questions"
    kind = "vqa"

    def __init__(
        self,
        study: StudyRun,
        questions: dict[str, str],
        caption_question: str | None,
        on_answers: Callable[[dict[str, list[ImageAnswers]]], None],
    ):
        super().__init__(study, images_per_vqa_call(study.record.config.perception.batch_size))
        self.questions = questions
        self.caption_question = caption_question
        self.on_answers = on_answers
        self._fingerprint = ""
        self._known: dict[tuple[str, str], str] = {}
        self._needs: dict[str, list[str]] = {}  # sha256 -> the questions its images are asked (looked up once)
        self._asked: set[tuple[str, str]] = set()  # (sha256, question) a chunk asks (computed or not yet)
        self._finished: dict[str, dict[int, ImageAnswers]] = {}
        # What an earlier attempt recorded, and the model it came from (open() sets the run's model over it).
        self._earlier = {
            (prompt_id, row.image_index): row for prompt_id, rows in getattr(study.record, "answers", {}).items()
            for row in rows
        }  # fmt: skip
        self._earlier_from = study.record.results_from.get("vqa")
        self._restored: list[tuple[dict[str, Any], bytes]] = []  # answers taken from the record, for the cache
        self._per_pair = False  # whether the model is hosted: asked only the pairs each image lacks (open() says)

    def recipe(self) -> ModelRecipe:
        config = self.study.record.config
        return ModelRecipe(self.kind, config.vqa.spec, config.perception)

    def questions_for(self, prompt_id: str, index: int) -> dict[str, str]:
        """The axis questions (axis -> question) image ``index`` of prompt set ``prompt_id`` is asked."""
        return self.questions

    def open(self, load: Callable[[ModelRecipe], Any] | None = None) -> bool:
        config = self.study.record.config
        self.model = vqa = self._load(load)
        self.study.adopt_model("vqa", vqa.ref)
        config.perception = vqa.settings  # what it answers with, its defaults filled in
        self._fingerprint = vqa.cache_fingerprint()
        self._per_pair = vqa.ref.service is not None
        if not computes_alike(self._earlier_from, vqa.ref):
            self._earlier = {}
        say_unused_concurrency(self.study, vqa.ref)
        return True

    def _key(self, sha: str, question: str) -> dict[str, Any]:
        """The cache inputs of one answer: the caption question is asked with the caption's template
        and token budget, so its answer is not the short answer to the same words."""
        return {"image": sha, "question": question, **({"caption": True} if question == self.caption_question else {})}

    def missing(self, prompt_id: str, image: GeneratedImage) -> bool:
        sha = image.sha256
        needs = self._needs.setdefault(sha, [])
        asked = [*self.questions_for(prompt_id, image.index).values(), *filter(None, [self.caption_question])]
        lacking = False
        for question in asked:
            if question in needs:  # two axes may share a question (race, ethnicity): ask it once
                continue
            needs.append(question)
            if (sha, question) in self._asked:  # a chunk asks it already (the union of its images' questions)
                continue
            key = self._key(sha, question)
            hit = self.study.cache.get_json(PERCEIVE, self._fingerprint, key)
            if hit is None and (hit := self._recorded(prompt_id, image, question)) is not None:
                self._restored.append((key, json_bytes(hit)))
            if hit is None:
                lacking = True
            else:
                self._known[sha, question] = hit
        return lacking

    def _recorded(self, prompt_id: str, image: GeneratedImage, question: str) -> str | None:
        """The answer to ``question`` an earlier attempt recorded for this image (the same bytes) with the same model,
        when the cache lacks it (the run was moved, or the cache cleared)."""
        row = self._earlier.get((prompt_id, image.index))
        if row is None or row.image_sha256 != image.sha256:  # answers about other bytes (made again), or unknown ones
            return None
        if question == self.caption_question:
            return row.caption
        asked = self.questions_for(prompt_id, image.index)
        return next((row.answers[axis] for axis in row.answers if asked.get(axis) == question), None)

    def task(self, images: list[GeneratedImage]) -> Any:
        """The questions some image of the chunk lacks and no earlier chunk asks, the caption question, and for a
        hosted model, which answers each pair as a paid request, the indexes of those each image lacks (None for a
        local one, which asks every image all of them in one batch each: :meth:`VisualQuestionAnswerer.answer`)."""
        lacking = {
            image.sha256: [
                question
                for question in self._needs[image.sha256]
                if (image.sha256, question) not in self._known and (image.sha256, question) not in self._asked
            ]
            for image in images
        }
        asked = list(dict.fromkeys(question for questions in lacking.values() for question in questions))
        if not self._per_pair:  # every image is asked every question, and known to be: no later chunk asks again
            self._asked.update((image.sha256, question) for image in images for question in asked)
            return asked, self.caption_question, None
        self._asked.update((sha, question) for sha, questions in lacking.items() for question in questions)
        wanted = [[asked.index(question) for question in lacking[image.sha256]] for image in images]
        return asked, self.caption_question, wanted

    @staticmethod
    def compute(model: VisualQuestionAnswerer, pictures: list[Image.Image], task: Any) -> Any:
        asked, caption_question, wanted = task
        return asked, model.answer(pictures, asked, caption_question, wanted)

    @staticmethod
    def _answered(images: list[GeneratedImage], result: Any) -> Iterator[tuple[str, str, str]]:
        """(image sha256, question, answer) of every pair a chunk's result answers."""
        asked, replies = result
        for image, row in zip(images, replies, strict=True):
            for question, reply in zip(asked, row, strict=True):
                if reply is not None:  # a question this image did not need, which the model was not asked
                    yield image.sha256, question, reply

    def keep(self, images: list[GeneratedImage], result: Any) -> None:
        for sha, question, reply in self._answered(images, result):
            self._known[sha, question] = reply

    def store(self, images: list[GeneratedImage], result: Any) -> None:
        answered = self._answered(images, result)
        entries = [(self._key(sha, question), json_bytes(reply)) for sha, question, reply in answered]
        self.study.cache.put_many(PERCEIVE, self._fingerprint, entries)

    def salvage(self, images: list[GeneratedImage], task: Any, stopped_by: BaseException) -> None:
        """The answers an API model got before the failure or Ctrl-C that cut the chunk go into the cache: each was
        a paid request, which a resumed run then does not send again."""
        asked = task[0]
        entries = [
            (self._key(images[image].sha256, asked[question]), json_bytes(reply))
            for (image, question), reply in answered_before(stopped_by).items()
        ]
        if entries:
            with suppress(AuditorError):  # a cache that fails now costs those requests again, not the real error
                self.study.cache.put_many(PERCEIVE, self._fingerprint, entries)

    def complete(self, prompt_id: str, image: GeneratedImage) -> None:
        known = self._known
        self._finished.setdefault(prompt_id, {})[image.index] = ImageAnswers(
            image_index=image.index,
            answers={axis: known[image.sha256, q] for axis, q in self.questions_for(prompt_id, image.index).items()},
            caption=known[image.sha256, self.caption_question] if self.caption_question else None,
            image_sha256=image.sha256,
        )

    def checkpoint(self) -> None:
        self.on_answers(self.answers())

    def finish(self) -> None:
        """The answers taken from the record go back into the cache, as if asked here."""
        if self._restored:
            self.study.cache.put_many(PERCEIVE, self._fingerprint, self._restored)
            self._restored = []

    def answers(self) -> dict[str, list[ImageAnswers]]:
        """Prompt id -> answers of its images in index order (every prompt set, even one without answers)."""
        order = [s.prompt_id for s in self.study.record.prompt_sets]
        for prompt_id in order:
            self._finished.setdefault(prompt_id, {})
        return {pid: [self._finished[pid][i] for i in sorted(self._finished[pid])] for pid in order}


def say_unused_concurrency(study: StudyRun, vqa: ModelRef) -> None:
    """A notice when the run asks for more (or fewer) requests in flight than the default from a VQA model that
    answers on this machine: only a hosted model (openai:) takes requests, a local one answers a batch at a time."""
    concurrency = study.record.config.perception.concurrency
    if vqa.service is None and concurrency != PerceptionSettings.model_fields["concurrency"].default:
        study.notice_once(
            f"--vqa-concurrency {concurrency} is not used: {vqa.spec} answers on this machine, "
            "--vqa-batch-size pairs at a time"
        )


def merge_answers(
    earlier: dict[str, list[ImageAnswers]], newer: dict[str, list[ImageAnswers]]
) -> dict[str, list[ImageAnswers]]:
    """Answers of both, per prompt id and image index: an image asked in both gets the union of its answers."""
    merged = {prompt_id: {image.image_index: image for image in images} for prompt_id, images in earlier.items()}
    for prompt_id, images in newer.items():
        by_index = merged.setdefault(prompt_id, {})
        for image in images:
            old = by_index.get(image.image_index)
            if old is not None:
                image = image.model_copy(
                    update={"answers": old.answers | image.answers, "caption": image.caption or old.caption}
                )
            by_index[image.image_index] = image
    return {prompt_id: [by_index[i] for i in sorted(by_index)] for prompt_id, by_index in merged.items()}


# --------------------------------------------------------------------------- embeddings


class EmbedReader(ImageReader):
    """Unit-length image embeddings of every usable image (cached by image sha256).

    ``required=False``: an embedder that cannot be loaded is skipped with a notice (and
    dropped from the config) instead of failing the run; :attr:`skip_reason` says why, and
    ``on_skip`` is told it at once, so a record saved before the stage ends keeps it.
    ``also`` is called with the loaded embedder before it is released (e.g. to embed prompt
    texts too).
    """

    stage = EMBED
    description = "embedding images"
    kind = "embedder"

    def __init__(
        self,
        study: StudyRun,
        chunk_size: int,
        required: bool = True,
        also: Callable[[Embedder], None] | None = None,
        on_skip: Callable[[str], None] | None = None,
    ):
        super().__init__(study, chunk_size)
        self.required = required
        self.also = also
        self.on_skip = on_skip
        #: Why the optional embedder was skipped (its load error), or None when it was not.
        self.skip_reason: str | None = None
        self.fingerprint = ""
        #: Image sha256 -> unit-length embedding, for every image read so far.
        self.by_image: dict[str, np.ndarray] = {}
        self._looked: set[str] = set()  # sha256 looked up in the cache

    def recipe(self) -> ModelRecipe:
        return ModelRecipe(self.kind, self.study.record.config.embedder.spec)

    @property
    def may_recall(self) -> bool:
        return self.required

    def open(self, load: Callable[[ModelRecipe], Any] | None = None) -> bool:
        try:
            self.model = embedder = self._load(load)
        except AuditorError as exc:
            if self.required:
                raise
            self.skip_reason = redact(str(exc))  # an error's text: a credential in it is blanked before it is kept
            self._skip(self.skip_reason)
            return False
        self._adopt(embedder.ref)
        self.fingerprint = embedder.cache_fingerprint()
        return True

    def _skip(self, reason: str) -> None:
        """Drop the optional embedder from the config, tell the study why (kept before it is said: a Ctrl-C then
        cannot come between), then the user."""
        self.study.record.config.embedder = None
        if self.on_skip is not None:
            self.on_skip(reason)
        self.study.progress.notice(f"embedding scores skipped: {reason} (pass --embedder none to silence this)")

    def _adopt(self, ref: ModelRef) -> None:
        """Record what was loaded for the config's ``embedder``, under the spec the user gave."""
        config = self.study.record.config
        config.embedder = ref.model_copy(update={"spec": config.embedder.spec})

    @property
    def skipped(self) -> bool:
        return self.skip_reason is not None

    def finish(self) -> None:
        if self.also is not None:
            self.also(self.loaded())

    def missing(self, prompt_id: str, image: GeneratedImage) -> bool:
        sha = image.sha256
        if sha in self._looked:  # found in the cache before, or in a chunk already
            return False
        self._looked.add(sha)
        hit = self.study.cache.get(EMBED, self.fingerprint, {"image": sha})
        if hit is None:
            return True
        self.by_image[sha] = np.frombuffer(hit, dtype=np.float32)
        return False

    @staticmethod
    def compute(model: Embedder, pictures: list[Image.Image], task: Any) -> Any:
        return model.embed_images(pictures)

    def keep(self, images: list[GeneratedImage], result: Any) -> None:
        for image, row in zip(images, result, strict=True):
            self.by_image[image.sha256] = np.asarray(row, dtype=np.float32)

    def store(self, images: list[GeneratedImage], result: Any) -> None:
        entries = [({"image": image.sha256}, self.by_image[image.sha256].tobytes()) for image in images]
        self.study.cache.put_many(EMBED, self.fingerprint, entries)

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
