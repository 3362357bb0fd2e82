"""``auditor t2iat``: Text-to-Image Association Tests (Wang et al., ACL 2023).

``score`` rescores saved embeddings without any model; ``run`` generates, embeds and
scores one of the paper's eight tests or a custom YAML test; ``occupations`` runs the
gender-occupation study (per-occupation distributions and stereotype amplification);
``report`` shows a stored run of either again; ``list`` shows the built-in tests.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from auditor.commands import command_options, common
from auditor.core.console import out, print_json
from auditor.core.defaults import DEFAULT_EMBEDDER
from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    from auditor.core.cache import ContentCache
    from auditor.core.store import RunStore
    from auditor.studies.progress import ProgressReporter
    from auditor.studies.t2iat import T2IATOptions, T2IATStudy

app = typer.Typer(
    name="t2iat",
    help="T2IAT association tests: score saved embeddings, run a test, or the occupation study.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


_PERMUTATIONS = typer.Option(
    10_000, "--permutations", min=1, help="Monte Carlo permutations when there are more than 200,000 splits."
)
_PERMUTATION_SEED = typer.Option(0, "--permutation-seed", min=0, help="Seed of the Monte Carlo permutation generator.")


class EffectSizeSdChoice(str, Enum):
    """The sd Cohen's d divides by (AssociationResult.effect_size_sd)."""

    pooled = "pooled"
    combined = "combined"


_EFFECT_SIZE_SD = typer.Option(
    EffectSizeSdChoice.pooled,
    "--effect-size-sd",
    help="The sd d divides by: 'pooled' within-group sample sd (Cohen), or 'combined', the sd of all Asc values of X "
    "and Y together, as the authors' code and the paper's Table 1 (|d| <= 2 for equal groups).",
)
_EMBEDDER = typer.Option(DEFAULT_EMBEDDER, "--embedder", help="Image/text embedder: clip:<id|path> or a local folder.")
#: T2IAT (Wang et al.) generated with 50 steps at guidance 7.5.
_STEPS = common.steps_option(paper=50)
_GUIDANCE = common.guidance_option(paper=7.5)
_NAME = typer.Option(None, "--name", help="Run folder name (default: date-time-t2iat-<test>, or date-time-t2iat-occupations).")
_RESUME = typer.Option(None, "--resume", help="Continue an earlier run of this command (id or folder) with its own settings.")
#: Options a resumed run takes: where its models are, where they run, and how to show progress.
RESUME_OPTIONS = common.RESUME_BASE | {"embedder"}
_JSON = typer.Option(False, "--json", help="Print one JSON object.")


# --------------------------------------------------------------------------- score


@app.command("score")
def score(
    file: Path = typer.Argument(..., metavar="FILE.npz", help="Arrays X, Y, XA, XB, YA, YB (rows = embeddings)."),
    permutations: int = _PERMUTATIONS,
    permutation_seed: int = _PERMUTATION_SEED,
    effect_size_sd: EffectSizeSdChoice = _EFFECT_SIZE_SD,
    image_seed: str | None = typer.Option(None, "--seed", hidden=True),
    json_output: bool = _JSON,
) -> None:
    """Score saved embeddings: differential association S, effect size d, permutation p-value."""
    from auditor.metrics.t2iat import association_test
    from auditor.reporting.t2iat import render_association
    from auditor.scoring.t2iat import NPZ_ARRAYS, association_record, load_npz

    if image_seed is not None:  # it once meant the permutation seed here: say so instead of "no such option"
        raise AuditorError(
            "--seed sets image seeds and t2iat score makes no images; the permutation test's seed is --permutation-seed"
        )
    groups = load_npz(file)
    result = association_record(
        association_test(
            *(groups[name] for name in NPZ_ARRAYS),
            permutations=permutations,
            seed=permutation_seed,
            spread=effect_size_sd.value,
        )
    )
    if json_output:  # the seed with the numbers: a Monte Carlo p depends on it
        print_json({"file": str(file), **result.model_dump(), "permutation_seed": permutation_seed})
        return
    out.print(f"T2IAT association of {file}", markup=False, highlight=False)
    render_association(result, "X", "Y", out, () if result.exact else [("permutation seed", str(permutation_seed))])


# --------------------------------------------------------------------------- list


@app.command("list")
def list_tests(
    json_output: bool = typer.Option(False, "--json", help="Print a JSON list, one object per test."),
) -> None:
    """The built-in tests (the paper's eight): name, title, concepts and attributes."""
    from auditor.reporting.t2iat import render_test_list
    from auditor.studies.t2iat_tests import builtin_names, load_builtin

    tests = [load_builtin(name) for name in builtin_names()]
    if json_output:
        print_json([test.model_dump() for test in tests])
        return
    render_test_list(tests, out)


# --------------------------------------------------------------------------- run


def _study_options(
    t2i: str,
    embedder: str,
    images: int,
    seed: str | None,
    batch_size: str,
    compile_models: bool,
    executor: str,
    ray_address: str | None,
    steps: int | None,
    guidance: float | None,
    scheduler: str | None,
    permutations: int,
    permutation_seed: int,
    effect_size_sd: EffectSizeSdChoice,
    device: str | None,
    allow_partial_weights: bool,
) -> T2IATOptions:
    from auditor.executors import use_ray_address
    from auditor.studies.t2iat import T2IATOptions

    use_ray_address(executor, ray_address)
    return T2IATOptions(
        t2i=t2i,
        embedder=embedder,
        images=images,
        seeds=common.parse_seeds(seed, images),
        generation=common.generation_settings(
            batch_size, compile_models, steps=steps, guidance_scale=guidance, scheduler=scheduler
        ),
        permutations=permutations,
        permutation_seed=permutation_seed,
        effect_size_sd=effect_size_sd.value,
        device=device,
        allow_partial_weights=allow_partial_weights,
        executor=executor,
    )


def _run_study(
    ctx: typer.Context,
    start: Callable[[RunStore, ContentCache, ProgressReporter], T2IATStudy] | None,
    study_type: type[T2IATStudy],
    runs_dir: Path | None,
    quiet: bool,
    json_output: bool,
) -> tuple[Any, Path]:
    """Start the study (``start``), or reopen the run ``--resume`` names (only ``RESUME_OPTIONS`` may change),
    and run it with progress on stderr; Ctrl-C or an error says how to continue it."""
    from auditor.studies.t2iat import resume_t2iat

    started = start is not None
    if not started:
        resumption = common.resumption(ctx, study_type.record_type, RESUME_OPTIONS)
        start = partial(resume_t2iat, study_type, ctx.params["resume"], resumption=resumption)
    store = common.run_store(runs_dir)
    with common.study_session(quiet, json_output) as (cache, progress):
        study = start(store, cache, progress)
        if started:
            command_options.keep(study, ctx, RESUME_OPTIONS)
        return common.run_resumable(study), study.run_dir


@app.command("run")
def run(
    ctx: typer.Context,
    test_name: str | None = typer.Argument(
        None, metavar="NAME|FILE.yaml", help="A built-in test (see `t2iat list`) or a YAML file."
    ),
    t2i: str = common.T2I,
    embedder: str = _EMBEDDER,
    images: int = typer.Option(10, "--images", min=1, max=common.MAX_IMAGES, help="Images per prompt (the paper uses 10)."),
    seed: str | None = common.SEED,
    batch_size: str = common.BATCH_SIZE,
    compile_models: bool = common.COMPILE,
    executor: str = common.EXECUTOR,
    ray_address: str | None = common.RAY_ADDRESS,
    steps: int | None = _STEPS,
    guidance: float | None = _GUIDANCE,
    scheduler: str | None = common.SCHEDULER,
    permutations: int = _PERMUTATIONS,
    permutation_seed: int = _PERMUTATION_SEED,
    effect_size_sd: EffectSizeSdChoice = _EFFECT_SIZE_SD,
    bootstrap: int = common.BOOTSTRAP,
    ci_seed: int = common.CI_SEED,
    name: str | None = _NAME,
    resume: str | None = _RESUME,
    runs_dir: Path | None = common.RUNS_DIR,
    device: str | None = common.DEVICE,
    allow_partial_weights: bool = common.ALLOW_PARTIAL_WEIGHTS,
    quiet: bool = common.QUIET,
    json_output: bool = _JSON,
) -> None:
    """Run a T2IAT test: generate neutral and attribute-guided images, embed them, report S and d with their
    intervals over seeds, and p."""
    from auditor.studies.t2iat import T2IATTestRun, start_t2iat_test
    from auditor.studies.t2iat_tests import resolve_test

    if test_name is None and resume is None:
        raise AuditorError("name a test (see `auditor t2iat list`) or a YAML file, or continue a run with --resume")
    common.check_interval_options(bootstrap, ci_seed=ci_seed)
    start = None
    if test_name is not None and resume is None:
        test, source = resolve_test(test_name)
        options = _study_options(
            t2i, embedder, images, seed, batch_size, compile_models, executor, ray_address, steps, guidance,
            scheduler, permutations, permutation_seed, effect_size_sd, device, allow_partial_weights,
        )  # fmt: skip
        start = partial(start_t2iat_test, test, source, options, run_name=name, bootstrap=bootstrap, ci_seed=ci_seed)
    record, run_dir = _run_study(ctx, start, T2IATTestRun, runs_dir, quiet, json_output)
    from auditor.reporting.t2iat import render_test_run, test_run_json

    common.show_result(
        record, run_dir, quiet=quiet, json_output=json_output, as_json=test_run_json, render=render_test_run
    )


# --------------------------------------------------------------------------- occupations


@app.command("occupations")
def occupations(
    ctx: typer.Context,
    occupations_file: Path | None = typer.Option(
        None, "--occupations", help="Occupations, one per line (default: the paper's eight)."
    ),
    prompt_template: str = typer.Option("a photo of a {occupation}", "--prompt", help="Gender-neutral template."),
    male_template: str = typer.Option("a photo of a male {occupation}", "--male-prompt", help="Masculine template."),
    female_template: str = typer.Option(
        "a photo of a female {occupation}", "--female-prompt", help="Feminine template."
    ),
    t2i: str = common.T2I,
    embedder: str = _EMBEDDER,
    images: int = typer.Option(100, "--images", min=1, max=common.MAX_IMAGES, help="Images per prompt (the paper uses 100)."),
    seed: str | None = common.SEED,
    batch_size: str = common.BATCH_SIZE,
    compile_models: bool = common.COMPILE,
    executor: str = common.EXECUTOR,
    ray_address: str | None = common.RAY_ADDRESS,
    steps: int | None = _STEPS,
    guidance: float | None = _GUIDANCE,
    scheduler: str | None = common.SCHEDULER,
    permutations: int = _PERMUTATIONS,
    permutation_seed: int = _PERMUTATION_SEED,
    effect_size_sd: EffectSizeSdChoice = _EFFECT_SIZE_SD,
    name: str | None = _NAME,
    resume: str | None = _RESUME,
    runs_dir: Path | None = common.RUNS_DIR,
    device: str | None = common.DEVICE,
    allow_partial_weights: bool = common.ALLOW_PARTIAL_WEIGHTS,
    quiet: bool = common.QUIET,
    json_output: bool = _JSON,
) -> None:
    """Gender association per occupation: image quartiles (paper Fig. 3) and text vs images (Fig. 4)."""
    from auditor.studies.occupations import builtin_occupations, read_occupations_file
    from auditor.studies.t2iat import OccupationsRun, start_occupations

    start = None
    if resume is None:
        if occupations_file is None:
            listed = builtin_occupations("t2iat/occupations.txt")
        else:
            listed = read_occupations_file(occupations_file)
        options = _study_options(
            t2i, embedder, images, seed, batch_size, compile_models, executor, ray_address, steps, guidance,
            scheduler, permutations, permutation_seed, effect_size_sd, device, allow_partial_weights,
        )  # fmt: skip
        templates = (prompt_template, male_template, female_template)
        start = partial(start_occupations, listed, options, run_name=name, templates=templates)
    record, run_dir = _run_study(ctx, start, OccupationsRun, runs_dir, quiet, json_output)
    from auditor.reporting.t2iat import occupations_json, render_occupations

    common.show_result(
        record, run_dir, quiet=quiet, json_output=json_output, as_json=occupations_json, render=render_occupations
    )


# --------------------------------------------------------------------------- report


@app.command("report")
def report(
    run_id: str = typer.Argument(
        ..., metavar="RUN", help="Run id (looked up in the runs folder), run folder, or record.json."
    ),
    html: bool = typer.Option(False, "--html", help="(Re)write report.html in the run folder and print its path."),
    json_output: bool = _JSON,
    runs_dir: Path | None = common.RUNS_DIR,
) -> None:
    """Show a stored T2IAT test or occupation study again: terminal, JSON, or a fresh report.html."""
    from auditor.commands.report import show_stored
    from auditor.records import OccupationsRecord, T2IATRecord, load_any_record

    folder = common.run_store(runs_dir).resolve(run_id)

    def load_t2iat(path: Path) -> T2IATRecord | OccupationsRecord:
        record = load_any_record(path)
        if not isinstance(record, T2IATRecord | OccupationsRecord):
            raise AuditorError(
                f"{folder} is {record.a_title()} record (made by `{record.made_by}`); auditor t2iat report reads T2IAT "
                "runs (`auditor report` shows a run of any kind)"
            )
        return record

    show_stored(folder, load_t2iat, html=html, json_output=json_output)


def register(main_app: typer.Typer) -> None:
    main_app.add_typer(app, name="t2iat")
