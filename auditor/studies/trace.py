"""Prompt-to-image tracing (``auditor trace``; Wu et al., J. Imaging 2025): where gender enters the image.

Triplets of prompts that differ only in the gender word (a neutral caption with "person"
or "people" and its woman/man swaps, or a profession sentence with "female"/"male" put
before the profession) are generated with shared seeds, and followed through the
pipeline:

1. **generate**: traced generation (:mod:`auditor.studies.tracing_stage`): the images,
   and in the same pipeline call the text encoder's output, z₀ and the cross-attention
   map of each noun of the prompt (and of its gender or profession word);
2. **perceive**: the VQA model lists each image's objects; their nouns (WordNet) are the
   image's vocabulary, human words apart;
3. **embed**: each image embedder (CLIP, DINOv2, any vision backbone) embeds every image;
4. **detect**: with ``--detector``, the vocabulary's nouns are looked for, with boxes;
5. **group**: the detected objects' regions (boxes, or SAM masks with ``--segmenter``)
   against the words' attention masks give the prompt-image dependency groups;
6. **score**: per triplet and seed, s(n,f) and s(n,m) at every stage; then the per-stage
   table, C(o, P), bias scores, χ² tests (Holm) and the groups' tables
   (:mod:`auditor.scoring.trace`), and pictures of a few triplets with the attention
   map of their gender word.

Steps 1 to 3 run on the run's executor (``--executor sequential``, or ``ray`` for Ray workers);
detection, grouping and scoring run in this process. Every model stage goes through the content cache, and the record is rewritten after each
step (and each generation batch), so an interrupted run resumes without recomputing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.core.cache import ContentCache
from auditor.core.devices import release_accelerator_memory
from auditor.core.environment import collect_environment
from auditor.core.errors import AuditorError
from auditor.core.registry import parse_spec
from auditor.core.store import RunStore, atomic_write_bytes
from auditor.executors.base import ModelRecipe
from auditor.executors.perception import EmbedReader
from auditor.records import (
    TRIPLET_SETS,
    GeneratedImage,
    ModelRef,
    TraceConfig,
    TraceRecord,
    TripletPicture,
)
from auditor.studies.progress import ProgressReporter
from auditor.studies.run import EMBED_BATCH_SIZE, Resumption, StudyRun, reopen_run, shown_sha256, spec_ref
from auditor.studies.trace_options import (
    DEFAULT_TRACE_EMBEDDERS,
    TraceOptions,
    check_trace_executor,
    check_trace_t2i,
    new_config,
    trace_registries,
)
from auditor.studies.trace_triplets import caption_triplets, profession_set, trace_triplet, traced_words
from auditor.studies.tracing_stage import PromptWords, TraceReader, TraceRequest

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


PICTURES_FOLDER = "pictures"
#: Within a stage the record is rewritten at most this often: a trace run's record is large, and every
#: finished image and answer is in the content cache at once anyway (an interrupted run saves it last).
CHECKPOINT_SECONDS = 10.0


# --------------------------------------------------------------------------- the study


class TraceEmbedReader(EmbedReader):
    """Image embeddings by one of the trace's several embedders (``--embedder`` may be given many times).

    The shared reader loads the config's single ``embedder``; this one loads ``spec`` and
    leaves the config to the study. An embedder that cannot be loaded is skipped with a
    note unless the user named the embedders.
    """

    def __init__(self, study: TraceStudy, spec: str, required: bool):
        super().__init__(study, EMBED_BATCH_SIZE, required=required)
        self.spec = spec
        self.ref: ModelRef | None = None

    def recipe(self) -> ModelRecipe:
        return ModelRecipe(self.kind, self.spec)

    def _skip(self, reason: str) -> None:
        self.study.note(f"image embedder {self.spec} skipped: {reason} (name the embedders with --embedder)")

    def _adopt(self, ref: ModelRef) -> None:
        self.ref = ref.model_copy(update={"spec": self.spec})


class TraceStudy(StudyRun[TraceRecord]):
    """One trace run in its folder: generate -> perceive -> embed -> detect -> group -> score."""

    def __init__(
        self,
        run_dir: Path,
        record: TraceRecord,
        cache: ContentCache,
        progress: ProgressReporter,
        device: str | None = None,
    ):
        from auditor.prompting.nouns import default_noun_reader

        super().__init__(run_dir, record, cache, progress, device)
        self.reader = default_noun_reader()
        #: The cache key of the traces, known once the generation stage loaded the pipeline.
        self.fingerprint: str | None = None
        #: Per image embedder: image sha256 -> unit embedding.
        self.vectors: list[dict[str, np.ndarray]] = []
        self.checkpoint_seconds = CHECKPOINT_SECONDS
        #: Notes on how this attempt was started (a resume that turned the embedders off), the first of its notes.
        self.opening_notes: list[str] = []

    @property
    def embedders_required(self) -> bool:
        """Embedders the user named must load; the defaults are skipped with a note when they cannot."""
        return [ref.spec for ref in self.record.config.image_embedders] != list(DEFAULT_TRACE_EMBEDDERS)

    def run(self) -> TraceRecord:
        """Run (or resume) every step; the record's status says how it ended."""
        self.record.notes = []
        for message in self.opening_notes:
            self.note(message)
        self.execute(
            [
                ("generate", self.generate_traced),
                ("perceive", self.perceive),
                ("embed", self.embed_images),
                ("detect", self.detect),
                ("group", self.group),
                ("score", self.score),
            ]
        )
        return self.record

    def clear_scores(self) -> None:
        record = self.record
        record.similarity, record.set_sizes, record.objects, record.humans = [], {}, [], []
        record.ranking, record.chi_square, record.groups = [], [], None

    def after_end(self) -> None:
        """Write ``report.html`` however the run ended."""
        from auditor.reporting.trace import write_trace_report

        self.write_page(write_trace_report)

    def note(self, message: str) -> None:
        self.record.notes = [*self.record.notes, message]
        self.progress.notice(message)

    def requests(self) -> list[TraceRequest]:
        """The prompt sets to generate, with the words to trace (as the generation step recorded them)."""
        return [
            TraceRequest(triplet.prompt_ids[name], triplet.prompts[name], tuple(triplet.traced_words[name]))
            for triplet in self.record.triplets
            for name in TRIPLET_SETS
        ]

    # ------------------------------------------------------------------ generate

    def generate_traced(self) -> None:
        from auditor.executors import make_executor
        from auditor.studies.tracing_stage import TracedGeneration

        generation = TracedGeneration(self, self._choose_words)
        make_executor(self.record.config.executor).run_batches(self, generation)
        self.record.prompt_sets = generation.prompt_sets()
        self.fingerprint = generation.fingerprint

    def _choose_words(self, prompt_words: PromptWords) -> list[TraceRequest]:
        """The words each prompt set traces (its nouns and subject word, as the model's tokenizer splits the
        prompt), recorded on the triplets; then the prompt sets to generate."""
        prompts = [triplet.prompts[name] for triplet in self.record.triplets for name in TRIPLET_SETS]
        words = iter(prompt_words(prompts))
        for triplet in self.record.triplets:
            triplet.traced_words = {
                name: list(traced_words(next(words), triplet.nouns[name], triplet.subject_words[name], self.reader))
                for name in TRIPLET_SETS
            }
        return self.requests()

    # ------------------------------------------------------------------ perceive

    def perceive(self) -> None:
        from auditor.executors import make_executor
        from auditor.executors.perception import AnswerReader
        from auditor.scoring.trace import image_objects

        def checkpoint(answers) -> None:
            self.record.answers = answers
            self.checkpoint()

        reader = AnswerReader(self, {"objects": self.record.config.object_question}, None, checkpoint)
        make_executor(self.record.config.executor).read_stored(self, [reader])
        self.record.answers = reader.answers()
        images = {}
        for prompt_id, rows in self.record.answers.items():
            images[prompt_id] = []
            for row in rows:
                vocabulary = self.reader.vocabulary(row.answers["objects"])
                images[prompt_id].append(image_objects(row.image_index, vocabulary.objects, vocabulary.humans))
        self.record.images = images

    # ------------------------------------------------------------------ embed

    def embed_images(self) -> None:
        """Every image embedder over the images; each reader's timing adds to the one "embed" timing."""
        from auditor.executors import make_executor

        config = self.record.config
        readers = [TraceEmbedReader(self, ref.spec, self.embedders_required) for ref in config.image_embedders]
        make_executor(config.executor).read_stored(self, readers)
        loaded = [reader for reader in readers if not reader.skipped]
        config.image_embedders = [reader.ref for reader in loaded]
        self.vectors = [reader.by_image for reader in loaded]

    # ------------------------------------------------------------------ detect and group

    def _located(self) -> Iterator[tuple[str, int, GeneratedImage]]:
        """(prompt id, position in ``record.images[prompt id]``, the generated image) of every image looked at."""
        made = {s.prompt_id: {image.index: image for image in s.images} for s in self.record.prompt_sets}
        for prompt_id, rows in self.record.images.items():
            for position, row in enumerate(rows):
                yield prompt_id, position, made[prompt_id][row.image_index]

    def detect(self) -> None:
        if self.record.config.detector is None:
            return
        from auditor.perception.registry import DETECTORS
        from auditor.scoring.trace import with_detections
        from auditor.studies.grounding_stage import GroundingItem, detect_objects

        config = self.record.config
        with self.stage("detect") as outcome:
            detector = DETECTORS.load(
                config.detector.spec,
                options=self.load_options(),
                box_threshold=config.box_threshold,
                text_threshold=config.text_threshold,
            )
            config.detector = detector.ref.model_copy(update={"spec": config.detector.spec})
            config.box_threshold = detector.box_threshold
            config.text_threshold = getattr(detector, "text_threshold", None)
            located = list(self._located())
            items = []
            for prompt_id, position, image in located:
                row = self.record.images[prompt_id][position]
                items.append(GroundingItem(image.sha256, image.file, (*row.objects, *row.humans)))
            found, counts = detect_objects(detector, items, self.cache, self.run_dir, self.progress)
            outcome.computed, outcome.cached = counts.computed, counts.cached
            images = {prompt_id: list(rows) for prompt_id, rows in self.record.images.items()}
            for prompt_id, position, image in located:
                detections = [(d.label, d.score, d.box) for d in found[image.sha256]]
                images[prompt_id][position] = with_detections(images[prompt_id][position], detections)
            self.record.images = images
            del detector
            release_accelerator_memory()

    def group(self) -> None:
        if self.record.config.detector is None:
            self.note("no dependency groups: they need the detector's boxes (--detector)")
            return
        from auditor.metrics.dependency_groups import box_mask

        config = self.record.config
        traces = TraceReader(self.cache, self._fingerprint())
        requests = {request.prompt_id: request for request in self.requests()}
        owner = {triplet.prompt_ids[name]: (triplet, name) for triplet in self.record.triplets for name in TRIPLET_SETS}
        images = {prompt_id: list(rows) for prompt_id, rows in self.record.images.items()}
        located = list(self._located())
        by_hash: dict[str, list[tuple[str, int, GeneratedImage]]] = {}
        for entry in located:
            by_hash.setdefault(entry[2].sha256, []).append(entry)

        def assign(prompt_id: str, position: int, image: GeneratedImage, masks: np.ndarray | None) -> None:
            from auditor.scoring.trace import with_groups

            triplet, name = owner[prompt_id]
            row = images[prompt_id][position]
            entry = traces.entry(requests[prompt_id], config.seeds[image.index])
            maps = [(word, entry.word_map(word)) for word in triplet.traced_words[name]]
            shape = maps[0][1].shape if maps else entry.image().size[::-1]
            regions = []
            for k, detection in enumerate(row.detections or []):
                box = box_mask(detection.box, shape)
                regions.append(masks[k] if masks is not None and masks[k].any() else box)
            human_nouns = [noun for noun in triplet.nouns[name] if self.reader.is_human(noun)]
            images[prompt_id][position] = with_groups(
                row, triplet.nouns[name], human_nouns, regions, maps, config.scoring
            )
            self.progress.advance("group")

        with self.stage("group") as outcome:
            self.progress.start("group", len(located), "dependency groups")
            try:
                if config.segmenter is None:
                    for prompt_id, position, image in located:
                        assign(prompt_id, position, image, None)
                    outcome.computed = len(located)
                else:
                    outcome.computed, outcome.cached = self._segment_and_assign(located, by_hash, images, assign)
            finally:
                self.progress.finish("group")
            self.record.images = images

    def _segment_and_assign(self, located, by_hash, images, assign) -> tuple[int, int]:
        """Segment the detections' boxes (through the cache) and group each image as its masks arrive."""
        from auditor.perception.registry import SEGMENTERS
        from auditor.studies.grounding_stage import segment_objects

        config = self.record.config
        segmenter = SEGMENTERS.load(config.segmenter.spec, options=self.load_options())
        config.segmenter = segmenter.ref.model_copy(update={"spec": config.segmenter.spec})
        items = {}
        for prompt_id, position, image in located:
            boxes = [tuple(d.box) for d in images[prompt_id][position].detections or []]
            if boxes:
                items[image.sha256] = (image.sha256, image.file, boxes)
            else:
                assign(prompt_id, position, image, None)

        def consume(sha: str, masks: np.ndarray) -> None:
            for prompt_id, position, image in by_hash[sha]:
                assign(prompt_id, position, image, masks)

        counts = segment_objects(segmenter, list(items.values()), self.cache, self.run_dir, self.progress, consume)
        del segmenter
        release_accelerator_memory()
        return counts.computed, counts.cached

    def _fingerprint(self) -> str:
        if self.fingerprint is None:
            raise AuditorError("the traces are read after the generation step, which has not run")
        return self.fingerprint

    # ------------------------------------------------------------------ score

    def score(self) -> None:
        import numpy as np

        from auditor.scoring.trace import TracedImage, pair_similarity, score_trace

        record, config = self.record, self.record.config
        traces = TraceReader(self.cache, self._fingerprint())
        requests = {request.prompt_id: request for request in self.requests()}
        made = {s.prompt_id: {image.index: image for image in s.images} for s in record.prompt_sets}
        looked = {pid: {row.image_index: row for row in rows} for pid, rows in record.images.items()}
        with self.stage("score") as outcome:
            pairs = []
            for triplet in record.triplets:
                for index, seed in enumerate(config.seeds):
                    images = {}
                    for name in TRIPLET_SETS:
                        prompt_id = triplet.prompt_ids[name]
                        image, entry = made[prompt_id][index], traces.entry(requests[prompt_id], seed)
                        usable = not image.flagged_nsfw
                        row = looked.get(prompt_id, {}).get(index)
                        images[name] = TracedImage(
                            eos=entry.eos,
                            mean=entry.mean,
                            latent=entry.latent,
                            pixels=np.asarray(entry.image()) if usable else None,
                            embeddings=[vectors.get(image.sha256) if usable else None for vectors in self.vectors],
                            counts=row.counts if row is not None else None,
                        )
                    pairs.append(pair_similarity(triplet.index, index, images))
            record.pairs = pairs
            score_trace(record)
            flagged = sum(image.flagged_nsfw for s in record.prompt_sets for image in s.images)
            if flagged:
                self.note(f"{flagged} images were blacked out by the safety checker: left out of the image stages")
            record.pictures = self.draw_pictures(traces, requests)
            outcome.computed = len(record.triplets)

    def draw_pictures(self, traces: TraceReader, requests: dict[str, TraceRequest]) -> list[TripletPicture]:
        """The first ``show`` triplets (first seed) side by side, with their subject word's attention map."""
        from auditor.executors.generation import png_bytes
        from auditor.reporting.overlays import triplet_picture

        seed = self.record.config.seeds[0]
        pictures = []
        for triplet in self.record.triplets[: self.record.config.show]:
            entries = [traces.entry(requests[triplet.prompt_ids[name]], seed) for name in TRIPLET_SETS]
            words = {name: triplet.subject_words[name] for name in TRIPLET_SETS}
            words = {name: word if word in triplet.traced_words[name] else None for name, word in words.items()}
            maps = [entry.word_map(words[name]) if words[name] else None for name, entry in zip(TRIPLET_SETS, entries)]
            picture = triplet_picture([entry.image() for entry in entries], maps)
            file = f"{PICTURES_FOLDER}/triplet-{triplet.index:04d}.png"
            atomic_write_bytes(self.run_dir / file, png_bytes(picture))
            pictures.append(TripletPicture(triplet=triplet.index, image_index=0, file=file, words=words))
        return pictures


# --------------------------------------------------------------------------- starting and resuming


def start_trace(
    options: TraceOptions, store: RunStore, cache: ContentCache, progress: ProgressReporter, run_name: str | None = None
) -> TraceStudy:
    """Check the options, build the triplets, create the run folder and write the first record."""
    from auditor.prompting.nouns import default_noun_reader

    options.validate()
    config = new_config(options)
    reader = default_noun_reader()
    selection = None
    if options.professions:
        found = [(triplet, None, None) for triplet in profession_set()]
    else:
        def digest(path: Path) -> str:
            return cache.file_digest(path, partial(shown_sha256, progress=progress))

        found, selection = caption_triplets(options.captions, options.caption_column, digest)
    found = found[: options.limit] if options.limit else found
    triplets = [trace_triplet(i, triplet, reader, file, row) for i, (triplet, file, row) in enumerate(found)]
    source = "professions" if options.professions else Path(options.captions).stem
    run_dir = store.create_run(run_name, f"trace {source}")
    record = TraceRecord(
        run_id=run_dir.name, config=config, selection=selection, triplets=triplets, environment=collect_environment()
    )
    study = TraceStudy(run_dir, record, cache, progress, options.device)
    study.save()
    return study


def resume_trace(
    run: str,
    store: RunStore,
    cache: ContentCache,
    progress: ProgressReporter,
    resumption: Resumption = Resumption(),
    embedders: list[str] | None = None,
) -> TraceStudy:
    """Reopen a trace run with its own settings; finished work comes from the cache.

    ``resumption`` may move the run to another executor (where the stages run changes no number) and say where its
    models are now: the text-to-image pipeline, the VQA model, the detector and segmenter it has (each of the same
    kind), and with ``embedders`` its image embedders (as many as it has, in its order; none turns them off). Other
    weights are recorded with their fingerprints, and the cache keys on them.
    """
    run_dir, record = reopen_run(run, store, TraceRecord)
    config = record.config
    point_trace_models(config, resumption.models)
    resumption.apply(config, trace_registries(), executors=check_trace_executor)
    dropped = []
    if embedders is not None:
        dropped = [ref.spec for ref in config.image_embedders] if not embedders else []
        config.image_embedders = resumed_embedders(config.image_embedders, embedders)
    study = TraceStudy(run_dir, record, cache, progress, resumption.device)
    if dropped:  # the stages' family shrinks: their adjusted p-values change, which the record must say
        study.opening_notes.append(
            f"--embedder none on --resume turned off the image embedders {', '.join(dropped)}: their stages are not "
            "scored, and the other stages' swap p-values are adjusted over the stages left"
        )
    return study


def point_trace_models(config: TraceConfig, models: Mapping[str, str]) -> None:
    """Check where a resume says the trace's models are now, before anything is loaded: a diffusers pipeline, and a
    detector or segmenter only where the run has one, of the same kind (their thresholds are that kind's)."""
    if "t2i" in models:
        check_trace_t2i(models["t2i"])
    for name in ("detector", "segmenter"):
        if name not in models:
            continue
        had: ModelRef | None = getattr(config, name)
        if had is None:
            raise AuditorError(f"this run has no {name}: --{name} on --resume says where the run's {name} is now")
        if parse_spec(models[name]).prefix != parse_spec(had.spec).prefix:
            raise AuditorError(
                f"--{name} {models[name]} is another kind of {name} than the run's {had.spec}; start a new run for it"
            )


def resumed_embedders(current: list[ModelRef], given: list[str]) -> list[ModelRef]:
    """The image embedders a resume names: where each of the run's is now, in its order; none turns them off."""
    from auditor.perception.registry import EMBEDDERS

    if not given:
        return []
    if len(given) != len(current):
        had = ", ".join(ref.spec for ref in current) or "none"
        raise AuditorError(
            f"--embedder on --resume says where the run's {len(current)} image embedders are now ({had}): "
            f"give {len(current)} in that order, or --embedder none"
        )
    for spec in given:
        EMBEDDERS.preflight(spec)
    return [spec_ref(spec) for spec in given]
