"""``auditor prompt``: the TIBET audit of one prompt, end to end."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.commands import command_options, common
from auditor.core.defaults import DEFAULT_EMBEDDER
from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from auditor.records import GenerationSettings, PerceptionSettings, RunRecord, ScoringSettings
    from auditor.studies.prompt_audit import PromptAuditOptions


def prompt(
    ctx: typer.Context,
    text: str | None = typer.Argument(None, metavar="PROMPT", help="The text-to-image prompt to audit."),
    llm: str | None = common.LLM,
    t2i: str = common.T2I,
    vqa: str = common.VQA,
    embedder: str = common.EMBEDDER,
    images: int = typer.Option(48, "--images", min=1, max=common.MAX_IMAGES, help="Images per prompt (the paper uses 48)."),
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
    max_axes: int | None = typer.Option(None, "--max-axes", min=1, help="Keep at most this many axes."),
    max_counterfactuals: int | None = common.MAX_COUNTERFACTUALS,
    axes: str | None = common.AXES,
    llm_retries: int = common.LLM_RETRIES,
    temperature: float | None = common.TEMPERATURE,
    llm_seed: int | None = common.LLM_SEED,
    review: bool = typer.Option(False, "--review", help="Edit the plan ($EDITOR) before anything is generated."),
    name: str | None = typer.Option(None, "--name", help="Run folder name (default: date-time-prompt)."),
    resume: str | None = typer.Option(
        None, "--resume", help="Continue an earlier run (id or folder) with its own settings; --t2i/--vqa/--embedder say where its models are now (other weights are allowed: what they make is computed again, as the cache keys on the weights)."
    ),
    runs_dir: Path | None = common.RUNS_DIR,
    device: str | None = common.DEVICE,
    allow_partial_weights: bool = common.ALLOW_PARTIAL_WEIGHTS,
    quiet: bool = common.QUIET,
    json_output: bool = typer.Option(False, "--json", help="Print the report as one JSON object (no progress bars)."),
) -> None:
    """Audit one prompt: plan axes and counterfactuals, generate, ask the VQA model, score CAS/BAV."""
    from auditor.executors import use_ray_address
    from auditor.studies.prompt_audit import resume_audit, start_audit

    store = common.run_store(runs_dir)
    options = None
    if resume is None:
        if text is None:
            raise AuditorError(
                'no prompt given: auditor prompt "a photo of a pharmacist" audits one (--resume RUN continues a run)'
            )
        fixed_axes = common.parse_axes(axes)
        if fixed_axes is not None:
            llm = common.llm_for_fixed_axes(llm)
        options = audit_options(
            text, llm, t2i, vqa, embedder, images, seed,
            common.generation_settings(
                batch_size, compile_models, steps=steps, guidance_scale=guidance, scheduler=scheduler, width=width,
                height=height, negative_prompt=negative_prompt,
            ),
            common.perception_settings(vqa_batch_size, vqa_concurrency),
            scoring_settings(cas_normalization.value, top_k, bootstrap, ci_method.value, ci_seed, alpha),
            max_axes=max_axes, max_counterfactuals=max_counterfactuals, llm_retries=llm_retries,
            llm_temperature=temperature, llm_seed=llm_seed, review=review, device=device,
            allow_partial_weights=allow_partial_weights, axes=fixed_axes, executor=executor,
        )  # fmt: skip
        if fixed_axes is not None:
            check_axes_fit(options)
        use_ray_address(executor, ray_address)
    else:
        from auditor.records import RunRecord

        resumption = common.resumption(ctx, RunRecord)
    with common.study_session(quiet, json_output) as (cache, progress):
        if options is None:
            audit = resume_audit(resume, store, cache, progress, resumption)
        else:
            audit = start_audit(options, store, cache, progress, name)
            command_options.keep(audit, ctx, common.RESUME_OPTIONS)
            common.say_offline_fallback(llm, options.llm, progress.notice)
        record = common.run_resumable(audit)
    show_results(record, audit.run_dir, quiet=quiet, json_output=json_output)


def scoring_settings(
    cas_normalization: str, top_k: int, bootstrap: int, ci_method: str, ci_seed: int, alpha: float
) -> ScoringSettings:
    from auditor.records import ScoringSettings

    common.check_alpha(alpha)
    common.check_interval_options(bootstrap, ci_method, ci_seed)
    return ScoringSettings(
        cas_normalization=cas_normalization, top_k=top_k, bootstrap=bootstrap, ci_method=ci_method, ci_seed=ci_seed,
        alpha=alpha,
    )  # fmt: skip


def audit_options(
    text: str,
    llm: str | None,
    t2i: str,
    vqa: str,
    embedder: str,
    images: int,
    seed: str | None,
    generation: GenerationSettings,
    perception: PerceptionSettings,
    scoring: ScoringSettings,
    **planning_and_device: object,
) -> PromptAuditOptions:
    """Options for a new run; the LLM defaults to OpenAI when a key is set, else the offline planner (which the
    command says once every option is checked: :func:`~auditor.commands.common.say_offline_fallback`).

    ``planning_and_device`` passes the remaining :class:`PromptAuditOptions` fields through unchanged.
    """
    from auditor.studies.prompt_audit import PromptAuditOptions
    from auditor.studies.run import named_model_is_required

    chosen_embedder = None if embedder.strip().lower() == "none" else embedder
    return PromptAuditOptions(
        prompt=text,
        llm=common.planner_spec(llm),
        t2i=t2i,
        vqa=vqa,
        embedder=chosen_embedder,
        embedder_required=named_model_is_required(chosen_embedder, DEFAULT_EMBEDDER),
        images=images,
        seeds=common.parse_seeds(seed, images),
        generation=generation,
        perception=perception,
        scoring=scoring,
        **planning_and_device,
    )


def check_axes_fit(options: PromptAuditOptions) -> None:
    """``--axes`` none of which the axis library can write for this prompt (``setting`` for a person) is bad input:
    the offline plan is cheap, so it is made here, before a run folder exists, rather than at the plan stage, where
    the run would fail with nothing to resume. (A batch asks :func:`auditor.commands.batch.check_axes_fit_some`.)"""
    from auditor.planning import make_plan
    from auditor.planning.offline import check_axes

    make_plan(
        options.prompt, "offline", axes=check_axes(options.axes or []), max_axes=options.max_axes,
        max_counterfactuals=options.max_counterfactuals,
    )  # fmt: skip


def show_results(record: RunRecord, run_dir: Path, *, quiet: bool, json_output: bool) -> None:
    """Show the finished run's report (terminal or JSON); report.html is already in the run folder."""
    from auditor.core.console import say_whole
    from auditor.core.store import run_files_text
    from auditor.reporting import render_terminal, report_json

    def render(record: RunRecord, run_dir: Path, console: Console) -> None:
        render_terminal(record, run_dir, console)
        say_whole(console, run_files_text(run_dir))

    common.show_result(record, run_dir, quiet=quiet, json_output=json_output, as_json=report_json, render=render)


def register(app: typer.Typer) -> None:
    app.command("prompt")(prompt)

