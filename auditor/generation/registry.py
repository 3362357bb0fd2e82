"""Which loader serves which ``--t2i`` spec."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from auditor.core.registry import FolderKind, Registry, Spec

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import GenerationSettings

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


def preflight_t2i(text: str, settings: GenerationSettings) -> Spec:
    """:meth:`Registry.preflight` for ``--t2i``, then refuse generation settings its model cannot take (steps for the
    Images API, say), all before a run folder is made for them: the run would keep them, and a resume would stop
    the same way."""
    spec = T2I_BACKENDS.preflight(text)
    if spec.prefix == "openai":
        from auditor.generation.openai_images import check_settings

        check_settings(spec, settings)
    return spec
