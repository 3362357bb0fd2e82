"""The bias-amplification study (Seshadri, Singh and Elazar, 2023): select -> generate -> faces -> classify -> score.

- **select**: one streamed pass over the training sample picks each occupation's captions
  per method (:mod:`auditor.studies.caption_selection`, cached by the files' contents);
  the selected examples' image files are resolved and hashed;
- **generate**: ``--images`` images per occupation and template through the shared
  generation stage (same backends, cache and paired seeds as every study);
- **faces**: the one-face filter on every generated image and every selected training
  image (:mod:`auditor.studies.face_stage`, cached per detector and image);
- **classify**: CLIP zero-shot man / woman on the kept images, thresholded (embeddings
  cached per image, so a rerun classifies without running CLIP);
- **score**: G, T and A per occupation with their intervals and the summaries
  (:mod:`auditor.scoring.amplification`), and the examples file.

The record is rewritten after every stage, so Ctrl-C or a crash leaves a valid record
saying where it stopped, and ``--resume`` recomputes nothing that was finished.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from auditor.core.cache import ContentCache
from auditor.core.devices import release_accelerator_memory
from auditor.core.environment import collect_environment
from auditor.core.errors import AuditorError
from auditor.core.settings import DEFAULT_EMBEDDER
from auditor.core.store import RunStore, atomic_write_text, new_run_id
from auditor.corpora.prompts import occupation_prompt
from auditor.corpora.readers import BATCH_ROWS, image_path
from auditor.corpora.selection import METHODS, NN_METHODS, PER_OCCUPATION, Method, SelectedCaption, Selection
from auditor.executors import DEFAULT_EXECUTOR, check_executor
from auditor.executors.generation import PromptRequest
from auditor.perception.faces import MIN_FACE_SHARE, FaceBox, FaceVerdict, face_filter
from auditor.perception.zero_shot import THRESHOLD, TwoWayTexts, classify, decide
from auditor.records import (
    AmplificationConfig,
    AmplificationRecord,
    CaptionFile,
    CaptionLabels,
    ClassifierSettings,
    FaceDetectorSettings,
    GeneratedSide,
    GenerationSettings,
    ImageCounts,
    ImageGender,
    PromptSet,
    StageTiming,
    TrainingData,
    TrainingSide,
    load_record,
)
from auditor.scoring.amplification import amplification_rows, share, summaries
from auditor.studies.caption_selection import EMBED_CAPTIONS, SelectionRequest, select_training_captions
from auditor.studies.face_stage import ImageFile, detect_faces, embed_image_files, embed_texts_cached
from auditor.studies.occupations import check_occupations, occupation_slug
from auditor.studies.progress import ProgressReporter, StageCounts
from auditor.studies.run import (
    EMBED_BATCH_SIZE,
    StudyRun,
    check_images_and_seeds,
    paired_seeds,
    spec_ref,
)

#: Every selected training example, one JSON object per line, in the run folder.
EXAMPLES_FILE = "training_examples.jsonl"
#: Captions of each selection the record keeps for the report.
EXAMPLES_IN_RECORD = 3
#: The paper's images per occupation and prompt.
PAPER_IMAGES = 500
#: Bootstrap resamples behind the intervals of A and of its mean.
BOOTSTRAP = 10_000
#: Why a training example has no image verdict.
NoImage = Literal["no_image", "missing"]


def prompt_id(occupation: str, template: int) -> str:
    """The prompt set of an occupation's images for template number ``template`` (1-based)."""
    return f"{occupation_slug(occupation)}/p{template}"


def parse_methods(values: list[str]) -> list[Method]:
    """``--method`` values (``all`` = every method) -> distinct methods in the paper's order."""
    if not values:
        raise AuditorError(f"no selection method given: use {', '.join(METHODS)} or all")
    unknown = [v for v in values if v != "all" and v not in METHODS]
    if unknown:
        raise AuditorError(f"unknown selection method {unknown[0]!r}: use {', '.join(METHODS)} or all")
    wanted = set(METHODS) if "all" in values else set(values)
    return [m for m in METHODS if m in wanted]


@dataclass
class AmplificationOptions:
    """What ``auditor amplification run`` was asked to do (checked by :meth:`validate`)."""

    t2i: str
    captions: str
    occupations: list[str]
    occupations_source: str
    templates: list[str]
    methods: list[Method]
    caption_column: str | None = None
    image_column: str | None = None
    embedder: str = DEFAULT_EMBEDDER
    text_embedder: str = "minilm"
    face_detector: str = "haar"
    threshold: float = THRESHOLD
    per_occupation: int = PER_OCCUPATION
    sample_seed: int = 0
    names: bool = False
    images: int = PAPER_IMAGES
    seeds: list[int] | None = None
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    exclude_flips: bool = False
    bootstrap: int = BOOTSTRAP
    ci_seed: int = 0
    device: str | None = None
    allow_partial_weights: bool = False
    executor: str = DEFAULT_EXECUTOR
    #: Caption rows per streamed batch (changes no number: the selection does not depend on it).
    batch_rows: int = BATCH_ROWS

    def validate(self) -> None:
        """Reject bad input before a run folder is created or a model loaded."""
        from auditor.generation.registry import T2I_BACKENDS
        from auditor.perception.registry import EMBEDDERS, FACE_DETECTORS, SENTENCE_EMBEDDERS

        check_images_and_seeds(self.images, self.seeds)
        check_executor(self.executor)
        self.occupations = check_occupations(self.occupations, self.occupations_source)
        check_templates(self.templates, self.occupations)
        self.methods = parse_methods(list(self.methods))
        if not 0.5 <= self.threshold <= 1.0:
            raise AuditorError(f"--threshold must be between 0.5 and 1 (got {self.threshold})")
        if self.per_occupation < 1:
            raise AuditorError(f"--per-occupation must be at least 1 (got {self.per_occupation})")
        if self.bootstrap < 1:
            raise AuditorError(f"--bootstrap must be at least 1 (got {self.bootstrap})")
        T2I_BACKENDS.preflight(self.t2i)
        if EMBEDDERS.check(self.embedder).prefix != "clip":
            raise AuditorError(
                f"--embedder must be a CLIP model (clip:<id|path>) for the zero-shot classifier, not {self.embedder!r}"
            )
        FACE_DETECTORS.preflight(self.face_detector)
        if any(m in NN_METHODS for m in self.methods):
            SENTENCE_EMBEDDERS.check(self.text_embedder)
        selection_request(self, self.batch_rows).reader()

    def config(self) -> AmplificationConfig:
        axis = TwoWayTexts.builtin("gender")
        return AmplificationConfig(
            t2i=spec_ref(self.t2i),
            embedder=spec_ref(self.embedder),
            images_per_prompt=self.images,
            seeds=paired_seeds(self.images, self.seeds),
            generation=self.generation,
            allow_partial_weights=self.allow_partial_weights,
            executor=self.executor,
            text_embedder=spec_ref(self.text_embedder) if any(m in NN_METHODS for m in self.methods) else None,
            occupations=self.occupations,
            occupations_source=self.occupations_source,
            templates=self.templates,
            methods=self.methods,
            captions=self.captions,
            caption_column=self.caption_column,
            image_column=self.image_column,
            per_occupation=self.per_occupation,
            sample_seed=self.sample_seed,
            names=self.names,
            face_detector=FaceDetectorSettings(spec=self.face_detector, min_face_share=MIN_FACE_SHARE),
            classifier=ClassifierSettings(classes=list(axis.classes), texts=list(axis.texts), threshold=self.threshold),
            exclude_flips=self.exclude_flips,
            bootstrap=self.bootstrap,
            ci_seed=self.ci_seed,
        )


def check_templates(templates: list[str], occupations: list[str]) -> None:
    """Every template fills in for every occupation; no template is given twice."""
    if not templates:
        raise AuditorError("no prompt template given")
    repeated = sorted({t for t in templates if templates.count(t) > 1})
    if repeated:
        raise AuditorError(f"the prompt template {repeated[0]!r} is given twice")
    for template in templates:
        for occupation in occupations:
            occupation_prompt(template, occupation)


def selection_request(
    settings: AmplificationOptions | AmplificationConfig, batch_rows: int = BATCH_ROWS
) -> SelectionRequest:
    """The training side's selection of a run's settings: the nn methods rank by every template's prompt."""
    return SelectionRequest(
        captions=settings.captions,
        occupations=settings.occupations,
        methods=settings.methods,
        prompts={o: [occupation_prompt(t, o) for t in settings.templates] for o in settings.occupations},
        caption_column=settings.caption_column,
        image_column=settings.image_column,
        per_occupation=settings.per_occupation,
        sample_seed=settings.sample_seed,
        names=settings.names,
        batch_rows=batch_rows,
    )


class AmplificationRun(StudyRun[AmplificationRecord]):
    """One bias-amplification run in its folder: select -> generate -> faces -> classify -> score."""

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
                ("generate", self.generate_all),
                ("faces", self.faces),
                ("classify", self.classify),
                ("score", self.score),
            ]
        )
        return self.record

    def after_end(self) -> None:
        """Write ``report.html`` however the run ended."""
        from auditor.reporting.amplification import write_amplification_html

        with self.stage("report"):
            write_amplification_html(self.record, self.run_dir)
        self.save()

    # ------------------------------------------------------------------ select

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
            self._same_sample(result.files)
            self.selections = result.selections
            self.record.training_data = TrainingData(
                files=result.files, rows=result.rows, skipped=result.skipped, labels=result.labels,
                examples_file=EXAMPLES_FILE,
            )  # fmt: skip
            if result.text_embedder is not None:
                config.text_embedder = result.text_embedder
                self._timing(EMBED_CAPTIONS, result.embed_seconds, result.embedded)
            if config.image_column is not None:
                self.training_images = self._resolve_training_images()
        release_accelerator_memory()

    def _same_sample(self, files: list[CaptionFile]) -> None:
        """A resumed run must read the same bytes it started with."""
        before = self.record.training_data
        if before is None:
            return
        if [(f.path, f.sha256) for f in before.files] != [(f.path, f.sha256) for f in files]:
            raise AuditorError(
                f"the training sample {self.record.config.captions} is not what this run started with (other files, or "
                "files with other contents); start a new run"
            )

    def _timing(self, stage: Literal["embed_captions"], seconds: float, counts: StageCounts) -> None:
        timing = StageTiming(stage=stage, seconds=seconds, computed=counts.computed, cached=counts.cached)
        self.record.timings = [t for t in self.record.timings if t.stage != stage] + [timing]

    def _resolve_training_images(self) -> dict[tuple[str, str | None], ImageFile | NoImage]:
        """Every selected example's image file with its sha256 (memoised), or why it has none."""
        wanted = list(dict.fromkeys((c.source, c.image) for s in self.selections for c in s.captions))
        resolved: dict[tuple[str, str | None], ImageFile | NoImage] = {}
        stage = "hash training images"
        self.progress.start(stage, len(wanted), "hashing training images")
        try:
            for source, value in wanted:
                if value is None or not value.strip():
                    resolved[source, value] = "no_image"
                else:
                    path = image_path(value, Path(source))
                    resolved[source, value] = (
                        ImageFile(self.cache.file_digest(path), path) if path.is_file() else "missing"
                    )
                self.progress.advance(stage)
        finally:
            self.progress.finish(stage)
        return resolved

    # ------------------------------------------------------------------ generate

    def generate_all(self) -> None:
        config = self.record.config
        self.run_images(
            [
                PromptRequest(prompt_id(occupation, k), occupation_prompt(template, occupation))
                for occupation in config.occupations
                for k, template in enumerate(config.templates, start=1)
            ]
        )

    # ------------------------------------------------------------------ faces and genders

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

    # ------------------------------------------------------------------ score

    def score(self) -> None:
        config = self.record.config
        with self.stage("score") as outcome:
            sets = {prompt_set.prompt_id: prompt_set for prompt_set in self.record.prompt_sets}
            generated = [
                self._generated_side(occupation, k, sets[prompt_id(occupation, k)])
                for occupation in config.occupations
                for k in range(1, len(config.templates) + 1)
            ]
            training = self._training_sides()
            self.record.generated, self.record.training = generated, training
            settings = {"resamples": config.bootstrap, "seed": config.ci_seed, "level": config.ci_level}
            self.record.amplification = amplification_rows(
                generated, training, config.occupations, config.methods, len(config.templates), **settings
            )
            self.record.summary = summaries(
                self.record.amplification, config.occupations, config.methods, len(config.templates),
                self.record.basis, exclude_flips=config.exclude_flips, **settings,
            )  # fmt: skip
            self.record.warnings = self._warnings()
            self._write_examples()
            outcome.computed = len(self.record.amplification)

    def _generated_side(self, occupation: str, template: int, prompt_set: PromptSet) -> GeneratedSide:
        config = self.record.config
        images = []
        for image in prompt_set.images:
            verdict = None if image.flagged_nsfw else self.verdict(image.sha256)
            if image.flagged_nsfw or verdict is None:
                images.append(ImageGender(index=image.index, face=None, faces=0, p_woman=None, gender=None))
                continue
            images.append(
                ImageGender(
                    index=image.index,
                    face=verdict,
                    faces=len(self.boxes[image.sha256]),
                    p_woman=self.p_woman.get(image.sha256),
                    gender=self.decision(image.sha256),
                )
            )
        counts = _counts(
            [("flagged_nsfw" if i.flagged_nsfw else g.face, g.gender) for i, g in zip(prompt_set.images, images)]
        )
        return GeneratedSide(
            occupation=occupation,
            template=template,
            prompt_id=prompt_set.prompt_id,
            prompt=prompt_set.prompt,
            images=images,
            counts=counts,
            share=share(counts.woman, counts.man + counts.woman, config.ci_level),
        )

    def _selection_for(self, occupation: str, method: Method, template: int | None) -> Selection:
        config = self.record.config
        prompt = None if template is None else occupation_prompt(config.templates[template - 1], occupation)
        return next(
            s for s in self.selections if s.occupation == occupation and s.method == method and s.prompt == prompt
        )

    def _training_sides(self) -> list[TrainingSide]:
        config = self.record.config
        sides = []
        for occupation in config.occupations:
            for method in config.methods:
                numbers = range(1, len(config.templates) + 1) if method in NN_METHODS else [None]
                for template in numbers:
                    sides.append(self._training_side(self._selection_for(occupation, method, template), template))
        return sides

    def _training_side(self, selection: Selection, template: int | None) -> TrainingSide:
        config = self.record.config
        counts = selection.counts()
        labels = CaptionLabels(**counts)
        if config.image_column is None:
            images = None
            t = share(counts["female"], counts["male"] + counts["female"], config.ci_level)
        else:
            images = _counts([self._example_outcome(c) for c in selection.captions])
            t = share(images.woman, images.man + images.woman, config.ci_level)
        return TrainingSide(
            occupation=selection.occupation,
            method=selection.method,
            template=template,
            prompt=selection.prompt,
            matched=selection.matched,
            selected=len(selection.captions),
            labels=labels,
            basis=self.record.basis,
            images=images,
            share=t,
            examples=[c.caption for c in selection.captions[:EXAMPLES_IN_RECORD]],
        )

    def _example_outcome(self, caption: SelectedCaption) -> tuple[str, str | None]:
        """(face verdict or why there is no image, decision) of one training example."""
        found = self.training_images[caption.source, caption.image]
        if not isinstance(found, ImageFile):
            return found, None
        verdict = self.verdict(found.sha256)
        if verdict is None:
            return "missing", None
        return verdict, self.decision(found.sha256)

    def _warnings(self) -> list[str]:
        config = self.record.config
        warnings = []
        if self.record.basis == "caption proxy":
            warnings.append(
                "T is a caption proxy: no --image-column was given, so T is the % female among the selected captions "
                "labelled male or female by their gender words, not the % women in their images (the paper's method)"
                + (
                    "; no-indicator selections keep only captions without gender words, so their caption proxy is "
                    "undefined by construction"
                    if any(m in ("no-indicator", "nn+no-indicator") for m in config.methods)
                    else ""
                )
            )
        unmatched = [o for o in config.occupations if all(s.matched == 0 for s in self.selections if s.occupation == o)]
        if unmatched:
            warnings.append(f"no caption in the training sample mentions {', '.join(map(repr, unmatched))}")
        if config.names:
            warnings.append(f"caption labels use {self.record.training_data.labels}")
        return warnings

    def _write_examples(self) -> None:
        """Every selected example with its label and, with images, its face verdict and decision."""
        config = self.record.config
        files = {f.path: i for i, f in enumerate(self.record.training_data.files)}
        lines = []
        for side in self.record.training:
            selection = self._selection_for(side.occupation, side.method, side.template)
            for caption in selection.captions:
                entry = {
                    "occupation": side.occupation, "method": side.method, "template": side.template,
                    "file": files.get(caption.source), "row": caption.row, "caption": caption.caption,
                    "image": caption.image, "label": caption.label, "similarity": caption.similarity,
                }  # fmt: skip
                if config.image_column is not None:
                    face, gender = self._example_outcome(caption)
                    found = self.training_images[caption.source, caption.image]
                    sha = found.sha256 if isinstance(found, ImageFile) else None
                    entry |= {
                        "image_sha256": sha,
                        "face": face,
                        "p_woman": self.p_woman.get(sha or ""),
                        "gender": gender,
                    }
                lines.append(json.dumps(entry, ensure_ascii=False))
        atomic_write_text(self.run_dir / EXAMPLES_FILE, "\n".join(lines) + ("\n" if lines else ""))


def _counts(outcomes: list[tuple[str | None, str | None]]) -> ImageCounts:
    """Counts of (face verdict or no_image / missing / flagged_nsfw, decision) pairs."""
    tally = dict.fromkeys(
        (
            "no_image",
            "missing",
            "flagged_nsfw",
            "no_face",
            "many_faces",
            "small_face",
            "kept",
            "man",
            "woman",
            "ambiguous",
        ),
        0,
    )
    for face, gender in outcomes:
        tally[face or "missing"] += 1
        if gender is not None:
            tally[gender] += 1
    return ImageCounts(images=len(outcomes), **tally)


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
    run_dir = store.create(run_name or new_run_id("amplification"))
    record = AmplificationRecord(run_id=run_dir.name, config=config, environment=collect_environment())
    study = AmplificationRun(run_dir, record, cache, progress, options.device, options.batch_rows)
    study.save()
    return study


def resume_amplification(
    run: str,
    store: RunStore,
    cache: ContentCache,
    progress: ProgressReporter,
    *,
    device: str | None = None,
    models: dict[str, str] | None = None,
    allow_partial_weights: bool = False,
    executor: str | None = None,
) -> AmplificationRun:
    """Reopen a run folder with its own settings; finished work comes from the cache.

    ``models`` may say where the run's models are now (``t2i``, ``embedder``,
    ``text_embedder`` -> spec); the cache keys on the weights' fingerprints, so other
    weights never reuse the first attempt's results.
    """
    from auditor.generation.registry import T2I_BACKENDS
    from auditor.perception.registry import EMBEDDERS, SENTENCE_EMBEDDERS

    run_dir = store.resolve(run)
    record = load_record(run_dir / "record.json", AmplificationRecord)
    if record.status == "completed":
        progress.notice(f"run {record.run_id} is already complete; rescoring from cached results")
    if allow_partial_weights:
        record.config.allow_partial_weights = True
    if executor is not None:  # where the stages run changes no number: a run may move between executors
        record.config.executor = check_executor(executor)
    registries = {"t2i": T2I_BACKENDS, "embedder": EMBEDDERS, "text_embedder": SENTENCE_EMBEDDERS}
    for name, spec in (models or {}).items():
        registries[name].preflight(spec)
        if name == "text_embedder" and record.config.text_embedder is None:
            continue  # the run has no nn method
        setattr(record.config, name, spec_ref(spec))
    return AmplificationRun(run_dir, record, cache, progress, device)
