"""Which loader serves which ``--t2i`` spec."""

from __future__ import annotations

from pathlib import Path

from auditor.core.registry import FolderKind, Registry

#: What a local ``diffusers:`` target must be: a pipeline folder, which ``save_pretrained`` gives a model index.
PIPELINE_FOLDER = FolderKind("model_index.json", "diffusers pipeline")


def _infer_local_folder(text: str) -> str | None:
    """A bare path to a diffusers pipeline folder (one with ``model_index.json``) means ``diffusers:<path>``."""
    return f"diffusers:{text}" if (Path(text) / PIPELINE_FOLDER.marker).is_file() else None


T2I_BACKENDS = Registry("text-to-image", "--t2i", infer=_infer_local_folder)
T2I_BACKENDS.register(
    "diffusers",
    "auditor.generation.diffusers_backend:load",
    identify_path="auditor.generation.diffusers_backend:identify",
    folder=PIPELINE_FOLDER,
)
T2I_BACKENDS.register("openai", "auditor.generation.openai_images:load", "auditor.generation.openai_images:preflight")
T2I_BACKENDS.register("folder", "auditor.generation.folder:load", "auditor.generation.folder:preflight")
