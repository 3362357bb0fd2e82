"""Fingerprints: what identifies a model's weights and settings in cache keys.

A cached image or answer may only be served to the model that made it, so identities are
content-based. A model folder's fingerprint hashes the contents of its config, tokenizer
and weight files: two fine-tunes with the same architecture and file sizes differ. Weight
files can be gigabytes, so their digests come through a :data:`FileDigest` function that
callers memoise (the content cache keeps them by path, size, modification time and inode,
so a folder is read once). A hub snapshot is identified by its commit instead (see
:mod:`auditor.core.weights`). Hidden files and folders (markers, ``.cache``) are left out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Files whose contents are hashed as small files (configs, tokenizers, schedulers, processors).
CONFIG_SUFFIXES = frozenset({".json", ".txt", ".yaml", ".yml", ".model", ".tiktoken"})
#: Weight files: hashed through the (memoised) :data:`FileDigest`.
WEIGHT_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".msgpack", ".h5", ".onnx", ".gguf"})
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
    """sha256 over the relative paths and content digests of a model folder's config and weight files."""
    folder = Path(folder)
    combined = hashlib.sha256()
    for path, kind in _model_files(folder):
        content = hashlib.sha256(path.read_bytes()).hexdigest() if kind == "config" else digest(path)
        combined.update(f"{kind} {path.relative_to(folder).as_posix()} {content}\n".encode())
    return combined.hexdigest()


def _model_files(folder: Path) -> list[tuple[Path, str]]:
    """``(path, 'config' | 'weights')`` of every non-hidden file that decides the model's outputs, sorted."""
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        suffix = path.suffix.lower()
        if suffix in CONFIG_SUFFIXES:
            found.append((path, "config"))
        elif suffix in WEIGHT_SUFFIXES:
            found.append((path, "weights"))
    return found


def hub_fingerprint(revision: str) -> str:
    """Identity of a hub snapshot: its commit pins every file's contents."""
    return hashlib.sha256(f"hub commit {revision}".encode()).hexdigest()


def settings_fingerprint(model_fingerprint: str | None, **settings: Any) -> str:
    """sha256 of a model fingerprint and the settings that change its outputs."""
    payload = json.dumps({"model": model_fingerprint, "settings": settings}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def text_fingerprint(*texts: str) -> str:
    """sha256 of some texts (templates, word lists) whose changes must invalidate cached results."""
    return hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()
