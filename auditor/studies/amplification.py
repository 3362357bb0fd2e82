"""The bias-amplification study (Seshadri, Singh and Elazar, 2023): select -> generate -> faces -> classify -> score.

- **select**: one streamed pass over the training sample picks each occupation's captions
  per method (:mod:`auditor.studies.caption_selection`, cached by the files' contents);
  the selected examples' image files are resolved and hashed
  (:mod:`auditor.studies.amplification_training`);
- **generate**: ``--images`` images per occupation and template through the shared
  generation stage (same backends, cache and paired seeds as every study;
  :mod:`auditor.studies.amplification_generated`);
- **faces**: the one-face filter on every generated image and every selected training
  image (:mod:`auditor.studies.face_stage`, cached per detector and image);
- **classify**: CLIP zero-shot man / woman on the kept images, thresholded (embeddings
  cached per image, so a rerun classifies without running CLIP);
- **score**: G, T and A per occupation with their intervals and the summaries
  (:mod:`auditor.scoring.amplification`), and the examples file.

The record is rewritten after every stage, so Ctrl-C or a crash leaves a valid record
saying where it stopped, and ``--resume`` recomputes nothing that was finished.
The options and config are :mod:`auditor.studies.amplification_options`; this module is the
run: its stages in order, the face and gender verdicts both sides share, and start/resume.
What is particular to one side is in :mod:`auditor.studies.amplification_generated` (G) and
:mod:`auditor.studies.amplification_training` (T).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np

from auditor.core.cache import ContentCache
from auditor.core.devices import release_accelerator_memory
from auditor.core.environment import collect_environment
from auditor.core.store import RunStore
from auditor.corpora.readers import BATCH_ROWS
from auditor.corpora.selection import Selection
from auditor.perception.faces import FaceBox, FaceVerdict, face_filter
from auditor.perception.zero_shot import classify, decide
from auditor.records import AmplificationRecord, StageTiming, TrainingData
from auditor.scoring.amplification import amplification_rows, summaries
from auditor.studies.amplification_generated import generated_sides, generation_requests
from auditor.studies.amplification_options import (
    CLASSIFIER_NEEDS_CLIP,
    AmplificationOptions,
    check_text_embedder,
    selection_request,
)
from auditor.studies.amplification_training import (
    EXAMPLES_FILE,
    NoImage,
    check_same_sample,
    resolve_training_images,
    training_sides,
    training_warnings,
    write_examples,
)
from auditor.studies.caption_selection import EMBED_CAPTIONS, select_training_captions
from auditor.studies.face_stage import ImageFile, detect_faces, embed_image_files, embed_texts_cached
from auditor.studies.progress import ProgressReporter, StageCounts
from auditor.studies.run import EMBED_BATCH_SIZE, Resumption, StudyRun, reopen_run


class AmplificationRun(StudyRun[AmplificationRecord]):
    """One bias-amplification run in its folder: select -> generate -> faces -> classify -> score."""

    reads_wordnet = False  # captions are labelled by their gender words, not through WordNet

    def __init__(
        self,
        run_dir: Path,
        record: AmplificationRecord,
        cache: ContentCache,
        progress: ProgressReporter,
        device: str | None = None,
        batch_rows: int = BATCH_ROWS,
    ):
        super().__init__(run_dir, record, cache, progress, device)
        self.batch_rows = batch_rows
        self.selections: list[Selection] = []
        #: (caption file, image column value) -> the image file, or why there is none.
        self.training_images: dict[tuple[str, str | None], ImageFile | NoImage] = {}
        #: image sha256 -> faces found (absent: the file could not be read).
        self.boxes: dict[str, list[FaceBox]] = {}
        #: image sha256 -> CLIP's P(woman), for kept images.
        self.p_woman: dict[str, float] = {}

    def run(self) -> AmplificationRecord:
        """Run (or resume) every stage; the record's status says how it ended."""
        self.execute(
            [
                ("select", self.select),
                ("generate", lambda: self.run_images(generation_requests(self.record.config))),
                ("faces", self.faces),
                ("classify", self.classify),
                ("score", self.score),
            ]
        )
        return self.record

    def clear_scores(self) -> None:
        self.record.generated, self.record.training, self.record.amplification = [], [], []
        self.record.summary, self.record.warnings = [], []

    def after_end(self) -> None:
        """Write ``report.html`` however the run ended."""
        from auditor.reporting.amplification import write_amplification_html

        self.write_page(write_amplification_html)

    def select(self) -> None:
        config = self.record.config
        request = selection_request(config, self.batch_rows)
        with self.stage("select") as outcome:
            result = select_training_captions(
                request,
                self.cache,
                self.progress,
                text_embedder=config.text_embedder.spec if config.text_embedder else "minilm",
                load_options=self.load_options(),
                digest=self._hash_weights,
            )
            outcome.computed, outcome.cached = result.selected.computed, result.selected.cached
            check_same_sample(self.record, result.files)
            self.selections = result.selections
            self.record.training_data = TrainingData(
                files=result.files, rows=result.rows, skipped=result.skipped, labels=result.labels,
                examples_file=EXAMPLES_FILE,
            )  # fmt: skip
            if result.text_embedder is not None:
                config.text_embedder = result.text_embedder
                self._timing(EMBED_CAPTIONS, result.embed_seconds, result.embedded)
            if config.image_column is not None:
                self.training_images = resolve_training_images(self.selections, self.cache, self.progress)
        release_accelerator_memory()

    def _timing(self, stage: Literal["embed_captions"], seconds: float, counts: StageCounts) -> None:
        timing = StageTiming(stage=stage, seconds=seconds, computed=counts.computed, cached=counts.cached)
        self.record.timings = [t for t in self.record.timings if t.stage != stage] + [timing]

    def _generated_files(self) -> list[ImageFile]:
        return [
            ImageFile(image.sha256, self.run_dir / image.file)
            for prompt_set in self.record.prompt_sets
            for image in prompt_set.images
            if not image.flagged_nsfw
        ]

    def _training_files(self) -> list[ImageFile]:
        return [found for found in self.training_images.values() if isinstance(found, ImageFile)]

    def faces(self) -> None:
        from auditor.perception.registry import FACE_DETECTORS

        config = self.record.config
        with self.stage("faces") as outcome:
            detector = FACE_DETECTORS.load(config.face_detector.spec)
            config.face_detector = config.face_detector.model_copy(
                update={"name": detector.name, "settings": detector.settings}
            )
            self.boxes, counts = detect_faces(
                detector, self._generated_files() + self._training_files(), self.cache, self.progress
            )
            outcome.computed, outcome.cached = counts.computed, counts.cached

    def verdict(self, sha256: str) -> FaceVerdict | None:
        """The one-face filter's verdict on an image; None when it could not be read."""
        boxes = self.boxes.get(sha256)
        if boxes is None:
            return None
        share_min = self.record.config.face_detector.min_face_share
        return face_filter(boxes, share_min, share_min)

    def classify(self) -> None:
        from auditor.perception.registry import EMBEDDERS

        config = self.record.config
        kept = [f for f in self._generated_files() + self._training_files() if self.verdict(f.sha256) == "kept"]
        with self.stage("classify") as outcome:
            if not kept:
                self.p_woman = {}
                return
            embedder = EMBEDDERS.load(config.embedder.spec, options=self.load_options())
            config.embedder = embedder.ref.model_copy(update={"spec": config.embedder.spec})
            classifier = config.classifier
            texts = embed_texts_cached(embedder, classifier.texts, self.cache)
            vectors, counts = embed_image_files(embedder, kept, self.cache, EMBED_BATCH_SIZE, self.progress)
            outcome.computed, outcome.cached = counts.computed, counts.cached
            scale = float(embedder.logit_scale)
            config.classifier = classifier.model_copy(update={"logit_scale": scale})
            shas = list(vectors)
            probabilities, _ = classify(
                np.stack([vectors[s] for s in shas]), texts, scale, tuple(classifier.classes), classifier.threshold
            )
            self.p_woman = dict(zip(shas, probabilities.tolist(), strict=True))
            del embedder
            release_accelerator_memory()

    def decision(self, sha256: str) -> str | None:
        """man, woman or ambiguous for a kept image; None for any other."""
        if sha256 not in self.p_woman:
            return None
        classifier = self.record.config.classifier
        return decide([self.p_woman[sha256]], tuple(classifier.classes), classifier.threshold)[0]

    def score(self) -> None:
        config = self.record.config
        with self.stage("score") as outcome:
            generated = generated_sides(self)
            training = training_sides(self)
            self.record.generated, self.record.training = generated, training
            settings = {"resamples": config.bootstrap, "seed": config.ci_seed, "level": config.ci_level}
            self.record.amplification = amplification_rows(
                generated, training, config.occupations, config.methods, len(config.templates), **settings
            )
            self.record.summary = summaries(
                self.record.amplification, config.occupations, config.methods, len(config.templates),
                self.record.basis, exclude_flips=config.exclude_flips, **settings,
            )  # fmt: skip
            self.record.warnings = training_warnings(self)
            write_examples(self)
            outcome.computed = len(self.record.amplification)


def start_amplification(
    options: AmplificationOptions,
    store: RunStore,
    cache: ContentCache,
    progress: ProgressReporter,
    run_name: str | None = None,
) -> AmplificationRun:
    """Validate the options, create the run folder and write the first record."""
    options.validate()
    config = options.config()
    run_dir = store.create_run(run_name, "amplification")
    record = AmplificationRecord(run_id=run_dir.name, config=config, environment=collect_environment())
    study = AmplificationRun(run_dir, record, cache, progress, options.device, options.batch_rows)
    study.save()
    return study


def resume_amplification(
    run: str, store: RunStore, cache: ContentCache, progress: ProgressReporter, resumption: Resumption = Resumption()
) -> AmplificationRun:
    """Reopen a run folder with its own settings; finished work comes from the cache.

    ``resumption`` may say where the run's models are now (``t2i``, ``embedder``,
    ``text_embedder``) and which executor runs the rest.
    """
    from auditor.generation.registry import T2I_BACKENDS
    from auditor.perception.registry import EMBEDDERS, SENTENCE_EMBEDDERS, check_needed_embedder

    run_dir, record = reopen_run(run, store, AmplificationRecord)
    if "embedder" in resumption.models:
        check_needed_embedder(resumption.models["embedder"], CLASSIFIER_NEEDS_CLIP)
    if "text_embedder" in resumption.models:  # checked as a new run's: only for the nn methods
        check_text_embedder(record.config.methods, resumption.models["text_embedder"])
        if record.config.text_embedder is None:  # the run has no nn method
            resumption = resumption.without_model("text_embedder")
    resumption.apply(
        record.config, {"t2i": T2I_BACKENDS, "embedder": EMBEDDERS, "text_embedder": SENTENCE_EMBEDDERS}
    )
    return AmplificationRun(run_dir, record, cache, progress, resumption.device)
