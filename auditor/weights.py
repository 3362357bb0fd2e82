"""Finding a model's files and explaining, in one line, why a model could not be loaded.

Backends load with ``from_pretrained(id_or_path)``; these helpers turn the libraries'
long ``OSError`` texts into one actionable line (which model, and how to point at a
local copy) and find the folder the weights came from, with its hub revision, for the
record and the fingerprint.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.backends import Spec
from auditor.errors import BackendError
from auditor.fingerprint import folder_fingerprint
from auditor.records import ModelRef

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_UNREACHABLE_TYPES = frozenset(
    {"LocalEntryNotFoundError", "OfflineModeIsEnabled", "ConnectError", "ConnectionError", "ConnectTimeout"}
)
_UNREACHABLE_TEXT = ("couldn't connect", "offline mode", "not fully cached", "cannot reach", "outgoing traffic")


@dataclass(frozen=True)
class ModelFiles:
    """Where a loaded model's files are, and the hub commit when they came from the hub cache."""

    folder: Path
    revision: str | None


def looks_like_path(model_id: str) -> bool:
    """Whether ``model_id`` is meant as a local path rather than a hub id."""
    return model_id.startswith((".", "/", "~", "\\")) or re.match(r"^[A-Za-z]:[\\/]", model_id) is not None


def model_files(model_id: str, marker: str) -> ModelFiles | None:
    """The local folder or hub cache snapshot holding ``model_id`` (``marker`` is a file at its root)."""
    local = Path(model_id).expanduser()
    if local.is_dir():
        folder = local.resolve()
    else:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model_id, marker)
        if not isinstance(cached, str):
            return None
        folder = Path(cached).parent
    # A hub cache snapshot is ``.../snapshots/<commit>/``, also when given as a path.
    revision = folder.name if folder.parent.name == "snapshots" and _COMMIT.match(folder.name) else None
    return ModelFiles(folder=folder, revision=revision)


def loaded_model_ref(spec: Spec, marker: str, dtype: Any, device: str) -> ModelRef:
    """The record's reference to the model just loaded from ``spec.target`` in ``dtype`` on ``device``.

    Every ``from_pretrained`` backend records the same things: the folder's hub revision
    and fingerprint when its files are found locally (``marker`` is a file at its root).
    """
    files = model_files(spec.target, marker)
    return ModelRef(
        spec=str(spec),
        backend=spec.prefix,
        model_id=spec.target,
        revision=files.revision if files else None,
        fingerprint=folder_fingerprint(files.folder) if files else None,
        dtype=str(dtype).removeprefix("torch."),
        device=device,
    )


@contextmanager
def explain_load_errors(what: str, model_id: str, hint: str) -> Iterator[None]:
    """Re-raise a failed ``from_pretrained`` as one :class:`BackendError` line.

    ``what`` names the kind of model ("text-to-image"), ``hint`` says how to point at a
    local copy (e.g. "pass --t2i diffusers:/path/to/local/copy").
    """
    try:
        yield
    except (OSError, ValueError) as exc:
        raise BackendError(load_error_message(what, model_id, hint, exc)) from exc


def load_error_message(what: str, model_id: str, hint: str, exc: BaseException) -> str:
    """The one line that says which model failed, why, and what to do."""
    prefix = f"cannot load {what} model {model_id!r}"
    local = Path(model_id).expanduser()
    if local.exists():
        return f"{prefix}: {_first_line(exc)}"
    if looks_like_path(model_id):
        return f"{prefix}: no such folder; {hint}"
    if _unreachable(exc):
        return (
            f"{prefix}: not in the local Hugging Face cache and the hub is unreachable; "
            f"download it (huggingface-cli download {model_id}) or {hint}"
        )
    return f"{prefix}: {_first_line(exc)}; {hint}"


def _unreachable(exc: BaseException) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        return True
    seen: BaseException | None = exc
    while seen is not None:
        if type(seen).__name__ in _UNREACHABLE_TYPES or any(t in str(seen).lower() for t in _UNREACHABLE_TEXT):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0].rstrip(".") if text else type(exc).__name__


def dtype_keyword(library: str) -> str:
    """The ``from_pretrained`` keyword for the weights' dtype: ``dtype`` where supported, else ``torch_dtype``.

    Recent diffusers and transformers deprecate ``torch_dtype``; older ones (which the
    package still allows) silently ignore ``dtype``, so the choice must follow the version.
    """
    if library == "diffusers":
        try:
            from diffusers.utils import deprecation_utils
        except ImportError:
            return "torch_dtype"
        return "dtype" if hasattr(deprecation_utils, "_resolve_dtype") else "torch_dtype"
    from importlib.metadata import version

    major, minor = (int(part) for part in version("transformers").split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


@contextmanager
def quiet_libraries(*libraries: str) -> Iterator[None]:
    """Silence the progress bars, advisory log lines and warnings of ``libraries`` while loading.

    ``libraries`` are ``"transformers"`` and/or ``"diffusers"``; ``huggingface_hub`` is
    always included. Loading bars and notices would tangle with the audit's own progress
    display; real failures still raise.
    """
    with ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", FutureWarning)
        stack.enter_context(_quiet_hub())
        # transformers before diffusers: importing diffusers logs transformers notices.
        for library in sorted(libraries, reverse=True):
            stack.enter_context(_quiet(library))
        yield


@contextmanager
def _quiet(library: str) -> Iterator[None]:
    from importlib import import_module

    logging = import_module(f"{library}.utils.logging")
    verbosity, bars_on = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars_on:
            logging.enable_progress_bar()


@contextmanager
def _quiet_hub() -> Iterator[None]:
    from huggingface_hub import utils

    verbosity, bars_off = utils.logging.get_verbosity(), utils.are_progress_bars_disabled()
    utils.logging.set_verbosity_error()
    utils.disable_progress_bars()
    try:
        yield
    finally:
        utils.logging.set_verbosity(verbosity)
        if not bars_off:
            utils.enable_progress_bars()
