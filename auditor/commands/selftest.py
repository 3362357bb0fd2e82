"""``auditor selftest``: the whole prompt audit on tiny random models, offline, to check an installation."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    from auditor.studies.prompt_audit import PromptAuditOptions

SELFTEST_PROMPT = "a photo of a pharmacist"


def selftest(
    out_dir: Path | None = typer.Option(None, "--out", help="Folder for the tiny models and the run (default: a new temp folder)."),
    images: int = typer.Option(4, "--images", min=1, help="Images per prompt (4, the fewest that get intervals)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars or report."),
) -> None:
    """Build tiny random models (no downloads) and run `auditor prompt` through the real loading code.

    The scores are meaningless: the models are random. A pass means the installation works.
    """
    from auditor.commands.prompt import show_results
    from auditor.core.cache import ContentCache
    from auditor.core.console import err, out, say_whole
    from auditor.core.store import RunStore, write_problem
    from auditor.records import GenerationSettings, PerceptionSettings
    from auditor.studies.progress import QuietProgress, RichProgress
    from auditor.studies.prompt_audit import PromptAuditOptions, start_audit
    from auditor.tiny import build_tiny_models

    folder = out_dir or Path(tempfile.mkdtemp(prefix="auditor-selftest-"))
    models_dir = folder / "models"
    try:
        models_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        standing = models_dir.exists() and not models_dir.is_dir()
        why = f"{models_dir} is not a folder" if standing else write_problem(models_dir, exc)
        raise AuditorError(f"cannot write the selftest folder {folder}: {why}") from None
    say_whole(out, f"selftest folder: {folder}")
    out.print("Building tiny randomly initialised models (no downloads).")
    out.print("Their scores are MEANINGLESS; it checks the installation, not a model's bias.")  # < 80 columns
    try:
        models = build_tiny_models(models_dir)
    except OSError as exc:  # a folder that takes no new files (read-only, full)
        raise AuditorError(f"cannot write the tiny models into {models_dir}: {exc.strerror or exc}") from None
    options = PromptAuditOptions(
        prompt=SELFTEST_PROMPT,
        llm="offline",
        t2i=f"diffusers:{models.t2i}",
        vqa=f"blip2:{models.vqa}",
        embedder=f"clip:{models.clip}",
        embedder_required=True,
        images=images,
        generation=GenerationSettings(steps=2, batch_size=4),
        perception=PerceptionSettings(max_new_tokens=6, caption_max_new_tokens=8),
        max_axes=2,
        max_counterfactuals=2,
    )
    progress = QuietProgress() if quiet else RichProgress(err)
    # A cache of its own, gone after: every model runs, so a pass says the installed libraries work now, not
    # that an earlier selftest into the same folder once did (the cache does not key on library versions).
    with tempfile.TemporaryDirectory(prefix="auditor-selftest-cache-") as cache_folder:
        cache = ContentCache(Path(cache_folder) / "cache.sqlite")
        try:
            audit = start_audit(options, RunStore(folder / "runs"), cache, progress, run_name=None)
            record = audit.run()
        finally:
            cache.close()
    show_results(record, audit.run_dir, quiet=quiet, json_output=False)
    out.print("selftest passed" + ("" if quiet else "; the scores above are meaningless by design"))
    if not quiet:
        say_whole(out, f"To try other options on these tiny models, start from the same audit: {_command(options)}")


def _command(options: PromptAuditOptions) -> str:
    """The ``auditor prompt`` line of the selftest's audit: its models with its small settings (the commands'
    defaults, 50 steps and up to 6 axes, take minutes on a CPU even with tiny models)."""
    import shlex

    generation = options.generation
    words = [
        "auditor", "prompt", options.prompt, "--llm", options.llm, "--t2i", options.t2i, "--vqa", options.vqa,
        "--embedder", options.embedder, "--images", str(options.images), "--steps", str(generation.steps),
        "--batch-size", str(generation.batch_size), "--max-axes", str(options.max_axes),
        "--max-counterfactuals", str(options.max_counterfactuals),
    ]  # fmt: skip
    return shlex.join(words)


def register(app: typer.Typer) -> None:
    app.command("selftest")(selftest)
