"""T2IAT studies: a test (``auditor t2iat run``) and the occupation study (``auditor t2iat occupations``).

Both go generate -> embed -> score through the stages every study shares
(:mod:`auditor.executors.generation`: same backends, same content cache, paired seeds;
:mod:`auditor.executors.perception`: embeddings cached by image sha256), and write a
typed record atomically into ``<runs>/<run id>/record.json`` after every stage, so a
failed or interrupted run leaves a valid record saying where it stopped. Everything a run
needs is in its record, so ``--resume`` continues it with its own settings, and a rerun
with the same models and seeds takes every image and embedding from the cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from auditor.core.cache import ContentCache
from auditor.core.choices import EffectSpread
from auditor.core.environment import collect_environment
from auditor.core.errors import AuditorError
from auditor.core.store import RunStore
from auditor.core.text import text_key
from auditor.executors.generation import PromptRequest
from auditor.prompting.articles import filled_template
from auditor.records import (
    T2IAT_GROUPS,
    GenerationSettings,
    IntervalSettings,
    OccupationsConfig,
    OccupationsRecord,
    T2IATConfig,
    T2IATRecord,
    T2IATTestDefinition,
)
from auditor.scoring.counts import usable_embeddings
from auditor.scoring.t2iat import association_intervals, occupation_ids, score_occupations, score_test
from auditor.scoring.uncertainty import BootstrapSettings, no_interval_reason
from auditor.studies.progress import ProgressReporter
from auditor.studies.run import (
    RecordT,
    Resumption,
    StudyRun,
    check_images_and_seeds,
    paired_seeds,
    reopen_run,
    spec_ref,
)
from auditor.studies.t2iat_tests import all_prompts

if TYPE_CHECKING:  # pragma: no cover
    from auditor.perception.base import Embedder

#: Occupation prompt templates (paper §5.3): neutral, then masculine (attribute A) and feminine (B).
OCCUPATION_PROMPT = "a photo of a {occupation}"
OCCUPATION_MALE_PROMPT = "a photo of a male {occupation}"
OCCUPATION_FEMALE_PROMPT = "a photo of a female {occupation}"
#: Why a T2IAT study cannot take ``--embedder none``.
EMBEDDINGS_NEEDED = "T2IAT's associations are made of the images' embeddings"


@dataclass
class T2IATOptions:
    """Models and settings shared by both T2IAT studies."""

    t2i: str
    embedder: str
    images: int
    seeds: list[int] | None = None
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    permutations: int = 10_000
    permutation_seed: int = 0
    effect_size_sd: EffectSpread = "pooled"
    device: str | None = None
    allow_partial_weights: bool = False
    executor: str = "sequential"

    def validate(self) -> None:
        """Reject bad input before a run folder is created or a model loaded."""
        from auditor.executors import check_placement
        from auditor.generation.registry import preflight_t2i
        from auditor.perception.registry import EMBEDDERS, check_needed_embedder

        check_images_and_seeds(self.images, self.seeds)
        check_placement(self.executor, self.device)
        if self.permutations < 1:
            raise AuditorError(f"--permutations must be at least 1 (got {self.permutations})")
        preflight_t2i(self.t2i, self.generation)
        check_needed_embedder(self.embedder, EMBEDDINGS_NEEDED)
        EMBEDDERS.preflight(self.embedder)

    def config_fields(self) -> dict[str, Any]:
        """The fields :class:`T2IATConfig` and :class:`OccupationsConfig` both take from these options."""
        return {
            "t2i": spec_ref(self.t2i),
            "embedder": spec_ref(self.embedder),
            "images_per_prompt": self.images,
            "seeds": paired_seeds(self.images, self.seeds),
            "generation": self.generation,
            "permutations": self.permutations,
            "permutation_seed": self.permutation_seed,
            "effect_size_sd": self.effect_size_sd,
            "allow_partial_weights": self.allow_partial_weights,
            "executor": self.executor,
        }


# --------------------------------------------------------------------------- a T2IAT test


class T2IATStudyRun(StudyRun[RecordT]):
    """What both T2IAT studies share beyond every study's run: their page, and no WordNet (embeddings only)."""

    reads_wordnet = False

    def after_end(self) -> None:
        """Write ``report.html`` however the run ended."""
        from auditor.reporting.t2iat_html import write_t2iat_report

        self.write_page(write_t2iat_report)


class T2IATTestRun(T2IATStudyRun[T2IATRecord]):
    """One T2IAT test in its folder: G(X), G(Y), G(X^A), G(X^B), G(Y^A), G(Y^B) -> embeddings -> S, d and p."""

    record_type: ClassVar[type[T2IATRecord]] = T2IATRecord

    def clear_scores(self) -> None:
        self.record.association_scores, self.record.result, self.record.intervals = {}, None, None

    def run(self) -> T2IATRecord:
        """Run (or resume) the test; the record's status says how it ended."""
        record = self.record
        embed = self.embed_reader()

        def score() -> None:
            with self.stage("score") as outcome:
                vectors = embed.vectors()
                config = record.config
                record.association_scores, record.result = score_test(
                    vectors, record.groups, config.permutations, config.permutation_seed, config.effect_size_sd
                )
                self.add_intervals(vectors)
                outcome.computed = 1

        requests = [PromptRequest(p.prompt_id, p.prompt) for p in all_prompts(record.config.test)]
        self.execute([("generate", lambda: self.run_images(requests, [embed])), ("score", score)])
        return record

    def add_intervals(self, vectors: dict[str, np.ndarray]) -> None:
        """Bootstrap intervals of S and d over seeds (``--bootstrap``), unless there are none to make: no resamples
        asked for, or too few images per prompt (:func:`~auditor.scoring.uncertainty.no_interval_reason`)."""
        config = self.record.config
        if no_interval_reason(config.bootstrap, config.images_per_prompt) or self.record.result is None:
            return
        settings = BootstrapSettings(resamples=config.bootstrap, seed=config.ci_seed)
        sets = usable_embeddings(self.record.prompt_sets, vectors)
        association, effect = association_intervals(
            sets, self.record.groups, config.images_per_prompt, settings, config.effect_size_sd
        )
        self.record.result = self.record.result.model_copy(
            update={"association_ci": association, "effect_size_ci": effect}
        )
        self.record.intervals = IntervalSettings(
            resamples=settings.resamples, level=settings.level, method=settings.method, seed=settings.seed,
            seeds=config.images_per_prompt,
        )  # fmt: skip


def start_t2iat_test(
    test: T2IATTestDefinition,
    source: str,
    options: T2IATOptions,
    store: RunStore,
    cache: ContentCache,
    progress: ProgressReporter,
    run_name: str | None = None,
    *,
    bootstrap: int = 1000,
    ci_seed: int = 0,
) -> T2IATTestRun:
    """Check the options, create the run folder and its first record; nothing is loaded yet.

    ``bootstrap`` resamples (seeded by ``ci_seed``; 0 for none) put intervals on the test's S and d."""
    options.validate()
    if bootstrap < 0 or ci_seed < 0:
        raise AuditorError(f"--bootstrap and --ci-seed must be 0 or more (got {bootstrap} and {ci_seed})")
    config = T2IATConfig(
        test=test, source=source, bootstrap=bootstrap, ci_seed=ci_seed, **options.config_fields()
    )
    prompts = all_prompts(test)
    run_dir = store.create_run(run_name, f"t2iat {test.name}")
    record = T2IATRecord(
        run_id=run_dir.name,
        config=config,
        groups={group: [p.prompt_id for p in prompts if p.group == group] for group in T2IAT_GROUPS},
        environment=collect_environment(),
    )
    return T2IATTestRun(run_dir, record, cache, progress, options.device)


# --------------------------------------------------------------------------- the occupation study


class OccupationsRun(T2IATStudyRun[OccupationsRecord]):
    """The occupation study in its folder: neutral, male and female images per occupation, image vs text
    gender association (paper §5.3-5.4)."""

    record_type: ClassVar[type[OccupationsRecord]] = OccupationsRecord

    def clear_scores(self) -> None:
        self.record.occupations = []

    def prompt_texts(self) -> dict[str, list[str]]:
        """Occupation -> its neutral, male and female prompts, from the config's templates, an "a"/"an" before the
        occupation made to fit it ("a photo of an announcer")."""
        config = self.record.config
        templates = (config.prompt, config.male_prompt, config.female_prompt)
        return {
            o: [filled_template(template, {"occupation": o}) for template in templates] for o in config.occupations
        }

    def run(self) -> OccupationsRecord:
        """Run (or resume) the study; the record's status says how it ended."""
        record, config = self.record, self.record.config
        texts = self.prompt_texts()
        text_vectors: dict[str, np.ndarray] = {}

        def embed_prompts(embedder: Embedder) -> None:
            rows = embedder.embed_texts([prompt for occupation in config.occupations for prompt in texts[occupation]])
            for i, occupation in enumerate(config.occupations):
                text_vectors[occupation] = rows[3 * i : 3 * i + 3]

        embed = self.embed_reader(also=embed_prompts)

        def score() -> None:
            vectors = embed.vectors()
            with self.stage("score") as outcome:
                record.occupations = score_occupations(
                    config.occupations,
                    vectors,
                    text_vectors,
                    config.permutations,
                    config.permutation_seed,
                    config.effect_size_sd,
                )
                outcome.computed = len(config.occupations)

        requests = [
            PromptRequest(occupation_ids(occupation)[kind], prompt)
            for occupation in config.occupations
            for kind, prompt in zip(("neutral", "male", "female"), texts[occupation], strict=True)
        ]
        self.execute([("generate", lambda: self.run_images(requests, [embed])), ("score", score)])
        return record


def _check_distinct_templates(templates: tuple[str, str, str]) -> None:
    """The neutral, masculine and feminine templates must differ (case and spacing aside): two alike make the same
    images from the same seeds, and the study would measure nothing while reporting numbers."""
    options = ("--prompt", "--male-prompt", "--female-prompt")
    keys = [text_key(template) for template in templates]
    same = [
        f"{options[i]} and {options[j]} are both {templates[i]!r}"
        for i in range(3)
        for j in range(i + 1, 3)
        if keys[i] == keys[j]
    ]
    if same:
        raise AuditorError(f"the occupation templates must differ: {'; '.join(same)}")


def start_occupations(
    occupations: list[str],
    options: T2IATOptions,
    store: RunStore,
    cache: ContentCache,
    progress: ProgressReporter,
    run_name: str | None = None,
    templates: tuple[str, str, str] = (OCCUPATION_PROMPT, OCCUPATION_MALE_PROMPT, OCCUPATION_FEMALE_PROMPT),
) -> OccupationsRun:
    """Check the options, create the run folder and its first record; nothing is loaded yet."""
    options.validate()
    check_text_embedder(options.embedder)
    _check_distinct_templates(templates)
    from pydantic import ValidationError

    from auditor.core.store import describe_validation_error

    try:
        config = OccupationsConfig(
            occupations=occupations,
            prompt=templates[0],
            male_prompt=templates[1],
            female_prompt=templates[2],
            **options.config_fields(),
        )
    except ValidationError as exc:
        raise AuditorError(f"bad occupation study settings: {describe_validation_error(exc)}") from None
    run_dir = store.create_run(run_name, "t2iat occupations")
    record = OccupationsRecord(run_id=run_dir.name, config=config, environment=collect_environment())
    return OccupationsRun(run_dir, record, cache, progress, options.device)


# --------------------------------------------------------------------------- resume


#: Either T2IAT study.
T2IATStudy = TypeVar("T2IATStudy", T2IATTestRun, OccupationsRun)


def resume_t2iat(
    study: type[T2IATStudy],
    run: str,
    store: RunStore,
    cache: ContentCache,
    progress: ProgressReporter,
    resumption: Resumption = Resumption(),
) -> T2IATStudy:
    """Reopen a T2IAT test or occupation study with its own settings; finished work comes from the cache.

    ``resumption`` may say where the run's models are now (``t2i``, ``embedder``) and which
    executor runs the rest.
    """
    from auditor.generation.registry import T2I_BACKENDS
    from auditor.perception.registry import EMBEDDERS, check_needed_embedder

    run_dir, record = reopen_run(run, store, study.record_type)
    if "embedder" in resumption.models:
        check_needed_embedder(resumption.models["embedder"], EMBEDDINGS_NEEDED)
    resumption.apply(record.config, {"t2i": T2I_BACKENDS, "embedder": EMBEDDERS})
    if isinstance(record, OccupationsRecord):
        check_text_embedder(record.config.embedder.spec)
    return study(run_dir, record, cache, progress, resumption.device)


def check_text_embedder(spec: str) -> None:
    """The occupation study's embedder must embed the prompts' texts too (Fig. 4), which only CLIP does here:
    refused before any image is made, rather than after all of them, when the texts are embedded."""
    from auditor.perception.registry import EMBEDDERS

    if EMBEDDERS.check(spec).prefix != "clip":
        raise AuditorError(
            f"--embedder {spec}: the occupation study compares the prompts' text embeddings too, which only a CLIP "
            "embedder makes (clip:<hub id or folder>)"
        )
