"""``auditor trace``: where gender enters the image, from the prompt to the pixels (Wu et al., J. Imaging 2025)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.commands import command_options, common
from auditor.core.defaults import DEFAULT_T2I, DEFAULT_VQA
from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import TraceScoringSettings

#: Options a resumed run takes (where it runs, where its models are now); the rest comes from its record.
RESUME_OPTIONS = common.RESUME_BASE | {"vqa", "embedders", "detector", "segmenter"}


def trace(
    ctx: typer.Context,
    captions: str | None = typer.Argument(
        None,
        metavar="CAPTIONS_FILE",
        help="Captions (TXT, CSV, TSV, JSONL, Parquet; a folder or glob): the neutral "
        "ones (with 'person'/'people' and no word of the paper's Table 2) become triplets.",
    ),
    professions: bool = typer.Option(
        False, "--professions", help="Use the profession set instead: Table 3's professions in the built-in templates."
    ),
    caption_column: str | None = typer.Option(
        None,
        "--caption-column",
        help="Caption column (default: caption or TEXT); a number (1 = the first) reads a CSV/TSV without a header "
        "row, such as Conceptual Captions' TSV.",
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="At most this many triplets (the first ones)."),
    seeds_per_triplet: int | None = typer.Option(
        None,
        "--seeds",
        min=1,
        max=common.MAX_IMAGES,
        help="Seeds per triplet, shared by its three prompts (default: 5 for --professions, "
        "1 for captions; the paper used 5 for GCC and the professions, 1 otherwise).",
    ),
    seed: str | None = common.SEED,
    t2i: str = typer.Option(
        DEFAULT_T2I, "--t2i", help="Model under audit: diffusers:<id|path>, an SD 1.x/2.x pipeline (the trace "
        "reads its text encoder, latents and cross-attention)."
    ),
    vqa: str = typer.Option(
        DEFAULT_VQA, "--vqa", help="VQA model that lists each image's objects (blip2:/hf:/openai:...)."
    ),
    embedders: list[str] | None = typer.Option(
        None,
        "--embedder",
        metavar="SPEC",
        help="Image embedder to compare paired images with, repeatable: clip:<id>, dinov2:<id>, "
        "hf-vision:<id> (any vision backbone), or 'none'. Default: clip:openai/clip-vit-base-patch32 and "
        "dinov2:facebook/dinov2-small (skipped with a note when unavailable).",
    ),
    detector: str | None = typer.Option(
        None,
        "--detector",
        help="Ground the objects with boxes: grounding-dino:<id> or owlv2:<id> (needed for the dependency groups).",
    ),
    box_threshold: float | None = typer.Option(
        None,
        "--box-threshold",
        help="Detections scoring at or below this are dropped (default: 0.35 Grounding DINO, 0.1 OWLv2).",
    ),
    text_threshold: float | None = typer.Option(
        None, "--text-threshold", help="Grounding DINO's label threshold (default 0.25)."
    ),
    segmenter: str | None = typer.Option(
        None,
        "--segmenter",
        help="Object masks from the boxes (sam:<id>); without it the boxes are the objects' regions.",
    ),
    min_count: float = typer.Option(
        5, "--min-count", min=0, help="Rank objects seen at least this often in one prompt set (the paper: 5 to 20)."
    ),
    top_k: int = typer.Option(10, "--top-k", min=1, help="Most masculine and most feminine objects shown."),
    show: int = typer.Option(4, "--show", min=0, help="Triplets pictured with their attention maps."),
    batch_size: str = common.BATCH_SIZE,
    steps: int | None = common.steps_option(),
    guidance: float | None = common.guidance_option(),
    scheduler: str | None = common.SCHEDULER,
    width: int | None = common.WIDTH,
    height: int | None = common.HEIGHT,
    vqa_batch_size: int = common.VQA_BATCH_SIZE,
    vqa_max_tokens: int = typer.Option(
        40, "--vqa-max-tokens", min=1, help="Length limit of an object list, in tokens."
    ),
    bootstrap: int = common.required_bootstrap_option(
        1000,
        "Resamples of the triplets behind every interval, and the most sign swaps behind a swap test's p (all of "
        "them when there are fewer).",
    ),
    ci_seed: int = common.CI_SEED,
    alpha: float = typer.Option(
        0.05, "--alpha", help="A χ² difference is stated only when its Holm-adjusted p is below this."
    ),
    min_expected: float | None = typer.Option(
        None, "--min-expected", min=0,
        help="Skip a χ² test with an expected count below this (the textbook rule; default: off, as in the paper, "
        "whose tests include sparse tables; those carry a note).",
    ),
    name: str | None = typer.Option(None, "--name", help="Run folder name (default: date-time-source)."),
    resume: str | None = typer.Option(
        None,
        "--resume",
        help="Continue an earlier trace run (id or folder) with its own settings; --t2i, --vqa, --embedder, "
        "--detector and --segmenter may say where its models are now.",
    ),
    runs_dir: Path | None = common.RUNS_DIR,
    device: str | None = common.DEVICE,
    allow_partial_weights: bool = common.ALLOW_PARTIAL_WEIGHTS,
    executor: str = typer.Option(
        "sequential",
        "--executor",
        help="How generation, VQA and embeddings run: sequential (in this process) or ray (on Ray workers across "
        "GPUs and machines; pip install 'auditor[ray]'). Same results either way.",
    ),
    ray_address: str | None = common.RAY_ADDRESS,
    quiet: bool = common.QUIET,
    json_output: bool = typer.Option(False, "--json", help="Print the findings as one JSON object (no progress bars)."),
) -> None:
    """Trace gender from prompt to image: neutral/feminine/masculine triplets with shared seeds, compared at the
    text encoder, the final latent and the image; objects, bias scores, χ² tests and dependency groups."""
    from auditor.executors import use_ray_address
    from auditor.studies.trace import resume_trace, start_trace
    from auditor.studies.trace_options import check_trace_executor

    store = common.run_store(runs_dir)
    options = None
    if resume is not None:
        from auditor.records import TraceRecord

        resumption = common.resumption(ctx, TraceRecord, RESUME_OPTIONS, check_trace_executor)
    else:
        from auditor.records import PerceptionSettings
        from auditor.studies.trace_options import TraceOptions

        chosen = _embedders(embedders)
        scoring = _scoring_settings(bootstrap, ci_seed, alpha, min_count, top_k, min_expected)
        options = TraceOptions(
            captions=captions, professions=professions, caption_column=caption_column, t2i=t2i, vqa=vqa,
            embedders=chosen, detector=detector, box_threshold=box_threshold,
            text_threshold=text_threshold, segmenter=segmenter, seeds_per_triplet=seeds_per_triplet, limit=limit,
            generation=common.generation_settings(
                batch_size, False, steps=steps, guidance_scale=guidance, scheduler=scheduler, width=width, height=height
            ),
            perception=PerceptionSettings(batch_size=vqa_batch_size, max_new_tokens=vqa_max_tokens),
            scoring=scoring,
            show=show, device=device, allow_partial_weights=allow_partial_weights, executor=executor,
        )  # fmt: skip
        options.seeds = common.parse_seeds(seed, options.seed_count)
        use_ray_address(executor, ray_address)
    with common.study_session(quiet, json_output) as (cache, progress):
        if options is None:
            named = _embedders(embedders) if common.given(ctx, "embedders") else None
            study = resume_trace(resume, store, cache, progress, resumption, named)
        else:
            study = start_trace(options, store, cache, progress, name)
            command_options.keep(study, ctx, RESUME_OPTIONS)
        record = common.run_resumable(study)
    from auditor.reporting.trace import render_trace, trace_json

    common.show_result(
        record, study.run_dir, quiet=quiet, json_output=json_output, as_json=trace_json, render=render_trace
    )


def _embedders(embedders: list[str] | None) -> list[str]:
    """The image embedders ``--embedder`` names: the defaults when none, no embedder for ``none``."""
    from auditor.studies.trace_options import DEFAULT_TRACE_EMBEDDERS

    if not embedders:
        return list(DEFAULT_TRACE_EMBEDDERS)
    if any(spec.strip().lower() == "none" for spec in embedders):
        if len(embedders) > 1:
            raise AuditorError("--embedder none turns image embeddings off; do not name other embedders with it")
        return []
    return list(embedders)


def _scoring_settings(
    bootstrap: int, ci_seed: int, alpha: float, min_count: float, top_k: int, min_expected: float | None
) -> TraceScoringSettings:
    """The study's scoring settings, a bad value in one line naming the option it comes from."""
    from pydantic import ValidationError

    from auditor.core.store import validation_message
    from auditor.records import TraceScoringSettings

    common.check_alpha(alpha)
    try:
        return TraceScoringSettings(
            bootstrap=bootstrap, ci_seed=ci_seed, alpha=alpha, min_count=min_count, top_k=top_k,
            min_expected=min_expected,
        )  # fmt: skip
    except ValidationError as exc:  # each field is named as its option: min_expected <- --min-expected
        error = exc.errors()[0]
        option = "--" + str(error["loc"][0]).replace("_", "-")
        raise AuditorError(f"{option}: {validation_message(error).lower()} (got {error['input']!r})") from None


def register(app: typer.Typer) -> None:
    app.command("trace")(trace)
