"""Fingerprints: what identifies a model's weights and settings in cache keys.

A cached image or answer may only be served to the model that made it, so identities are
content-based. A model folder's fingerprint hashes the contents of every file in it (configs,
tokenizers, chat templates, weights), symlinked subfolders included: two fine-tunes with the
same architecture and file sizes differ. Weight files can be gigabytes, so their digests come
through a :data:`FileDigest` function that callers memoise (the content cache keeps them by
path, size, modification and change time and inode, so a folder is read once). A hub
snapshot is hashed like any folder: its commit name says nothing once a file in it was
edited, or when a folder elsewhere only looks like a snapshot. Hidden files and folders
(markers, ``.cache``) are left out.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

#: Files whose contents are hashed as small files (configs, tokenizers, schedulers, processors).
CONFIG_SUFFIXES = frozenset({".json", ".txt", ".yaml", ".yml", ".model", ".tiktoken"})
#: Weight files: hashed through the (memoised) :data:`FileDigest`.
WEIGHT_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".msgpack", ".h5", ".onnx", ".gguf"})
#: Documentation beside the model, which decides none of its outputs.
DOCUMENT_SUFFIXES = frozenset({".md", ".rst"})
#: Bytes read per step while hashing a file.
CHUNK = 1 << 20

#: ``path -> sha256 hex digest`` of a file's bytes.
FileDigest = Callable[[Path], str]


def file_sha256(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    """sha256 of a file's bytes, read in 1 MiB chunks; ``on_bytes`` hears how many bytes each chunk had."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            if on_bytes is not None:
                on_bytes(len(chunk))
    return digest.hexdigest()


def folder_fingerprint(folder: Path, digest: FileDigest = file_sha256) -> str:
    """sha256 over the relative paths and content digests of every file of a model folder."""
    folder = Path(folder)
    combined = hashlib.sha256()
    for path, kind in _model_files(folder):
        content = hashlib.sha256(path.read_bytes()).hexdigest() if kind == "config" else digest(path)
        combined.update(f"{kind} {path.relative_to(folder).as_posix()} {content}\n".encode())
    return combined.hexdigest()


def _model_files(folder: Path) -> list[tuple[Path, str]]:
    """``(path, kind)`` of every file under ``folder`` but hidden ones and documentation, sorted by relative path.

    ``kind`` is ``config`` for the small text files read whole, ``weights`` for weight files
    and ``other`` for any other file (a chat template, a tokenizer model of a new format),
    both through the memoised digest. Symlinked folders are followed (a pipeline may link
    its ``unet`` elsewhere), each real folder once.
    """
    found = []
    seen: set[str] = set()
    for here, folders, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(here)
        if real in seen:  # a link back up the tree
            folders[:] = []
            continue
        seen.add(real)
        folders[:] = [name for name in folders if not name.startswith(".")]
        for name in files:
            path = Path(here) / name
            suffix = path.suffix.lower()
            if name.startswith(".") or suffix in DOCUMENT_SUFFIXES or not path.is_file():
                continue
            kind = "config" if suffix in CONFIG_SUFFIXES else "weights" if suffix in WEIGHT_SUFFIXES else "other"
            found.append((path, kind))
    return sorted(found, key=lambda entry: entry[0].relative_to(folder).parts)


def settings_fingerprint(model_fingerprint: str | None, **settings: Any) -> str:
    """sha256 of a model fingerprint and the settings that change its outputs."""
    payload = json.dumps({"model": model_fingerprint, "settings": settings}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def text_fingerprint(*texts: str) -> str:
    """sha256 of some texts (templates, word lists) whose changes must invalidate cached results."""
    return hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """:func:`source_fingerprint` of auditor's own package, once per process: what a description of a loaded model
    kept across processes depends on besides the model (the prompt templates written in the code, settings schemas,
    the rules of cache keys)."""
    return source_fingerprint(Path(__file__).resolve().parent.parent)


def source_fingerprint(package: Path) -> str:
    """sha256 over the relative paths and contents of the Python files under ``package``. Editors' lock and backup
    files (hidden, or not regular files: Emacs' ``.#name.py`` is a dangling link) and a file that cannot be read
    are left out."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        if path.name.startswith(".") or not path.is_file():
            continue
        try:
            content = path.read_bytes()
        except OSError:
            continue
        digest.update(f"{path.relative_to(package).as_posix()}\n".encode())
        digest.update(hashlib.sha256(content).digest())
    return digest.hexdigest()
