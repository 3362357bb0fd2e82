"""``auditor amplification``: bias amplification against the training data (Seshadri et al. 2023).

``run`` compares, per occupation, the share of women in the model's images (G) with the
share in the training examples selected for the occupation (T) and reports A = |G - 50|
- |T - 50|; ``captions`` is the training side alone (no model but MiniLM for the nn
methods); ``report`` shows a stored run again.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.commands import command_options, common
from auditor.core.console import out, print_json
from auditor.core.defaults import DEFAULT_EMBEDDER
from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import AmplificationRecord

app = typer.Typer(
    name="amplification",
    help="Bias amplification: % women in generated vs training images per occupation (Seshadri et al. 2023).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

_OCCUPATION = typer.Option(
    None, "--occupation", metavar="NAME", help="An occupation (repeat for several); default: the built-in list."
)
_OCCUPATIONS = typer.Option(None, "--occupations", help="Occupations, one per line ('#' comments); default: built in.")
_METHOD = typer.Option(
    ["all"], "--method", metavar="METHOD",
    help="keyword, nn, no-indicator, nn+no-indicator or all (repeat for several).",
)
_CAPTION_COLUMN_HELP = (
    "Caption column (default: 'caption', else 'TEXT'); a number (1 = the first) reads a CSV/TSV without a header row"
)
_CAPTION_COLUMN = typer.Option(None, "--caption-column", help=f"{_CAPTION_COLUMN_HELP}.")
_PER_OCCUPATION = typer.Option(
    500, "--per-occupation", help="Captions selected per occupation and method (paper: 500)."
)
_SAMPLE_SEED = typer.Option(0, "--sample-seed", min=0, help="Seed of the keyword method's sample.")
_NAMES = typer.Option(False, "--names", help="Count first names (gender-guesser) as gender indicators too.")
_TEXT_EMBEDDER = typer.Option(
    "minilm", "--text-embedder", help="Sentence embedder of the nn methods (minilm = all-MiniLM-L6-v2)."
)

#: Options a resumed run takes: where its models are and how to show progress; the rest comes from its record.
RESUME_OPTIONS = common.RESUME_BASE | {"embedder", "text_embedder"}


def _occupations(names: list[str] | None, file: Path | None) -> tuple[list[str], str]:
    """The occupations and where they came from: --occupation, --occupations FILE, or the built-in list."""
    from auditor.studies.occupations import builtin_occupations, check_occupations, read_occupations_file

    if names and file is not None:
        raise AuditorError("give occupations with --occupation or with --occupations FILE, not both")
    if file is not None:
        return read_occupations_file(file), str(file)
    if names is not None and len(names) > 0:
        return check_occupations(names, "--occupation"), "--occupation"
    return builtin_occupations("amplification/occupations.txt"), "built-in prompts/amplification/occupations.txt"


def _templates(values: list[str] | None) -> list[str]:
    """``--template`` values: a number of the paper's Table 1 (1-4), ``all``, or a template text."""
    from auditor.corpora.prompts import builtin_templates

    paper = builtin_templates()
    chosen: list[str] = []
    for value in values or ["all"]:
        text = value.strip()
        if text == "all":
            chosen += paper
        elif text.isdigit():
            if not 1 <= int(text) <= len(paper):
                raise AuditorError(f"--template {text}: the paper has templates 1 to {len(paper)}")
            chosen.append(paper[int(text) - 1])
        else:
            chosen.append(text)
    return list(dict.fromkeys(chosen))


@app.command("run")
def run(
    ctx: typer.Context,
    t2i: str = common.T2I,
    captions: str | None = typer.Option(
        None, "--captions",
        help="Training sample (required for a new run): CSV/TSV/JSONL/Parquet/TXT file, folder or glob (streamed).",
    ),
    occupation: list[str] | None = _OCCUPATION,
    occupations_file: Path | None = _OCCUPATIONS,
    method: list[str] = _METHOD,
    template: list[str] | None = typer.Option(
        None, "--template", metavar="TEMPLATE",
        help="Prompt template: 1-4 (the paper's Table 1), all (default), or text with {occupation} (repeatable).",
    ),
    images: int = typer.Option(500, "--images", min=1, max=common.MAX_IMAGES, help="Images per occupation and template (the paper uses 500)."),
    caption_column: str | None = typer.Option(
        None, "--caption-column", help=f"{_CAPTION_COLUMN_HELP} (give --image-column as a number too)."
    ),
    image_column: str | None = typer.Option(
        None, "--image-column", help="Column of image paths on disk; without it T is the caption proxy."
    ),
    per_occupation: int = _PER_OCCUPATION,
    sample_seed: int = _SAMPLE_SEED,
    names: bool = _NAMES,
    embedder: str = typer.Option(
        DEFAULT_EMBEDDER, "--embedder", help="CLIP model of the gender classifier (clip:<id|path>)."
    ),
    threshold: float = typer.Option(
        0.9, "--threshold", help="Confidence needed for man / woman; the rest is ambiguous."
    ),
    face_detector: str = typer.Option(
        "haar", "--face-detector", help="haar (OpenCV, offline), haar:<cascade> or mediapipe:<model .tflite>."
    ),
    text_embedder: str = _TEXT_EMBEDDER,
    exclude_flips: bool = typer.Option(
        False, "--exclude-flips", help="Leave occupations whose direction flips on every prompt out of the means."
    ),
    seed: str | None = common.SEED,
    batch_size: str = common.BATCH_SIZE,
    compile_models: bool = common.COMPILE,
    executor: str = common.EXECUTOR,
    ray_address: str | None = common.RAY_ADDRESS,
    steps: int | None = common.steps_option(),
    guidance: float | None = common.guidance_option(),
    scheduler: str | None = common.SCHEDULER,
    bootstrap: int = common.required_bootstrap_option(
        10_000, "Bootstrap resamples behind the intervals of A and its mean."
    ),
    ci_seed: int = common.CI_SEED,
    name: str | None = typer.Option(None, "--name", help="Run folder name (default: date-time-amplification)."),
    resume: str | None = typer.Option(
        None,
        "--resume",
        help="Continue an earlier run (id or folder) with its own settings; --t2i/--embedder/--text-embedder say where its models are now (other weights are allowed: what they make is computed again, as the cache keys on the weights).",
    ),
    runs_dir: Path | None = common.RUNS_DIR,
    device: str | None = common.DEVICE,
    allow_partial_weights: bool = common.ALLOW_PARTIAL_WEIGHTS,
    quiet: bool = common.QUIET,
    json_output: bool = typer.Option(False, "--json", help="Print the results as one JSON object."),
) -> None:
    """Generate images per occupation, select training captions, classify both sides, report G, T and A."""
    from auditor.executors import use_ray_address
    from auditor.studies.amplification import resume_amplification, start_amplification
    from auditor.studies.amplification_options import AmplificationOptions, parse_methods

    store = common.run_store(runs_dir)
    options = None
    if resume is None:
        if captions is None:
            raise AuditorError("--captions FILE is required: the training sample to compare the model with")
        listed, source = _occupations(occupation, occupations_file)
        options = AmplificationOptions(
            t2i=t2i, captions=captions, occupations=listed, occupations_source=source, templates=_templates(template),
            methods=parse_methods(method), caption_column=caption_column, image_column=image_column,
            embedder=embedder, text_embedder=text_embedder, face_detector=face_detector, threshold=threshold,
            per_occupation=per_occupation, sample_seed=sample_seed, names=names, images=images,
            seeds=common.parse_seeds(seed, images),
            generation=common.generation_settings(
                batch_size, compile_models, steps=steps, guidance_scale=guidance, scheduler=scheduler
            ),
            exclude_flips=exclude_flips, bootstrap=bootstrap, ci_seed=ci_seed, device=device,
            allow_partial_weights=allow_partial_weights, executor=executor,
        )  # fmt: skip
        use_ray_address(executor, ray_address)
    else:
        from auditor.records import AmplificationRecord

        resumption = common.resumption(ctx, AmplificationRecord, RESUME_OPTIONS)
    with common.study_session(quiet, json_output) as (cache, progress):
        if options is None:
            study = resume_amplification(resume, store, cache, progress, resumption)
        else:
            study = start_amplification(options, store, cache, progress, name)
            command_options.keep(study, ctx, RESUME_OPTIONS)
        record = common.run_resumable(study)
    _show(record, study.run_dir, quiet, json_output)


def _show(record: AmplificationRecord, run_dir: Path, quiet: bool, json_output: bool) -> None:
    from auditor.reporting.amplification import amplification_json, render_amplification

    common.show_result(
        record, run_dir, quiet=quiet, json_output=json_output, as_json=amplification_json, render=render_amplification
    )


@app.command("captions")
def captions(
    file: str = typer.Argument(
        ..., metavar="FILE", help="Training sample: CSV/TSV/JSONL/Parquet/TXT file, folder or glob."
    ),
    occupation: list[str] | None = _OCCUPATION,
    occupations_file: Path | None = _OCCUPATIONS,
    method: list[str] = _METHOD,
    template: str = typer.Option(
        "1", "--template", help="Prompt the nn methods rank by: 1-4 (the paper's Table 1) or text."
    ),
    caption_column: str | None = _CAPTION_COLUMN,
    per_occupation: int = _PER_OCCUPATION,
    sample_seed: int = _SAMPLE_SEED,
    names: bool = _NAMES,
    text_embedder: str = _TEXT_EMBEDDER,
    device: str | None = common.DEVICE,
    json_output: bool = typer.Option(False, "--json", help="Print one JSON object (see the README for its shape)."),
) -> None:
    """The training side alone: per occupation, the selected captions' gender labels and their caption proxy of T."""
    from auditor.core.weights import LoadOptions
    from auditor.reporting.amplification import captions_json, render_captions
    from auditor.studies.amplification_options import check_templates, check_text_embedder, parse_methods
    from auditor.studies.caption_selection import SelectionRequest, select_training_captions

    listed, _ = _occupations(occupation, occupations_file)
    methods = parse_methods(method)
    chosen = _templates([template])
    if len(chosen) != 1:
        raise AuditorError("--template takes one template here (the prompt the nn methods rank by)")
    check_templates(chosen, listed)
    if per_occupation < 1:
        raise AuditorError(f"--per-occupation must be at least 1 (got {per_occupation})")
    check_text_embedder(methods, text_embedder)
    from auditor.corpora.prompts import occupation_prompt

    request = SelectionRequest(
        captions=file, occupations=listed, methods=methods,
        prompts={o: [occupation_prompt(chosen[0], o)] for o in listed},
        caption_column=caption_column, per_occupation=per_occupation, sample_seed=sample_seed, names=names,
    )  # fmt: skip
    request.reader()  # a missing file or column is one line before any model loads
    with common.study_session(False, json_output) as (cache, progress):
        result = select_training_captions(
            request, cache, progress, text_embedder=text_embedder, load_options=LoadOptions(device=device)
        )
    if json_output:
        print_json(captions_json(result.selections, methods))
    else:
        render_captions(result.selections, methods, chosen[0], result.rows, result.skipped, out)


@app.command("report")
def report(
    run_id: str = typer.Argument(
        ..., metavar="RUN", help="Run id (looked up in the runs folder), run folder, or record.json."
    ),
    html: bool = typer.Option(False, "--html", help="(Re)write report.html in the run folder and print its path."),
    json_output: bool = typer.Option(False, "--json", help="Print the results as one JSON object."),
    runs_dir: Path | None = common.RUNS_DIR,
) -> None:
    """Show a stored amplification run again: terminal, JSON, or a fresh report.html."""
    from auditor.commands.report import show_stored
    from auditor.records import AmplificationRecord, load_record

    folder = common.run_store(runs_dir).resolve(run_id)
    show_stored(folder, lambda path: load_record(path, AmplificationRecord), html=html, json_output=json_output)


def register(main_app: typer.Typer) -> None:
    main_app.add_typer(app, name="amplification")
