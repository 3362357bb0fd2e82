"""``auditor doctor``: what is installed and usable, without printing any secret."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import typer

from auditor.core.console import out, print_json, say_whole
from auditor.core.redaction import SECRET_VARIABLES, secret_variables

#: Variables doctor always lists, set or not (never their values); any other set variable
#: named like a credential (``*_KEY``, ``*_TOKEN``, ...) is listed after them.
CREDENTIAL_VARIABLES = ("OPENAI_BASE_URL", *SECRET_VARIABLES)


def _torch_status() -> dict:
    try:
        import torch
    except ImportError:
        return {"installed": False}
    status = {"installed": True, "version": torch.__version__, "cuda_available": torch.cuda.is_available()}
    if status["cuda_available"]:
        status["gpu"] = torch.cuda.get_device_name(0)
    return status


def _wordnet_status() -> dict:
    from auditor.core.langdata import find_system_wordnet, wordnet_complete, wordnet_present

    folder = wordnet_present()
    system = find_system_wordnet()
    return {
        "present": folder is not None,
        "complete": folder is not None and wordnet_complete(folder),
        "path": str(folder) if folder else None,
        "system_files": str(system) if system else None,
    }


def _cached_models() -> tuple[list[str], str | None]:
    """Hugging Face hub models in the local cache, where huggingface_hub looks for them (``HF_HUB_CACHE``,
    ``HF_HOME``, ``XDG_CACHE_HOME``, ...), and why the cache could not be read (a shared cache this user may not
    read: doctor reports it rather than crash on it)."""
    from huggingface_hub import constants

    folder = Path(constants.HF_HUB_CACHE)
    try:
        if not folder.is_dir():
            return [], None
        models = [p for p in folder.glob("models--*") if (p / "snapshots").is_dir()]  # a model folder holds snapshots
    except OSError as exc:
        return [], f"cannot read {folder} ({exc.strerror or exc})"
    return sorted(p.name.removeprefix("models--").replace("--", "/") for p in models), None


def collect() -> dict:
    from auditor.core.langdata import english_stopwords
    from auditor.core.settings import get_settings

    settings = get_settings()
    models, models_error = _cached_models()
    return {
        "python": platform.python_version(),
        "torch": _torch_status(),
        "wordnet": _wordnet_status(),
        "stopwords": len(english_stopwords()),
        "credentials": {
            **{name: bool(os.environ.get(name)) for name in CREDENTIAL_VARIABLES},
            **{name: True for name in secret_variables() if name not in CREDENTIAL_VARIABLES},
        },
        "cached_models": models,
        "cached_models_error": models_error,
        "home": str(settings.home.resolve()),
        "runs_dir": str(settings.runs_dir.resolve()),
    }


def doctor(json_output: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Report Python, torch and CUDA, WordNet, stopwords, API keys (set or not) and cached models."""
    report = collect()
    if json_output:
        print_json(report)
        return
    torch = report["torch"]
    torch_line = (
        f"{torch['version']}, CUDA {'available: ' + torch.get('gpu', '') if torch['cuda_available'] else 'not available'}"
        if torch["installed"]
        else "not installed (model backends need it: pip install 'auditor[ml]')"
    )
    wordnet = report["wordnet"]
    wordnet_line = (
        f"present ({wordnet['path']})"
        if wordnet["complete"]
        else f"incomplete or damaged ({wordnet['path']}); run `auditor setup`"
        if wordnet["present"]
        else f"missing; run `auditor setup`{' (system files found)' if wordnet['system_files'] else ''}"
    )
    models = report["cached_models"]
    rows = [
        ("python", report["python"]),
        ("torch", torch_line),
        ("wordnet", wordnet_line),
        ("stopwords", f"{report['stopwords']} English words"),
        *((name, "set" if is_set else "not set") for name, is_set in report["credentials"].items()),
        (f"cached models ({len(models)})", report["cached_models_error"] or ", ".join(models) or "none"),
        ("home", report["home"]),
        ("runs", report["runs_dir"]),
    ]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        say_whole(out, f"{label:<{width}}  {value}")  # paths whole


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
