"""Tiny randomly initialised models for the self-test and the test suite.

No weights can be downloaded here, so ``build_tiny_models`` builds a text-to-image
pipeline, a BLIP-2 VQA model and a CLIP model from small configs, with tokenizers
trained on the fly, and saves them with ``save_pretrained``. Loading them then goes
through exactly the ``from_pretrained(path)`` code real checkpoints use. Their outputs
are meaningless; they check that the installation and the code paths work.

Building is seeded (the same folder twice holds the same weights) and idempotent: each
model is built in a temporary sibling folder, marked complete last, then renamed into
place, so an interrupted build is redone and a finished one is reused.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from auditor.core.weights import quiet_libraries

#: Written last into a finished model folder; its presence means "complete, reuse it".
COMPLETE_MARKER = ".auditor-tiny-complete"
#: Base seed of every random initialisation.
SEED = 0


@dataclass(frozen=True)
class TinyModels:
    """Folders of the tiny models, each loadable by ``from_pretrained``."""

    #: diffusers pipeline folder (``model_index.json``) for ``--t2i diffusers:<path>``.
    t2i: Path
    #: BLIP-2 model + processor folder for ``--vqa <path>``.
    vqa: Path
    #: CLIP model + processor folder for ``--embedder clip:<path>``.
    clip: Path


def build_tiny_models(folder: Path) -> TinyModels:
    """Build (or reuse) the tiny models under ``folder`` and return their folders."""
    from auditor.tiny.clip import build_clip
    from auditor.tiny.diffusion import build_diffusion
    from auditor.tiny.vqa import build_vqa

    folder = Path(folder)
    models = TinyModels(t2i=folder / "t2i", vqa=folder / "vqa", clip=folder / "clip")
    _build_once(models.clip, build_clip)
    _build_once(models.t2i, build_diffusion)
    _build_once(models.vqa, build_vqa)
    return models


@dataclass(frozen=True)
class TinyTracingModels:
    """Folders of the tiny models prompt-to-image tracing adds, each loadable by ``from_pretrained``."""

    #: diffusers pipeline folder with cross-attention at two UNet resolutions (``--t2i diffusers:<path>``).
    t2i: Path
    #: DINOv2 backbone + image processor (``--embedder dinov2:<path>``).
    dinov2: Path
    #: ViT backbone without pooler weights, as DINO ViT checkpoints (``hf-vision:<path>``).
    vit: Path
    #: Grounding DINO detector + processor (``--detector grounding-dino:<path>``).
    grounding_dino: Path
    #: OWLv2 detector + processor (``--detector owlv2:<path>``).
    owlv2: Path
    #: Segment Anything + processor (``--segmenter sam:<path>``).
    sam: Path


def build_tiny_tracing_models(folder: Path) -> TinyTracingModels:
    """Build (or reuse) the tiny tracing models under ``folder`` (a few seconds) and return their folders."""
    from auditor.tiny.diffusion import build_tracing_diffusion
    from auditor.tiny.perception import (
        build_dinov2,
        build_grounding_dino,
        build_owlv2,
        build_sam,
        build_vit_without_pooler,
    )

    folder = Path(folder)
    builders = {
        "t2i": build_tracing_diffusion,
        "dinov2": build_dinov2,
        "vit": build_vit_without_pooler,
        "grounding_dino": build_grounding_dino,
        "owlv2": build_owlv2,
        "sam": build_sam,
    }
    for name, build in builders.items():
        _build_once(folder / name, build)
    return TinyTracingModels(**{name: folder / name for name in builders})


def _build_once(target: Path, build: Callable[[Path, int], None]) -> None:
    """Run ``build`` into a temporary sibling of ``target`` unless ``target`` is already complete."""
    if (target / COMPLETE_MARKER).is_file():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        with quiet_libraries("transformers", "diffusers"):
            build(staging, SEED)
        (staging / COMPLETE_MARKER).write_text("built by auditor.tiny\n", encoding="utf-8")
        if target.exists():  # an interrupted earlier build
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
