"""Loading model weights: where they are, what identifies them, and one-line errors.

Backends load with ``from_pretrained(id_or_path)``; these helpers

* decide once per process whether the Hugging Face hub can be reached (``HF_HUB_OFFLINE``
  or one short probe), so a model that is not cached fails in seconds instead of after
  the hub client's long retries, and a cached one loads without asking the hub;
* identify the weights for the record and the content cache: a hub snapshot by its
  commit, a local folder by the digests of its files (see :mod:`auditor.core.fingerprint`);
* refuse a checkpoint whose tensors do not match the model (missing, unexpected or
  mismatched keys): the libraries would initialise those layers randomly, and a
  randomly initialised VQA head answers nonsense without a word. ``--allow-partial-weights``
  loads it anyway and the record says what was missing;
* turn the libraries' long ``OSError`` texts into one line naming the model and how to
  point at a local copy.
"""

from __future__ import annotations

import os
import pickle
import re
import threading
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from auditor.core.errors import BackendError
from auditor.core.fingerprint import (
    FileDigest,
    code_fingerprint,
    file_sha256,
    folder_fingerprint,
    settings_fingerprint,
)
from auditor.core.registry import Spec, looks_like_path
from auditor.core.text import first_few
from auditor.records import ModelRef

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_UNREACHABLE_TYPES = frozenset(
    {"LocalEntryNotFoundError", "OfflineModeIsEnabled", "ConnectError", "ConnectionError", "ConnectTimeout"}
)
_UNREACHABLE_TEXT = ("couldn't connect", "offline mode", "not fully cached", "cannot reach", "outgoing traffic")
#: Seconds the one hub probe may take before the hub counts as unreachable.
HUB_PROBE_SECONDS = 3.0
#: Tensor names shown in a partial-weights error (the rest are counted).
KEYS_SHOWN = 3


@dataclass(frozen=True)
class LoadOptions:
    """How a stage loads its model. None of it changes a number except ``allow_partial_weights``,
    which the run records."""

    #: torch device; None = cuda when available, else cpu.
    device: str | None = None
    #: Load a checkpoint whose tensors do not all match the model (missing layers stay random).
    allow_partial_weights: bool = False
    #: How weight files are hashed for the model's identity (the studies memoise it in the cache).
    digest: FileDigest = file_sha256


@dataclass(frozen=True)
class ModelFiles:
    """Where a loaded model's files are, and the hub commit when they came from the hub cache."""

    folder: Path
    revision: str | None


# --------------------------------------------------------------------------- the hub, once


def _offline_variable() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


@lru_cache(maxsize=1)
def hub_reachable() -> bool:
    """Whether the hub answers at all: False under ``HF_HUB_OFFLINE``, else one short probe per process.

    Any HTTP answer counts as reachable; no answer within :data:`HUB_PROBE_SECONDS`
    (name lookup included, so the probe runs in a thread) counts as unreachable, and the
    hub client is then switched to offline mode for the rest of the process, as
    ``HF_HUB_OFFLINE=1`` would have done: otherwise its side requests (e.g. the user-agent
    lookup) wait out their own timeouts before a cached model even loads.
    """
    if _offline_variable():
        return False
    from huggingface_hub import constants

    answered: list[bool] = []

    def probe() -> None:
        try:
            urllib.request.urlopen(constants.ENDPOINT, timeout=HUB_PROBE_SECONDS).close()
            answered.append(True)
        except urllib.error.HTTPError:
            answered.append(True)  # the hub answered, even if not with 200
        except (OSError, ValueError):
            answered.append(False)

    thread = threading.Thread(target=probe, name="hub-probe", daemon=True)
    thread.start()
    thread.join(HUB_PROBE_SECONDS + 0.5)
    if answered and answered[0]:
        return True
    constants.HF_HUB_OFFLINE = True
    return False


def hub_options(model_id: str) -> dict[str, Any]:
    """``from_pretrained`` options: ``local_files_only`` for a hub id when the hub cannot be reached.

    A cached model then loads at once, and one that is not cached fails at once
    (:func:`load_error_message` says how to get it) instead of after the client's retries.
    """
    if Path(model_id).expanduser().is_dir() or looks_like_path(model_id):
        return {}
    return {} if hub_reachable() else {"local_files_only": True}


# --------------------------------------------------------------------------- identity


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


def loaded_model_ref(
    spec: Spec, marker: str, dtype: Any, device: str, options: LoadOptions, partial_weights: list[str] | None = None
) -> ModelRef:
    """The record's reference to the model just loaded from ``spec.target`` in ``dtype`` on ``device``.

    Its fingerprint is content-based: the digests of every file of the local folder or
    hub snapshot (``marker`` is a file at its root); a snapshot's commit is recorded as
    its revision. Weights that cannot be told apart are an error rather than a
    fingerprint that could collide with another model's.
    """
    files = model_files(spec.target, marker)
    if files is None:
        raise BackendError(
            f"cannot tell which weights {spec.target!r} loaded (not a local folder and not in the hub cache), "
            "so its results could not be cached safely; point the option at a local copy of the model"
        )
    fingerprint = folder_fingerprint(files.folder, options.digest)
    return ModelRef(
        spec=str(spec),
        backend=spec.prefix,
        model_id=spec.target,
        revision=files.revision,
        fingerprint=fingerprint,
        dtype=str(dtype).removeprefix("torch."),
        device=device,
        partial_weights=partial_weights or [],
    )


def weights_identity(spec: Spec, marker: str, options: LoadOptions, library: str) -> str | None:
    """What a loader of ``library`` models would read for ``spec``, told without loading: the fingerprint of the
    model's files (the one :func:`loaded_model_ref` records) and the hub revision they came from, the library's
    version (its defaults fill a model's settings in) and auditor's own code (:func:`code_fingerprint`).

    None for a hub id while the hub answers (a load may fetch a newer snapshot than the cached one) and for
    weights that are not on this machine (a load says why).
    """
    from importlib.metadata import version

    model_id = spec.target
    local = bool(model_id) and Path(model_id).expanduser().is_dir()
    if not local and not hub_options(model_id).get("local_files_only"):  # {} for a path, or a hub that answers
        return None
    files = model_files(model_id, marker)
    if files is None:
        return None
    return settings_fingerprint(
        folder_fingerprint(files.folder, options.digest),
        revision=files.revision,
        library=f"{library} {version(library)}",
        code=code_fingerprint(),
    )


def device_kind(device: str | None) -> str | None:
    """``'cuda'`` for ``'cuda:1'``: the kind of device decides the arithmetic, its number does not."""
    return device.split(":", 1)[0] if device else None


def computes_alike(before: ModelRef | None, ref: ModelRef) -> bool:
    """Whether ``ref`` computes what ``before`` computed: the same weights in the same precision on the same kind of
    device, which is what a stage's cache keys on besides its settings (and a resume cannot change those). False when
    ``before`` is unknown or was never loaded."""
    return (
        before is not None
        and before.fingerprint is not None
        and (before.fingerprint, before.dtype, device_kind(before.device))
        == (ref.fingerprint, ref.dtype, device_kind(ref.device))
    )


# --------------------------------------------------------------------------- complete checkpoints


def loading_problems(info: Mapping[str, Any], component: str = "") -> list[str]:
    """What a ``from_pretrained(..., output_loading_info=True)`` report says is wrong, one entry per tensor.

    ``component`` prefixes the names (a pipeline's ``unet``, ``text_encoder``, ...).
    """
    prefix = f"{component}." if component else ""
    problems = [f"missing {prefix}{key}" for key in sorted(info.get("missing_keys") or ())]
    problems += [f"unexpected {prefix}{key}" for key in sorted(info.get("unexpected_keys") or ())]
    for entry in sorted(info.get("mismatched_keys") or (), key=str):
        key, *shapes = entry if isinstance(entry, (tuple, list)) else (entry,)
        shown = f" (checkpoint {tuple(shapes[0])}, model {tuple(shapes[1])})" if len(shapes) == 2 else ""
        problems.append(f"mismatched {prefix}{key}{shown}")
    problems += [f"error {message}" for message in info.get("error_msgs") or ()]
    return problems


def check_complete(what: str, model_id: str, problems: list[str], options: LoadOptions) -> list[str]:
    """Refuse a checkpoint that does not match its model, unless partial weights are allowed.

    Returns the problems (empty for a complete checkpoint) for the record's ``partial_weights``.
    """
    if not problems or options.allow_partial_weights:
        return problems
    shown = first_few(problems, KEYS_SHOWN)
    raise BackendError(
        f"cannot load {what} model {model_id!r}: its checkpoint does not match the model ({shown}); "
        "those layers would be randomly initialised and give meaningless results. Use a complete checkpoint, "
        "or pass --allow-partial-weights to load it anyway (the run records what was missing)"
    )


# --------------------------------------------------------------------------- errors


@contextmanager
def loading_model(
    what: str, model_id: str, hint: str, libraries: tuple[str, ...] = ("transformers",)
) -> Iterator[None]:
    """Where every backend loads its model: ``libraries`` quiet (:func:`quiet_libraries`), the layers a
    checkpoint lacks initialised from a fixed seed (:func:`seeded_initialisation`), and a failure
    as one line naming the model and how to point at a local copy (:func:`explain_load_errors`)."""
    with quiet_libraries(*libraries), seeded_initialisation(), explain_load_errors(what, model_id, hint):
        yield


@contextmanager
def explain_load_errors(what: str, model_id: str, hint: str) -> Iterator[None]:
    """Re-raise a failed ``from_pretrained`` as one :class:`BackendError` line.

    ``what`` names the kind of model ("text-to-image"), ``hint`` says how to point at a
    local copy (e.g. "pass --t2i diffusers:/path/to/local/copy"). RuntimeError covers
    the libraries' refusal of tensors of the wrong shape.
    """
    try:
        yield
    except Exception as exc:
        if not is_load_failure(exc):
            raise
        raise BackendError(load_error_message(what, model_id, hint, exc)) from exc


def is_load_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is how the libraries fail on a model's files: missing or unreadable (OSError), of another
    model or shape (ValueError, RuntimeError), or damaged. transformers lets a damaged ``.safetensors`` file's
    error through as it is (safetensors' own type, named here so that checking it imports nothing) and a damaged
    ``.bin`` file's as pickle's."""
    if isinstance(exc, (OSError, ValueError, RuntimeError, pickle.UnpicklingError)):
        return True
    return any(kind.__name__ == "SafetensorError" for kind in type(exc).__mro__)


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
            f"download it ({download_command()} {model_id}) or {hint}"
        )
    return f"{prefix}: {_first_line(exc)}; {hint}"


@lru_cache(maxsize=1)
def download_command() -> str:
    """The command that downloads a model with the installed huggingface_hub: ``hf download`` from 0.34 on (1.0
    removed ``huggingface-cli``), ``huggingface-cli download`` before."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major, minor = (int(part) for part in re.findall(r"\d+", version("huggingface_hub"))[:2])
    except (PackageNotFoundError, ValueError):
        return "hf download"
    return "hf download" if (major, minor) >= (0, 34) else "huggingface-cli download"


def _unreachable(exc: BaseException) -> bool:
    if not hub_reachable():
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
def seeded_initialisation(seed: int = 0) -> Iterator[None]:
    """Layers a checkpoint lacks are randomly initialised while it loads (``--allow-partial-weights``):
    from ``seed``, so such a run gives the same results every time and its cached results stay
    true. The caller's random state is restored afterwards."""
    import torch

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        yield


@contextmanager
def quiet_libraries(*libraries: str) -> Iterator[None]:
    """Silence the progress bars, advisory log lines and warnings of ``libraries`` while loading.

    ``libraries`` are ``"transformers"`` and/or ``"diffusers"``; ``huggingface_hub`` is
    always included. Loading bars and notices would tangle with the audit's own progress
    display. What matters is not lost: every loader asks for the loading report
    (``output_loading_info``) and :func:`check_complete` turns bad checkpoints into errors.
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
    logging.set_verbosity(logging.CRITICAL)  # their errors too: a failed load raises, and is said in one line
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
