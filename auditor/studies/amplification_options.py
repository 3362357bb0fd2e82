"""What ``auditor amplification run`` is asked to do: its options, their checks, and the run's config built from them.

Everything here runs before a run folder is created or a model loaded, so bad input is
one line and leaves nothing behind (:mod:`auditor.studies.amplification` runs the study).
The ``amplification captions`` command checks its templates and methods with the same
functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from auditor.core.defaults import DEFAULT_EMBEDDER
from auditor.core.errors import AuditorError
from auditor.core.registry import with_absolute_path
from auditor.corpora.prompts import occupation_prompt
from auditor.corpora.readers import BATCH_ROWS
from auditor.corpora.selection import METHODS, NN_METHODS, PER_OCCUPATION, Method
from auditor.executors import DEFAULT_EXECUTOR, check_placement
from auditor.perception.faces import MIN_FACE_SHARE
from auditor.perception.zero_shot import THRESHOLD, TwoWayTexts
from auditor.records import AmplificationConfig, ClassifierSettings, FaceDetectorSettings, GenerationSettings
from auditor.studies.caption_selection import SelectionRequest
from auditor.studies.occupations import check_occupations
from auditor.studies.run import check_images_and_seeds, paired_seeds, spec_ref

#: The paper's images per occupation and prompt.
PAPER_IMAGES = 500
#: Bootstrap resamples behind the intervals of A and of its mean.
BOOTSTRAP = 10_000
#: Why the amplification study cannot take ``--embedder none``.
CLASSIFIER_NEEDS_CLIP = "the zero-shot gender classifier is a CLIP model"


def parse_methods(values: list[str]) -> list[Method]:
    """``--method`` values (``all`` = every method) -> distinct methods in the paper's order."""
    if not values:
        raise AuditorError(f"no selection method given: use {', '.join(METHODS)} or all")
    unknown = [v for v in values if v != "all" and v not in METHODS]
    if unknown:
        raise AuditorError(f"unknown selection method {unknown[0]!r}: use {', '.join(METHODS)} or all")
    wanted = set(METHODS) if "all" in values else set(values)
    return [m for m in METHODS if m in wanted]


def check_text_embedder(methods: list[str], spec: str) -> None:
    """The nn methods rank captions by their sentence embeddings: their embedder is checked before anything runs,
    and ``none`` is refused in its own words, not as an unknown backend (the other methods use none)."""
    from auditor.perception.registry import SENTENCE_EMBEDDERS

    if nn := [method for method in methods if method in NN_METHODS]:
        if spec.strip().lower() == "none":
            raise AuditorError(
                f"--text-embedder none: the nn methods ({', '.join(nn)}) rank captions by their sentence "
                "embeddings, so they need an embedder (minilm, the default, or a local model folder)"
            )
        SENTENCE_EMBEDDERS.preflight(spec)


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
        from auditor.generation.registry import preflight_t2i
        from auditor.perception.registry import EMBEDDERS, FACE_DETECTORS, check_needed_embedder

        check_images_and_seeds(self.images, self.seeds)
        check_placement(self.executor, self.device)
        self.occupations = check_occupations(self.occupations, self.occupations_source)
        check_templates(self.templates, self.occupations)
        self.methods = parse_methods(list(self.methods))
        if not 0.5 <= self.threshold <= 1.0:
            raise AuditorError(f"--threshold must be between 0.5 and 1 (got {self.threshold})")
        if self.per_occupation < 1:
            raise AuditorError(f"--per-occupation must be at least 1 (got {self.per_occupation})")
        if self.bootstrap < 1:
            raise AuditorError(f"--bootstrap must be at least 1 (got {self.bootstrap})")
        preflight_t2i(self.t2i, self.generation)
        check_needed_embedder(self.embedder, CLASSIFIER_NEEDS_CLIP)
        if EMBEDDERS.check(self.embedder).prefix != "clip":
            raise AuditorError(
                f"--embedder must be a CLIP model (clip:<id|path>) for the zero-shot classifier, not {self.embedder!r}"
            )
        EMBEDDERS.preflight(self.embedder)
        FACE_DETECTORS.preflight(self.face_detector)
        check_text_embedder(self.methods, self.text_embedder)
        # Recorded as an absolute path: a resume from another folder reads the same file.
        self.captions = str(Path(self.captions).expanduser().absolute())
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
            face_detector=FaceDetectorSettings(
                spec=with_absolute_path(self.face_detector), min_face_share=MIN_FACE_SHARE
            ),
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
