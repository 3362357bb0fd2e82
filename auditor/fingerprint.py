"""Fingerprints of model folders and of model + settings, the model part of cache keys.

A model folder's fingerprint hashes what decides its outputs cheaply: the contents of its
small config/tokenizer files and the names and sizes of its weight files (hashing
gigabytes of weights on every start would cost more than it protects). Hidden files and
folders (markers, ``.cache``) are left out.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

#: Files whose contents are hashed (configs, tokenizers, schedulers, processors).
CONFIG_SUFFIXES = frozenset({".json", ".txt", ".yaml", ".yml", ".model", ".tiktoken"})
#: Files hashed by name and size only (weights).
WEIGHT_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".msgpack", ".h5", ".onnx", ".gguf"})


def folder_fingerprint(folder: Path) -> str:
    """sha256 over the folder's config file contents and weight file names and sizes."""
    folder = Path(folder)
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        suffix = path.suffix.lower()
        if suffix in CONFIG_SUFFIXES:
            digest.update(f"config {relative.as_posix()} {hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
        elif suffix in WEIGHT_SUFFIXES:
            digest.update(f"weights {relative.as_posix()} {path.stat().st_size}\n".encode())
    return digest.hexdigest()


def settings_fingerprint(model_fingerprint: str | None, **settings: Any) -> str:
    """sha256 of a model fingerprint and the settings that change its outputs."""
    payload = json.dumps({"model": model_fingerprint, "settings": settings}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()
