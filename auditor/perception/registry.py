"""Which loader serves which ``--vqa``, ``--embedder``, sentence-embedder and face-detector spec."""

from __future__ import annotations

import json
from pathlib import Path

from auditor.core.registry import Registry

#: transformers ``model_type`` of a local folder -> VQA spec prefix.
_VQA_PREFIX_BY_MODEL_TYPE = {"blip-2": "blip2", "blip": "blip", "instructblip": "instructblip"}


def _model_type(folder: Path) -> str | None:
    config = folder / "config.json"
    if not config.is_file():
        return None
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError):
        return None


def _infer_vqa_folder(text: str) -> str | None:
    """A bare local model folder: BLIP-2/BLIP/InstructBLIP by its config, else the generic image-text-to-text path."""
    model_type = _model_type(Path(text))
    if model_type is None:
        return None
    return f"{_VQA_PREFIX_BY_MODEL_TYPE.get(model_type, 'hf')}:{text}"


def _infer_embedder_folder(text: str) -> str | None:
    return f"clip:{text}" if _model_type(Path(text)) == "clip" else None


VQA_BACKENDS = Registry("VQA", "--vqa", infer=_infer_vqa_folder)
VQA_BACKENDS.register("blip2", "auditor.perception.vqa:load_blip2")
VQA_BACKENDS.register("blip", "auditor.perception.vqa:load_blip")
VQA_BACKENDS.register("instructblip", "auditor.perception.vqa:load_instructblip")
VQA_BACKENDS.register("hf", "auditor.perception.vqa:load_image_text_to_text")
VQA_BACKENDS.register("openai", "auditor.perception.openai_vqa:load", "auditor.perception.openai_vqa:preflight")

EMBEDDERS = Registry("embedder", "--embedder", infer=_infer_embedder_folder)
EMBEDDERS.register("clip", "auditor.perception.clip:load")


def _infer_sentence_folder(text: str) -> str | None:
    """A bare sentence-transformers folder (it has ``modules.json``)."""
    return f"minilm:{text}" if (Path(text) / "modules.json").is_file() else None


#: Sentence embedders for caption selection and near-duplicate prompts (``minilm`` = the bundled all-MiniLM-L6-v2).
SENTENCE_EMBEDDERS = Registry("sentence embedder", "--text-embedder", infer=_infer_sentence_folder)
SENTENCE_EMBEDDERS.register("minilm", "auditor.perception.sentence:load")

#: Face detectors for the one-face filter (``haar`` = OpenCV's bundled frontal-face cascade).
FACE_DETECTORS = Registry("face detector", "--face-detector")
FACE_DETECTORS.register("haar", "auditor.perception.faces:load_haar")
FACE_DETECTORS.register("mediapipe", "auditor.perception.faces:load_mediapipe", "auditor.perception.faces:preflight_mediapipe")
