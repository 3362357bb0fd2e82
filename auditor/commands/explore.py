"""``auditor explore``: search for prompts where the model leans most, within a budget, with confirmation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.commands import command_options, common
from auditor.commands.prompt import scoring_settings
from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import ExploreRecord

#: Options an exploration's resume takes: a prompt audit's, and where its text embedder is now.
RESUME_OPTIONS = common.RESUME_OPTIONS | {"text_embedder"}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([hms]?)")
_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "": 1.0}


def parse_duration(text: str | None) -> float | None:
    """``--time``: ``90`` or ``90s``, ``30m``, ``2h``, ``1h30m`` -> seconds."""
    if text is None:
        return None
    compact = text.replace(" ", "").lower()
    parts = _DURATION.findall(compact)
    if not compact or "".join(number + unit for number, unit in parts) != compact:
        raise AuditorError(f"--time takes a duration such as 90s, 30m, 2h or 1h30m, not {text!r}")
    return sum(float(number) * _SECONDS[unit] for number, unit in parts)


def explore(
    ctx: typer.Context,
    seeds: list[str] = typer.Argument(
        None, metavar="SEED_PROMPT", help="Prompts to start from (optional with --topic)."
    ),
    topic: str | None = typer.Option(None, "--topic", help='What the prompts are about, e.g. "people at work".'),
    llm: str | None = typer.Option(
        None,
        "--llm",
        help="Proposer and planner: openai:<model>, langchain:<provider>:<model>, or offline (WordNet templates; "
        f"{common.LLM_DEFAULT_HELP}).",
    ),
    axes: str | None = common.AXES,
    objective: str = typer.Option("bav", "--objective", help="Rank arms by bav, or lean (|CAS(male) - CAS(female)|)."),
    top: int = typer.Option(5, "--top", min=1, help="How many leading arms (prompt x axis) to find and confirm."),
    max_images: int = typer.Option(
        2000, "--max-images", min=1, help="Images this run may generate, confirmation included."
    ),
    max_llm_calls: int | None = typer.Option(None, "--max-llm-calls", min=0, help="LLM requests this run may make."),
    max_prompts: int | None = typer.Option(None, "--max-prompts", min=1, help="Candidate prompts it may explore."),
    time_limit: str | None = typer.Option(
        None, "--time", help="Exploration time, e.g. 30m or 2h (checked between rounds)."
    ),
    max_images_per_prompt: int = typer.Option(
        48, "--max-images-per-prompt", min=2, max=common.MAX_IMAGES,
        help="Seeds an arm may reach (at least --seeds-per-round).",
    ),
    confirm_images: int = typer.Option(
        24, "--confirm-images", min=0, help="Fresh seeds per prompt set to confirm the top arms (0: none, else 4 or more)."
    ),
    seeds_per_round: int = typer.Option(4, "--seeds-per-round", help="Seeds an arm gets per round (k), at least 4."),
    proposals: int = typer.Option(8, "--proposals", min=1, help="Candidates asked of the proposer per round."),
    text_embedder: str = typer.Option(
        "minilm",
        "--text-embedder",
        help="Sentence embedder for near-duplicates (minilm[:<id|path>]) or 'none' (exact matches); with --resume, "
        "where the exploration's own embedder is now.",
    ),
    duplicate_threshold: float = typer.Option(
        0.9, "--duplicate-threshold", help="Cosine above which a candidate is a near-duplicate."
    ),
    t2i: str = common.T2I,
    vqa: str = common.VQA,
    seed: int = typer.Option(
        0, "--seed", min=0, max=common.MAX_SEED,
        help="First image seed S: exploration uses S.., confirmation the seeds after.",
    ),
    batch_size: str = common.BATCH_SIZE,
    compile_models: bool = common.COMPILE,
    executor: str = common.EXECUTOR,
    ray_address: str | None = common.RAY_ADDRESS,
    steps: int | None = common.steps_option(),
    guidance: float | None = common.guidance_option(),
    scheduler: str | None = common.SCHEDULER,
    vqa_batch_size: int = common.VQA_BATCH_SIZE,
    vqa_concurrency: int = common.VQA_CONCURRENCY,
    bootstrap: int = common.required_bootstrap_option(
        1000, "Paired-bootstrap resamples over seeds behind every interval and confirmation test."
    ),
    ci_method: common.IntervalMethodChoice = common.CI_METHOD,
    ci_seed: int = common.CI_SEED,
    alpha: float = typer.Option(
        0.05, "--alpha", help="Confirmation: Benjamini-Hochberg adjusted p below this is a finding."
    ),
    max_axes: int | None = typer.Option(None, "--max-axes", min=1, help="Axes kept from each LLM plan."),
    max_counterfactuals: int | None = common.MAX_COUNTERFACTUALS,
    llm_retries: int = common.LLM_RETRIES,
    temperature: float | None = common.TEMPERATURE,
    llm_seed: int | None = common.LLM_SEED,
    name: str | None = typer.Option(None, "--name", help="Run folder name (default: date-time-topic)."),
    resume: str | None = typer.Option(
        None, "--resume", help="Continue an earlier exploration (id or folder) with its own settings."
    ),
    runs_dir: Path | None = common.RUNS_DIR,
    device: str | None = common.DEVICE,
    allow_partial_weights: bool = common.ALLOW_PARTIAL_WEIGHTS,
    quiet: bool = common.QUIET,
    json_output: bool = typer.Option(False, "--json", help="Print the leaderboard as one JSON object (no live table)."),
) -> None:
    """Find where the model leans: propose prompts, guard, plan, spend images adaptively, confirm the top arms."""
    from auditor.executors import use_ray_address
    from auditor.studies.explore import resume_exploration, start_exploration
    from auditor.studies.explore_options import DEFAULT_TEXT_EMBEDDER, ExploreOptions
    from auditor.studies.run import named_model_is_required

    store = common.run_store(runs_dir)
    options = None
    if resume is None:
        if objective not in ("bav", "lean"):
            raise AuditorError(f"--objective must be 'bav' or 'lean', not {objective!r}")
        chosen_text_embedder = None if text_embedder.strip().lower() == "none" else text_embedder
        options = ExploreOptions(
            seeds=list(seeds or []),
            topic=topic,
            llm=common.planner_spec(llm),
            t2i=t2i,
            vqa=vqa,
            axes=common.parse_axes(axes),
            objective=objective,
            top_k=top,
            seeds_per_round=seeds_per_round,
            proposals_per_round=proposals,
            max_images=max_images,
            max_llm_calls=max_llm_calls,
            max_prompts=max_prompts,
            time_limit=parse_duration(time_limit),
            max_images_per_prompt=max_images_per_prompt,
            confirm_images=confirm_images,
            first_seed=seed,
            text_embedder=chosen_text_embedder,
            text_embedder_required=named_model_is_required(chosen_text_embedder, DEFAULT_TEXT_EMBEDDER),
            duplicate_threshold=duplicate_threshold,
            generation=common.generation_settings(
                batch_size, compile_models, steps=steps, guidance_scale=guidance, scheduler=scheduler
            ),
            perception=common.perception_settings(vqa_batch_size, vqa_concurrency),
            scoring=scoring_settings("distribution", 10, bootstrap, ci_method.value, ci_seed, alpha),
            max_axes=max_axes,
            max_counterfactuals=max_counterfactuals,
            llm_retries=llm_retries,
            llm_temperature=temperature,
            llm_seed=llm_seed,
            device=device,
            allow_partial_weights=allow_partial_weights,
            executor=executor,
        )
        use_ray_address(executor, ray_address)
    else:
        from auditor.records import ExploreRecord

        resumption = common.resumption(ctx, ExploreRecord, RESUME_OPTIONS)
    holder: dict[str, ExploreRecord] = {}
    with common.study_session(quiet, json_output) as (cache, progress):
        live = None
        if not (quiet or json_output):
            from auditor.core.console import err
            from auditor.reporting.explore import round_table
            from auditor.studies.progress import LiveProgress

            live = LiveProgress(err, lambda: round_table(holder["record"]) if "record" in holder else "")
            progress = live
        on_round = (lambda _record: live.refresh()) if live is not None else None
        if options is None:
            exploration = resume_exploration(resume, store, cache, progress, resumption, on_round=on_round)
        else:
            exploration = start_exploration(options, store, cache, progress, name, on_round=on_round)
            command_options.keep(exploration, ctx, RESUME_OPTIONS)
            common.say_offline_fallback(
                llm, options.llm, progress.notice, "proposing from WordNet templates and planning offline"
            )
        holder["record"] = exploration.record
        record = common.run_resumable(exploration, display=live)
    from auditor.reporting.explore import explore_json, render_explore

    common.show_result(
        record, exploration.run_dir, quiet=quiet, json_output=json_output, as_json=explore_json, render=render_explore
    )


def register(app: typer.Typer) -> None:
    app.command("explore")(explore)
