"""``auditor batch``: audit every prompt of a list with the same models, loaded once, and rank them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.commands import command_options, common
from auditor.commands.prompt import audit_options, check_axes_fit, scoring_settings
from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    from auditor.studies.prompt_audit import PromptAuditOptions


def batch(
    ctx: typer.Context,
    prompts_file: Path = typer.Argument(
        None, metavar="PROMPTS_FILE", help="Prompts: .txt (one per line), .csv, .tsv or .jsonl with a 'prompt' column."
    ),
    values: Path | None = typer.Option(
        None, "--values", help="Values of the file's {placeholder} templates (.txt, .csv, .tsv, .json, .yaml)."
    ),
    llm: str | None = common.LLM,
    t2i: str = common.T2I,
    vqa: str = common.VQA,
    embedder: str = common.EMBEDDER,
    images: int = typer.Option(48, "--images", min=1, max=common.MAX_IMAGES, help="Images per prompt set (the paper uses 48)."),
    seed: str | None = common.SEED,
    batch_size: str = common.BATCH_SIZE,
    compile_models: bool = common.COMPILE,
    executor: str = common.EXECUTOR,
    ray_address: str | None = common.RAY_ADDRESS,
    steps: int | None = common.steps_option(),
    guidance: float | None = common.guidance_option(),
    scheduler: str | None = common.SCHEDULER,
    width: int | None = common.WIDTH,
    height: int | None = common.HEIGHT,
    negative_prompt: str | None = common.NEGATIVE_PROMPT,
    vqa_batch_size: int = common.VQA_BATCH_SIZE,
    vqa_concurrency: int = common.VQA_CONCURRENCY,
    cas_normalization: common.CasNormalizationChoice = common.CAS_NORMALIZATION,
    top_k: int = common.TOP_K,
    bootstrap: int = common.BOOTSTRAP,
    ci_method: common.IntervalMethodChoice = common.CI_METHOD,
    ci_seed: int = common.CI_SEED,
    alpha: float = common.ALPHA,
    max_axes: int | None = typer.Option(None, "--max-axes", min=1, help="Keep at most this many axes per prompt."),
    max_counterfactuals: int | None = common.MAX_COUNTERFACTUALS,
    axes: str | None = common.AXES,
    llm_retries: int = common.LLM_RETRIES,
    temperature: float | None = common.TEMPERATURE,
    llm_seed: int | None = common.LLM_SEED,
    name: str | None = typer.Option(None, "--name", help="Run folder name (default: date-time-file)."),
    resume: str | None = typer.Option(
        None, "--resume", help="Continue an earlier batch (id or folder) with its own settings."
    ),
    runs_dir: Path | None = common.RUNS_DIR,
    device: str | None = common.DEVICE,
    allow_partial_weights: bool = common.ALLOW_PARTIAL_WEIGHTS,
    quiet: bool = common.QUIET,
    json_output: bool = typer.Option(False, "--json", help="Print the leaderboard as one JSON object."),
) -> None:
    """Audit a list of prompts (one prompt audit each, models loaded once) and rank prompt x axis by BAV."""
    from auditor.executors import use_ray_address
    from auditor.prompting.lists import read_prompt_list
    from auditor.studies.batch import BatchOptions, resume_batch, start_batch

    store = common.run_store(runs_dir)
    options = None
    if resume is None:
        if prompts_file is None:
            raise AuditorError("give a PROMPTS_FILE (one prompt per line, or CSV/TSV/JSONL with a 'prompt' column)")
        prompts = read_prompt_list(prompts_file, values)
        fixed_axes = common.parse_axes(axes)
        if fixed_axes is not None:
            llm = common.llm_for_fixed_axes(llm)
        template = audit_options(
            prompts[0], llm, t2i, vqa, embedder, images, seed,
            common.generation_settings(
                batch_size, compile_models, steps=steps, guidance_scale=guidance, scheduler=scheduler, width=width,
                height=height, negative_prompt=negative_prompt,
            ),
            common.perception_settings(vqa_batch_size, vqa_concurrency),
            scoring_settings(cas_normalization.value, top_k, bootstrap, ci_method.value, ci_seed, alpha),
            max_axes=max_axes, max_counterfactuals=max_counterfactuals, llm_retries=llm_retries,
            llm_temperature=temperature, llm_seed=llm_seed, device=device,
            allow_partial_weights=allow_partial_weights, axes=fixed_axes, executor=executor,
        )  # fmt: skip
        if fixed_axes is not None:
            check_axes_fit_some(template, prompts)
        options = BatchOptions(
            source=str(prompts_file), prompts=prompts, audit=template, values=str(values) if values else None
        )
        use_ray_address(executor, ray_address)
    else:
        from auditor.records import BatchRecord

        resumption = common.resumption(ctx, BatchRecord)
    with common.study_session(quiet, json_output) as (cache, progress):
        if options is None:
            study = resume_batch(resume, store, cache, progress, resumption)
        else:
            study = start_batch(options, store, cache, progress, name)
            command_options.keep(study, ctx, common.RESUME_OPTIONS)
            common.say_offline_fallback(llm, options.audit.llm, progress.notice)
        record = common.run_resumable(study)
    from auditor.reporting.batch import batch_json, render_batch

    common.show_result(
        record, study.run_dir, quiet=quiet, json_output=json_output, as_json=batch_json, render=render_batch
    )


def check_axes_fit_some(options: PromptAuditOptions, prompts: list[str]) -> None:
    """A batch's ``--axes`` that fit none of its prompts is bad input, refused as
    :func:`~auditor.commands.prompt.check_axes_fit` refuses a prompt's; where they fit some, each prompt they fit
    none of fails alone in the run and the batch goes on."""
    from dataclasses import replace

    first: AuditorError | None = None
    for prompt in prompts:
        try:
            check_axes_fit(replace(options, prompt=prompt))
            return
        except AuditorError as exc:
            first = first or exc
    if first is not None:
        raise AuditorError(f"--axes fit none of the batch's {len(prompts)} prompts; the first: {first}") from None


def register(app: typer.Typer) -> None:
    app.command("batch")(batch)
