"""Backend specs (``prefix:rest``) and the registries that map prefixes to loaders.

A spec names a backend and its model: ``diffusers:stabilityai/stable-diffusion-2-1``,
``blip2:/models/blip2``, ``clip:openai/clip-vit-large-patch14``, ``openai:gpt-4o-mini``.
Loaders are registered by dotted path and imported only when used, so listing or
validating specs never imports torch; the one exception is a local folder given to a backend
that loads whatever a library's auto class maps (``hf:``), whose type is checked against the
library's own list (transformers imports torch with it) before the run that loads it anyway.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

from auditor.core.errors import AuditorError


@dataclass(frozen=True)
class Spec:
    """A parsed backend spec."""

    prefix: str
    target: str

    def __str__(self) -> str:
        return f"{self.prefix}:{self.target}" if self.target else self.prefix


@dataclass(frozen=True)
class FolderKind:
    """The kind of local folder a backend loads, told by a file at its root: checking for that file is cheap, so a
    folder of another kind (a CLIP model given as a diffusers pipeline) is refused before a run folder is made for
    it, instead of when the loader reaches it."""

    #: A file every such folder has at its root (``model_index.json`` for a diffusers pipeline).
    marker: str
    #: What the folder is, for messages ("diffusers pipeline").
    name: str
    #: The transformers ``model_type``s (in the marker, a ``config.json``) the backend loads; empty: any. A folder of
    #: another type has the marker too, so only its type tells a CLIP model given to ``blip2:`` before it is loaded.
    model_types: frozenset[str] = frozenset()
    #: Or, for a backend that loads whatever a library's auto class maps, where that mapping is (``module:name``,
    #: its keys the types) and what to call it in a refusal: imported only when a local folder is checked.
    library_types: tuple[str, str] | None = None

    def types_loaded(self) -> tuple[frozenset[str], str]:
        """The model types the backend loads (empty: any), and how a refusal names them."""
        if self.library_types is not None:
            where, name = self.library_types
            return frozenset(_resolve(where)), name
        return self.model_types, quoted_types(self.model_types)

    def model_type(self, folder: Path) -> str | None:
        """The ``model_type`` the folder's marker names; None when it names none or cannot be read (the loader
        then says what is wrong with it)."""
        try:
            found = json.loads((folder / self.marker).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        model_type = found.get("model_type") if isinstance(found, dict) else None
        return model_type if isinstance(model_type, str) else None


def parse_spec(text: str) -> Spec:
    """Split ``prefix:target``; a spec without a colon is a bare prefix (e.g. ``offline``)."""
    text = text.strip()
    if not text:
        raise AuditorError("empty backend spec")
    prefix, _, target = text.partition(":")
    return Spec(prefix.lower(), target.strip())


def looks_like_path(model_id: str) -> bool:
    """Whether ``model_id`` is meant as a local path rather than a hub id."""
    return model_id.startswith((".", "/", "~", "\\")) or re.match(r"^[A-Za-z]:[\\/]", model_id) is not None


def with_absolute_path(text: str) -> str:
    """``text`` with a local-path target made absolute (``diffusers:./sd15``, a bare ``./tiny-vqa``, and
    ``diffusers:models/sd15`` where that folder exists here, as the loaders read it), so that a record that keeps
    it still names the same weights when the run is resumed from another working directory. Hub ids, a service's
    model names (``openai:dall-e-3``, even beside a folder of that name: no folder in it) and a Ray cluster's paths
    (its workers' own, see :func:`_on_a_cluster`) are kept as given."""
    text = text.strip()
    if _on_a_cluster():
        return text
    if looks_like_path(text):
        return os.path.abspath(os.path.expanduser(text))
    spec = parse_spec(text)
    if not (looks_like_path(spec.target) or ("/" in spec.target and _exists(spec.target))):
        return text
    return f"{text.partition(':')[0]}:{os.path.abspath(os.path.expanduser(spec.target))}"


class Registry:
    """Prefix -> ``"module:function"`` of a loader, imported on first use.

    ``infer`` turns a spec without a known prefix (typically a bare local path such as
    ``./tiny-vqa``) into a full spec by looking at the folder, or returns None. A backend
    may also register the :class:`FolderKind` its local folders must be, a ``preflight``: a
    cheap check of what its loader will need (a model name, an API key), run before a study
    generates anything, and an ``identify``: the identity of the weights its loader would
    read, found without loading them (a local model's file digests), which lets a study reuse
    what an earlier load of the same weights said about the model instead of loading it again.
    """

    def __init__(self, kind: str, option: str, infer: Callable[[str], str | None] | None = None):
        self.kind = kind
        self.option = option
        self.infer = infer
        self._loaders: dict[str, str] = {}
        self._preflights: dict[str, str] = {}
        self._identifiers: dict[str, str] = {}
        self._folders: dict[str, FolderKind] = {}
        self._shown: dict[str, str] = {}

    def register(
        self,
        prefix: str,
        loader_path: str,
        preflight_path: str | None = None,
        identify_path: str | None = None,
        bare: bool = False,
        folder: FolderKind | None = None,
    ) -> None:
        """Serve ``prefix`` with the loader at ``loader_path``; ``bare``: the prefix alone is a whole spec (``haar``,
        ``minilm``), which is how an error listing the backends shows it; ``folder``: the kind a local target must
        be."""
        self._loaders[prefix] = loader_path
        if folder is not None:
            self._folders[prefix] = folder
        self._shown[prefix] = prefix if bare else f"{prefix}:..."
        if preflight_path is not None:
            self._preflights[prefix] = preflight_path
        if identify_path is not None:
            self._identifiers[prefix] = identify_path

    @property
    def prefixes(self) -> list[str]:
        return sorted(self._loaders)

    def check(self, text: str) -> Spec:
        """Parse a spec and make sure a backend serves it, without importing that backend."""
        spec = parse_spec(text)
        if spec.prefix in self._loaders:
            return spec
        inferred = self.infer(text.strip()) if self.infer else None
        if inferred is not None:
            return self.check(inferred)
        raise AuditorError(
            f"unknown {self.kind} backend {text.strip()!r} for {self.option}: "
            f"use one of {', '.join(self._shown[p] for p in self.prefixes)} or a local model folder"
        )

    def preflight(self, text: str) -> Spec:
        """:meth:`check`, then the backend's preflight if it has one (an :class:`AuditorError` when it fails).

        Then a target written as a local path (``/models/sd15``, ``./tiny``, ``~/x``) must exist, and a local
        target must be a folder of the backend's :class:`FolderKind`: a typo or a folder of another kind is bad
        input, refused here rather than when the loader reaches it, after a run folder was made for it. Not on a
        Ray cluster (``RAY_ADDRESS``, ``--ray-address``): its workers load the models, from paths on their nodes
        that this machine may not have. A prefix that needs a model and names none (``diffusers:``) is refused
        too, by the backend's preflight where it has its own words for it."""
        spec = self.check(text)
        if spec.prefix in self._preflights:
            _resolve(self._preflights[spec.prefix])(spec)
        if not spec.target and self._shown[spec.prefix] != spec.prefix:  # only a bare prefix (minilm) stands alone
            raise AuditorError(
                f"{self.option} {text.strip()} names no model: give one after the colon, "
                f"e.g. {self.option} {spec.prefix}:<model>"
            )
        if not _on_a_cluster():
            self._check_local(spec)
        return spec

    def _check_local(self, spec: Spec) -> None:
        """Refuse a local path that is not there, or a local folder that lacks its backend's marker file or whose
        marker names a model type the backend does not load."""
        if looks_like_path(spec.target) and not _exists(spec.target):
            raise AuditorError(
                f"{self.option} {spec}: there is no file or folder {spec.target!r}; point it at a local copy of the "
                f"{self.kind} model"
            )
        folder = self._folders.get(spec.prefix)
        local = bool(spec.target) and _exists(spec.target)  # no target: the loader says a model is needed
        if folder is None or not local:
            return
        path = Path(spec.target).expanduser()
        if not (path / folder.marker).is_file():
            raise AuditorError(
                f"{self.option} {spec}: {spec.target!r} is not a {folder.name} folder: it has no {folder.marker}"
            )
        found = folder.model_type(path)
        if found is None or not (folder.model_types or folder.library_types):
            return
        loaded, named = folder.types_loaded()
        if found not in loaded:
            raise AuditorError(f"{self.option} {spec}: {spec.target!r} is a {found!r} model, not {named}")

    def model_types(self, prefix: str) -> frozenset[str] | None:
        """The model types the ``prefix`` backend loads (its :class:`FolderKind`'s), None when it loads any: its
        loader checks them again where this machine's preflight does not reach (a hub id, a Ray worker's path)."""
        folder = self._folders.get(prefix)
        return folder.model_types if folder is not None and folder.model_types else None

    def identify(self, text: str, **options: Any) -> str | None:
        """The identity of the weights the loader of ``text`` would read, without loading them; None when the
        backend cannot tell it beforehand (it has no ``identify``, or the weights are not on this machine)."""
        spec = self.check(text)
        identify = self._identifiers.get(spec.prefix)
        return None if identify is None else _resolve(identify)(spec, **options)

    def load(self, text: str, **options: Any) -> Any:
        """Import the backend serving ``text`` and call its loader with the spec and ``options``."""
        spec = self.check(text)
        return _resolve(self._loaders[spec.prefix])(spec, **options)


def quoted_types(model_types: Collection[str]) -> str:
    """``'blip-2'``, ``'dinov2' or 'dinov2_with_registers'``: the expected types as every refusal names them."""
    return " or ".join(map(repr, sorted(model_types)))


def _exists(path: str) -> bool:
    """Whether ``path`` names a file or folder here (False for a name the system refuses, such as a too long one)."""
    try:
        return Path(path).expanduser().exists()
    except (OSError, ValueError):
        return False


def _on_a_cluster() -> bool:
    """Whether the models may be loaded on other machines: a Ray cluster's address is set."""
    return bool(os.environ.get("RAY_ADDRESS", "").strip())


def _resolve(path: str) -> Callable[..., Any]:
    """The function named by ``"module:function"``, importing its module."""
    module_name, _, function = path.partition(":")
    return getattr(import_module(module_name), function)
