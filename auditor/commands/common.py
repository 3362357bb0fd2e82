"""What the commands share.

The options that mean the same thing in each of them (the model under audit, the seeds,
the generation settings, the device, ``--quiet``, and the VQA and scoring options of the
studies that ask the TIBET questions) are declared once here, with the ``--seed`` parser,
and so is what a study runs in: the runs folder, the content cache and the progress display,
the exit on Ctrl-C, and how a finished study is shown (JSON, the run folder alone, or its
report). Options whose defaults or meaning differ per command (``--images``, ``--llm``,
``--max-axes``, ``--embedder`` of T2IAT, amplification and trace, ``--name``, ``--json``)
stay with the command.
Not a command itself; like every command module it imports nothing heavy at the top.
"""

from __future__ import annotations

import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from enum import Enum
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from auditor.core.defaults import (
    DEFAULT_EMBEDDER,
    DEFAULT_OPENAI_LLM,
    DEFAULT_T2I,
    DEFAULT_VQA,
    MAX_GUIDANCE,
    MAX_SEED,
    MAX_SIDE,
    default_llm_spec,
)
from auditor.core.errors import (
    AuditorError,
    BackendError,
    ImagesMissingError,
    RunBusyError,
    RunLockError,
    StartAgainError,
    Terminated,
    out_of_memory,
)
from auditor.reporting.wording import counted

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from auditor.core.cache import ContentCache
    from auditor.core.store import RunStore
    from auditor.records import GenerationSettings, PerceptionSettings, StudyRecord
    from auditor.studies.progress import ProgressReporter
    from auditor.studies.run import RecordT, Resumption, StudyRun

T2I = typer.Option(DEFAULT_T2I, "--t2i", help="Model under audit: diffusers:<id|path>, openai:<model>, folder:<dir>.")
SEED = typer.Option(None, "--seed", help="First seed S (seeds S..S+N-1) or a comma-separated list; default 0..N-1.")
BATCH_SIZE = typer.Option(
    "4",
    "--batch-size",
    help="Images generated per forward pass, or 'auto': the largest that fits on the device "
    "(probed once per model, device and executor, then remembered).",
)
COMPILE = typer.Option(
    False,
    "--compile",
    help="torch.compile the UNet and VAE decoder (compiles for minutes once; runs eagerly where it cannot compile).",
)
#: What ``--llm`` is when not given (:func:`planner_spec`).
LLM_DEFAULT_HELP = f"default: {DEFAULT_OPENAI_LLM} when OPENAI_API_KEY is set, else offline"
LLM = typer.Option(
    None, "--llm", help=f"Planner: openai:<model>, langchain:<provider>:<model> or offline ({LLM_DEFAULT_HELP})."
)
EXECUTOR = typer.Option(
    "sequential",
    "--executor",
    help="How the stages run: sequential (one after the other) or overlapped (the stages that read the images, "
    "such as VQA, embeddings or face detection, alongside generation; every model in memory at once) in this "
    "process, or ray (each stage on Ray workers across GPUs and machines; pip install 'auditor[ray]'). Same results "
    "either way.",
)
RAY_ADDRESS = typer.Option(
    None,
    "--ray-address",
    help="With --executor ray: the cluster to join, auto (the one `ray start` runs here) or HOST:PORT "
    "(default: RAY_ADDRESS, else a Ray started for the run). Not recorded.",
)
SCHEDULER = typer.Option(None, "--scheduler", help="diffusers scheduler class, e.g. DPMSolverMultistepScheduler.")


class CasNormalizationChoice(str, Enum):
    """How concept histograms are normalised before the IoU of CAS (ScoringSettings.cas_normalization)."""

    distribution = "distribution"
    frequency = "frequency"


_CAS_NORMALIZATION_HELP = (
    "'distribution' rescales histograms to sum 1 before the IoU (authors' code); 'frequency' uses per-image "
    "frequencies (paper Eq. 1-3)."
)


#: The VQA options of the studies that ask the TIBET questions of every image (prompt, batch, explore).
VQA = typer.Option(
    DEFAULT_VQA,
    "--vqa",
    help="VQA model: blip2:/blip:/instructblip:/hf:<id|path>, a local folder, or openai:<model> "
    "(OPENAI_BASE_URL: any compatible server).",
)
VQA_BATCH_SIZE = typer.Option(16, "--vqa-batch-size", min=1, help="Image-question pairs per VQA forward pass.")
VQA_CONCURRENCY = typer.Option(
    8, "--vqa-concurrency", min=1, help="Requests in flight at once to an openai: VQA model (answers do not change)."
)
#: A prompt audit's and a batch's image embedder and how their concepts are scored.
EMBEDDER = typer.Option(DEFAULT_EMBEDDER, "--embedder", help="Image embedder (clip:<id|path>) or 'none'.")
CAS_NORMALIZATION = typer.Option(
    CasNormalizationChoice.distribution, "--cas-normalization", help=_CAS_NORMALIZATION_HELP
)
TOP_K = typer.Option(10, "--top-k", min=1, help="Concepts kept in top-K lists.")
#: How many counterfactuals of each plan are kept, wherever a plan is made.
MAX_COUNTERFACTUALS = typer.Option(
    None, "--max-counterfactuals", min=2, help="Keep the first N counterfactuals per axis."
)


def device_name(value: str | None) -> str | None:
    """``--device`` as written, when it names a device auditor runs on (cpu, cuda, cuda:N, mps): checked before any
    run folder exists, without importing torch; whether this machine has it is checked where the model loads."""
    if value is not None and not re.fullmatch(r"(cpu|cuda|mps)(:\d+)?", value.strip()):
        raise typer.BadParameter(f"{value!r} is not a device auditor runs on: cpu, cuda, cuda:N or mps")
    return value.strip() if value is not None else None


DEVICE = typer.Option(
    None, "--device", callback=device_name, help="torch device (default: cuda when available, else cpu)."
)
QUIET = typer.Option(False, "--quiet", "-q", help="No progress bars or report; print the run folder.")
RUNS_DIR = typer.Option(None, "--runs-dir", help="Runs folder (default: AUDITOR_RUNS_DIR or ./runs).")
WIDTH = typer.Option(None, "--width", help=f"Image width in pixels (a multiple of 8, at most {MAX_SIDE}).")
HEIGHT = typer.Option(None, "--height", help=f"Image height in pixels (a multiple of 8, at most {MAX_SIDE}).")
NEGATIVE_PROMPT = typer.Option(None, "--negative-prompt", help="Negative prompt for every image.")
LLM_RETRIES = typer.Option(2, "--llm-retries", min=0, help="Repair turns when the LLM's plan is invalid.")
TEMPERATURE = typer.Option(
    None, "--temperature", min=0.0, max=2.0, help="LLM sampling temperature, 0 to 2 as OpenAI takes it (recorded)."
)
LLM_SEED = typer.Option(None, "--llm-seed", help="Seed sent to the LLM (recorded).")


class IntervalMethodChoice(str, Enum):
    """How bootstrap intervals are read off the resamples."""

    percentile = "percentile"
    bca = "bca"


#: The most images an option asks per prompt (2,000 times the paper's 48): a larger count is a typo, not an audit.
MAX_IMAGES = 100_000
#: The most bootstrap resamples an option takes (100 times the default; each resample costs memory).
MAX_BOOTSTRAP = 100_000
#: The fewest resamples behind a 95% interval: its ends are the 2.5th and 97.5th percentiles of the resamples,
#: and fewer than 1 / 0.025 = 40 cannot place them (with one, the "interval" is a single resample's value, which
#: may not even contain the estimate).
MIN_BOOTSTRAP = 40


def bootstrap_count(value: int | None) -> int | None:
    """``--bootstrap``: 0 (no intervals; where a command allows it) or from :data:`MIN_BOOTSTRAP` resamples."""
    if value is not None and 0 < value < MIN_BOOTSTRAP:
        raise typer.BadParameter(
            f"{value} resamples cannot place a 95% interval's ends (the 2.5th and 97.5th percentiles): "
            f"give at least {MIN_BOOTSTRAP}"
        )
    return value


def required_bootstrap_count(value: int) -> int:
    """``--bootstrap`` of a study whose tests resample (trace, amplification, explore): from :data:`MIN_BOOTSTRAP`."""
    if value <= 0:
        raise typer.BadParameter(
            f"this study's intervals and tests are read off the resamples and cannot be turned off: give at least "
            f"{MIN_BOOTSTRAP}"
        )
    return bootstrap_count(value)


def check_interval_options(bootstrap: int | None, ci_method: str | None = None, ci_seed: int | None = None) -> None:
    """``--ci-method bca`` and a ``--ci-seed`` say how intervals are made: beside ``--bootstrap 0``, which makes
    none, one is a slip to point out (as ``--temperature`` is with the offline planner), not to drop unsaid."""
    if bootstrap != 0:
        return
    if ci_method == "bca":
        raise AuditorError("--ci-method bca sets how intervals are made, but --bootstrap 0 turns them off")
    if ci_seed:
        raise AuditorError(f"--ci-seed {ci_seed} seeds the resampling, but --bootstrap 0 turns it off")


def required_bootstrap_option(default: int, help: str) -> Any:
    """``--bootstrap`` for a study that cannot go without its intervals: its help names the least it takes."""
    return typer.Option(
        default, "--bootstrap", max=MAX_BOOTSTRAP, callback=required_bootstrap_count,
        help=f"{help} At least {MIN_BOOTSTRAP}.",
    )  # fmt: skip


_BOOTSTRAP_HELP = "Paired-bootstrap resamples over seeds behind every interval (at least 40); 0 turns intervals off."
_CI_METHOD_HELP = "Interval method: percentile, or bca (falls back to percentile, noted, where it degenerates)."
_CI_SEED_HELP = "Seed of the bootstrap resampling (the same seed gives the same intervals)."
BOOTSTRAP = typer.Option(
    1000, "--bootstrap", min=0, max=MAX_BOOTSTRAP, callback=bootstrap_count, help=_BOOTSTRAP_HELP
)
CI_METHOD = typer.Option(IntervalMethodChoice.percentile, "--ci-method", help=_CI_METHOD_HELP)
CI_SEED = typer.Option(0, "--ci-seed", min=0, help=_CI_SEED_HELP)
ALPHA = typer.Option(0.05, "--alpha", help="A T2IAT direction is stated only when its Holm-adjusted p is below this.")
#: The same options for a command that rescores a run: None keeps the run's own setting.
CAS_NORMALIZATION_OPTIONAL = typer.Option(
    None,
    "--cas-normalization",
    help=f"{_CAS_NORMALIZATION_HELP} Default: the run's setting, 'distribution' for TIBET files.",
)
BOOTSTRAP_OPTIONAL = typer.Option(
    None,
    "--bootstrap",
    min=0,
    max=MAX_BOOTSTRAP,
    callback=bootstrap_count,
    help=_BOOTSTRAP_HELP + " Default: the run's, or 1000 where it had none.",
)
CI_METHOD_OPTIONAL = typer.Option(None, "--ci-method", help=_CI_METHOD_HELP + " Default: the run's.")
CI_SEED_OPTIONAL = typer.Option(None, "--ci-seed", min=0, help=_CI_SEED_HELP + " Default: the run's.")
AXES = typer.Option(
    None,
    "--axes",
    help="Fix the axes (comma-separated, e.g. gender,age): counterfactuals from the axis library, no LLM call per prompt.",
)
ALLOW_PARTIAL_WEIGHTS = typer.Option(
    False,
    "--allow-partial-weights",
    help="Load checkpoints whose tensors do not all match the model (missing layers stay random; recorded).",
)


#: Most denoising steps: the DDPM-family schedulers (trained on 1000 timesteps) refuse more, and no audit
#: needs more from the others (a huge count was a traceback or an out-of-memory error).
MAX_STEPS = 1000


def steps_option(paper: int | None = None) -> Any:
    """``--steps``; ``paper`` is the value the method's paper used, named in the help when given."""
    note = "" if paper is None else f"; the paper used {paper}"
    return typer.Option(
        None, "--steps", min=1, max=MAX_STEPS, help=f"Denoising steps, 1 to {MAX_STEPS} (default: the pipeline's{note})."
    )


def guidance_option(paper: float | None = None) -> Any:
    """``--guidance``; ``paper`` is the value the method's paper used, named in the help when given."""
    note = "" if paper is None else f"; the paper used {paper}"
    return typer.Option(
        None, "--guidance", help=f"Guidance scale, up to {MAX_GUIDANCE:g} (default: the pipeline's{note})."
    )


def parse_seeds(text: str | None, images: int) -> list[int] | None:
    """``"S"`` -> seeds S..S+images-1; ``"a,b,c"`` -> exactly that list; None -> the default 0..images-1."""
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):  # "1,,2" or "": a seed left out is a typo, not a shorter list
        raise AuditorError(f"--seed {text!r} has an empty item: give an integer or a comma-separated list of integers")
    try:
        values = [int(part) for part in parts]
    except ValueError:
        raise AuditorError(f"--seed takes an integer or a comma-separated list of integers, not {text!r}") from None
    if not all(0 <= value <= MAX_SEED for value in values):
        raise AuditorError(f"--seed takes seeds from 0 to 2^63 - 1, not {text!r}")
    if len(values) > 1:
        return values
    if values[0] + images - 1 > MAX_SEED:  # the seed is fine, the run of seeds from it is not
        raise AuditorError(
            f"--seed {values[0]} leaves no room below 2^63 for the seeds of {counted(images, 'image')} "
            f"({values[0]} to {values[0] + images - 1}); give at most {MAX_SEED - images + 1}"
        )
    return list(range(values[0], values[0] + images))


def generation_settings(batch_size: str, compile_models: bool, **settings: Any) -> GenerationSettings:
    """Generation settings from the command line: ``--batch-size N`` or ``auto``, ``--compile`` and the rest."""
    from auditor.executors.batch_size import DEFAULT_BATCH_SIZE
    from auditor.records import GenerationSettings

    text = batch_size.strip().lower()
    if text == "auto":
        size, auto = DEFAULT_BATCH_SIZE, True
    else:
        try:
            size, auto = int(text), False
        except ValueError:
            size = 0
        if size < 1:
            raise AuditorError(f"--batch-size takes a positive integer or 'auto', not {batch_size!r}")
    scheduler = settings.get("scheduler") or None  # "" is the model's own, as no --scheduler
    settings["scheduler"] = scheduler
    if scheduler is not None and find_spec("diffusers") is not None:  # before a run folder exists to keep
        from auditor.generation.diffusers_backend import scheduler_class

        if scheduler_class(scheduler) is None:
            raise AuditorError(
                f"--scheduler {scheduler}: diffusers has no scheduler of that name (e.g. DDIMScheduler, "
                "EulerDiscreteScheduler, DPMSolverMultistepScheduler)"
            )
    from pydantic import ValidationError

    from auditor.core.store import validation_message

    try:
        made = GenerationSettings(batch_size=size, batch_size_auto=auto, compile=compile_models, **settings)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0])
        option = GenerationSettings.IMAGE_OPTIONS.get(field, "--" + field.replace("_", "-"))
        message = validation_message(error)
        raise AuditorError(f"{option} {error['input']}: {message[0].lower()}{message[1:]}") from None
    for field, most in OPTION_LIMITS.items():
        if (value := getattr(made, field)) is not None and value > most:
            option = GenerationSettings.IMAGE_OPTIONS[field]
            raise AuditorError(f"{option} {value}: input should be less than or equal to {most:g}")
    return made


def perception_settings(vqa_batch_size: int, vqa_concurrency: int) -> PerceptionSettings:
    """Perception settings from ``--vqa-batch-size`` and ``--vqa-concurrency`` (records load only when a command
    runs, not for its ``--help``)."""
    from auditor.records import PerceptionSettings

    return PerceptionSettings(batch_size=vqa_batch_size, concurrency=vqa_concurrency)


#: How far an option may set an image setting (--width, --height, --guidance): bounded where a typo is made, not
#: in the records, so a run recorded with a larger value stays readable.
OPTION_LIMITS = {"width": MAX_SIDE, "height": MAX_SIDE, "guidance_scale": MAX_GUIDANCE}


def parse_axes(text: str | None) -> list[str] | None:
    """``--axes gender,age`` -> the library's axis names (checked); None when not given."""
    if text is None:
        return None
    from auditor.planning.offline import check_axes

    return check_axes(text.split(","))


def llm_for_fixed_axes(llm: str | None) -> str:
    """The planner of an audit given ``--axes``: the axis library, offline. An ``--llm`` naming another is refused:
    nothing would ask it."""
    if llm is not None and llm.strip().lower() != "offline":
        raise AuditorError(
            f"--axes writes the counterfactuals from the axis library without an LLM, so --llm {llm} would not be "
            "asked; leave out --llm"
        )
    return "offline"


#: Options every study's resume takes: which run, where it runs, where its model under audit is now and how to
#: show progress; the rest comes from its record. Each study adds where its other models are now.
RESUME_BASE = frozenset({
    "resume", "runs_dir", "device", "quiet", "json_output", "allow_partial_weights", "executor", "ray_address", "t2i",
})  # fmt: skip
#: Those of a prompt audit, a batch and (with its text embedder) an exploration.
RESUME_OPTIONS = RESUME_BASE | {"vqa", "embedder", "vqa_concurrency"}


def planner_spec(llm: str | None) -> str:
    """The LLM a planning command uses: ``--llm`` as given, else OpenAI when its key is set, else the offline
    planner (:func:`say_offline_fallback` tells the user)."""
    return llm or default_llm_spec()


def say_offline_fallback(
    llm: str | None,
    planner: str,
    say: Callable[[str], None],
    offline_does: str = "planning with the offline WordNet planner",
) -> None:
    """A notice (through ``say``) when no ``--llm`` was given and, without an OpenAI key, ``planner`` fell back to
    offline: what the offline fallback does for this command (``offline_does``). A study says it once its options
    are checked and its run folder exists, so a mistyped model is the only line its person reads."""
    if not llm and planner == "offline":
        say(f"OPENAI_API_KEY is not set: {offline_does} (or pass --llm)")


def given(ctx: typer.Context, name: str) -> bool:
    """Whether the user typed this option (rather than it taking its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def resumed_options(ctx: typer.Context, record_type: type[StudyRecord], allowed: frozenset[str]) -> set[str]:
    """For ``--resume``: the parameters typed on the command line that ``allowed`` says a resume may change.

    Any other option typed is one of the run's settings, which the run keeps: it is let through where its value
    is the run's own (the command that started the run is then continued as it was typed, with ``--resume``
    added), and otherwise refused with one line (:func:`auditor.commands.command_options.check_restated`).
    """
    typed = {param for param in ctx.params if given(ctx, param)}
    if restated := [param.name for param in ctx.command.params if param.name in typed - allowed]:
        from auditor.commands.command_options import check_restated

        check_restated(ctx, restated, allowed, record_type)
    return typed & allowed


#: Options that say where one of the run's models is now (each names a field of the run's config).
MODEL_OPTIONS = ("t2i", "vqa", "embedder", "text_embedder", "detector", "segmenter")


def resumption(
    ctx: typer.Context,
    record_type: type[StudyRecord],
    allowed: frozenset[str] = RESUME_OPTIONS,
    executors: Callable[[str], str] | None = None,
) -> Resumption:
    """For ``--resume`` of a run of ``record_type``: what the command line may change about the run, checked
    before the run is opened (only its record's summary is read, and only to compare options typed again).

    Only ``allowed`` options may change (see :func:`resumed_options`); ``--executor`` is
    checked by ``executors`` (the study's check; default: any installed executor), and
    ``--ray-address`` applied for this process.
    """
    from auditor.executors import check_executor, use_ray_address
    from auditor.studies.run import Resumption

    typed = resumed_options(ctx, record_type, allowed)
    params = ctx.params
    executor = (executors or check_executor)(params["executor"]) if "executor" in typed else None
    ray_address = use_ray_address(executor, params.get("ray_address"))
    return Resumption(
        device=params.get("device"),
        models={name: params[name] for name in MODEL_OPTIONS if name in typed},
        vqa_concurrency=params["vqa_concurrency"] if "vqa_concurrency" in typed else None,
        allow_partial_weights=bool(params.get("allow_partial_weights")),
        executor=executor,
        ray_address=ray_address,
    )


def run_store(runs_dir: Path | None) -> RunStore:
    """The runs folder: ``--runs-dir``, else AUDITOR_RUNS_DIR or ./runs."""
    from auditor.core.settings import get_settings
    from auditor.core.store import RunStore

    return RunStore(runs_dir or get_settings().runs_dir)


def check_alpha(alpha: float) -> None:
    """``--alpha``, a significance level: strictly between 0 and 1."""
    if not 0 < alpha < 1:
        raise AuditorError(f"--alpha must lie strictly between 0 and 1 (got {alpha})")


@contextmanager
def study_session(quiet: bool, json_output: bool) -> Iterator[tuple[ContentCache, ProgressReporter]]:
    """The content cache and progress display a study runs with; the cache is closed however the run ends.

    Progress goes to stderr, and nowhere with ``--quiet`` or ``--json``, so stdout holds only the result.
    """
    from auditor.core.cache import ContentCache
    from auditor.core.console import err
    from auditor.core.settings import get_settings
    from auditor.studies.progress import QuietProgress, RichProgress

    progress = QuietProgress() if quiet or json_output else RichProgress(err)
    cache = ContentCache(get_settings().cache_file)
    try:
        yield cache, progress
    finally:
        cache.close()


def run_resumable(study: StudyRun[RecordT], display: AbstractContextManager | None = None) -> RecordT:
    """Run a study that ``--resume`` can continue: after Ctrl-C or an error, say where the run is kept.

    Ctrl-C exits with code 130 and one line; an error becomes the same one-line error
    naming the run folder and the ``--resume`` that continues it (or saying that a completed
    run was left as it was). A live ``display`` runs around the study only, so it has drawn its
    last frame before that line is printed, and the line stays the last thing on screen. An
    interruption that comes once the run has ended completed and is recorded stops nothing: it is
    noted and the record returned, as while the result is shown (:func:`ignore_interruptions`).
    """
    try:
        with display if display is not None else nullcontext():
            return study.run()
    except KeyboardInterrupt as exc:
        if study.left_as_it_was:
            exit_interrupted(f"run {study.run_dir} is left as it was: {AS_IT_WAS}", exc)
        if study.completed_now:  # it came once the run had ended and was recorded: nothing is left to stop
            ignore_interruptions()
            _noted_once(signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT, None)
            return study.record
        exit_interrupted(f"partial run kept in {study.run_dir}; continue with --resume {study.run_dir}", exc)
    except (RunBusyError, RunLockError):
        raise  # another process runs it, or its folder cannot be locked: nothing changed, nothing to continue
    except AuditorError as exc:
        if study.left_as_it_was:
            raise type(exc)(f"{exc} (run {study.run_dir} is left as it was: {AS_IT_WAS})") from None
        raise _with_resume_advice(exc, study) from None
    except Exception as exc:
        if (problem := out_of_memory(exc)) is None:
            raise  # a fault of ours: the traceback is what a bug report needs
        raise BackendError(  # batch sizes are the run's own; a new run with smaller ones reuses the cached work
            f"out of memory ({problem}): start it again with a smaller --batch-size; a new run with otherwise the same "
            f"settings reuses everything this one cached (the failed run is kept in {study.run_dir})"
        ) from None


#: What a completed run is after an attempt that changed none of its files (:mod:`auditor.core.snapshot`).
AS_IT_WAS = "completed, with its earlier results; what this attempt computed is cached for the next"


def _with_resume_advice(exc: AuditorError, study: StudyRun) -> AuditorError:
    """The error of a run that ended failed, with where it is kept and how to go on with it."""
    if isinstance(exc, ImagesMissingError):
        return type(exc)(
            f"{exc} (run kept in {study.run_dir}; add the missing images to the folder, then continue it with --resume "
            f"{study.run_dir}; or start a new run that asks only for images the folder has)"
        )
    if isinstance(exc, StartAgainError):
        return type(exc)(
            f"{exc} (the run is kept in {study.run_dir}; a new run with other settings reuses everything it cached)"
        )
    return type(exc)(f"{exc} (run kept in {study.run_dir}; continue it with --resume {study.run_dir})")


def show_result(
    record: RecordT,
    run_dir: Path,
    *,
    quiet: bool,
    json_output: bool,
    as_json: Callable[[RecordT, Path], dict],
    render: Callable[[RecordT, Path, Console], None],
) -> None:
    """A finished study's result on stdout: its JSON (``--json``), the run folder alone (``--quiet``, never wrapped,
    as a script reads it back), or its terminal report; report.html is in the run folder already.

    The run has ended and is recorded, so from here on a first Ctrl-C or SIGTERM is only noted
    (:func:`ignore_interruptions`): it has nothing left to stop, and would turn a run that ended into exit code 130
    (or a traceback from the libraries' finalizers as the interpreter exits, or death by the signal, with no word
    said)."""
    from auditor.core.console import out, print_json, print_run_folder

    ignore_interruptions()
    if json_output:
        print_json(as_json(record, run_dir))
    elif quiet:
        print_run_folder(run_dir)
    else:
        render(record, run_dir, out)


def ignore_interruptions() -> None:
    """For the rest of the process, a first Ctrl-C or SIGTERM is noted and the process goes on exiting; a second
    stops it at once (the signal's default), should the exit hang (a Ray cluster that no longer answers). Set from
    the main thread only; elsewhere nothing changes. Through the interpreter's own teardown, which follows, a signal
    not yet noted is ignored (:func:`ignored_through_teardown`)."""
    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGINT, signal.SIGTERM):
            # a signal at its default was noted already (a second stops the process), or never stopped a run
            if signal.getsignal(number) not in (signal.SIG_DFL, signal.SIG_IGN, None):
                signal.signal(number, _noted_once)


def ignored_through_teardown() -> None:
    """At exit, after every other exit function (the command line registers it first; Ray's shutdown, which could
    hang, runs before it): a signal still only to be noted is ignored from here on.

    Once the exit functions have run, Python puts every signal handler set from Python back to the default, except
    an ignored signal's, and then tears its modules down: with torch loaded that takes most of a second, in which a
    scheduler's SIGTERM killed a run that had ended and was recorded, with no word said and exit code 143."""
    if threading.current_thread() is not threading.main_thread():
        return
    for number in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(number) is _noted_once:
            signal.signal(number, signal.SIG_IGN)


def _noted_once(number: int, _frame: object) -> None:
    """Say that an interruption came too late to stop anything (the process goes on to show the result); the next
    one of its kind stops the process at once."""
    signal.signal(number, signal.SIG_DFL)
    print("note: the run has ended and is recorded; exiting (interrupt again to stop at once)", file=sys.stderr)


def exit_interrupted(where: str, exc: KeyboardInterrupt) -> NoReturn:
    """After Ctrl-C or SIGTERM: one line saying where the partial run is kept, and exit code 130 (128 + SIGINT) or
    143 (128 + SIGTERM)."""
    what = str(exc) if isinstance(exc, Terminated) else "interrupted"
    print(f"error: {what}; {where}", file=sys.stderr)
    raise SystemExit(getattr(exc, "exit_code", 130)) from None
