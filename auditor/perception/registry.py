"""Which loader serves which ``--vqa``, ``--embedder``, ``--detector``, ``--segmenter``, sentence-embedder
and face-detector spec."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from auditor.core.errors import AuditorError
from auditor.core.registry import FolderKind, Registry

#: transformers ``model_type`` of a local folder -> VQA spec prefix.
_VQA_PREFIX_BY_MODEL_TYPE = {"blip-2": "blip2", "blip": "blip", "instructblip": "instructblip"}
#: What a local target of a transformers backend must be: a model folder, with the ``config.json`` of its model.
_TRANSFORMERS_FOLDER = FolderKind("config.json", "transformers model")


def _infer_vqa_folder(text: str) -> str | None:
    """A bare local model folder: BLIP-2/BLIP/InstructBLIP by its config, else the generic image-text-to-text path."""
    model_type = _TRANSFORMERS_FOLDER.model_type(Path(text))
    if model_type is None:
        return None
    return f"{_VQA_PREFIX_BY_MODEL_TYPE.get(model_type, 'hf')}:{text}"


#: transformers ``model_type`` of a local folder -> spec prefix, for the options that recognise bare folders.
_EMBEDDER_PREFIX_BY_MODEL_TYPE = {"clip": "clip", "dinov2": "dinov2", "dinov2_with_registers": "dinov2"}
_DETECTOR_PREFIX_BY_MODEL_TYPE = {
    "grounding-dino": "grounding-dino",
    "mm-grounding-dino": "grounding-dino",
    "owlv2": "owlv2",
}
_SEGMENTER_PREFIX_BY_MODEL_TYPE = {"sam": "sam"}


def _infer_by_model_type(prefixes: dict[str, str]) -> Callable[[str], str | None]:
    """A folder inference for :class:`Registry`: the spec prefix its config's ``model_type`` maps to, else None."""

    def infer(text: str) -> str | None:
        prefix = prefixes.get(_TRANSFORMERS_FOLDER.model_type(Path(text)) or "")
        return f"{prefix}:{text}" if prefix else None

    return infer


def _model_folder_of(prefixes: dict[str, str], prefix: str) -> FolderKind:
    """A transformers model folder of the types that ``prefixes`` sends to ``prefix``: the types a bare folder is
    recognised as the backend's are the ones its loader takes, so one table serves both."""
    return replace(_TRANSFORMERS_FOLDER, model_types=frozenset(t for t, p in prefixes.items() if p == prefix))


VQA_BACKENDS = Registry("VQA", "--vqa", infer=_infer_vqa_folder)
#: Every transformers model folder is identified alike (its files, the library, auditor's code).
_TRANSFORMERS_IDENTIFY = "auditor.perception.loading:identify"


def _register_vqa(prefix: str, loader: str, folder: FolderKind | None = None) -> None:
    """A transformers VQA backend: identified by its files; a local target is a model folder of the types that
    :data:`_VQA_PREFIX_BY_MODEL_TYPE` sends to it (unless ``folder`` says otherwise)."""
    folder = folder or _model_folder_of(_VQA_PREFIX_BY_MODEL_TYPE, prefix)
    VQA_BACKENDS.register(prefix, f"auditor.perception.vqa:{loader}", identify_path=_TRANSFORMERS_IDENTIFY, folder=folder)


_register_vqa("blip2", "load_blip2")
_register_vqa("blip", "load_blip")
_register_vqa("instructblip", "load_instructblip")
#: ``hf:`` (and a bare folder of no BLIP type) loads what transformers' image-text-to-text auto class maps: a CLIP
#: folder given as the VQA model is refused before the images are made, not when the loader reaches it.
_register_vqa("hf", "load_image_text_to_text", replace(_TRANSFORMERS_FOLDER, library_types=(
    "transformers.models.auto.modeling_auto:MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "a vision-language model transformers' AutoModelForImageTextToText loads",
)))  # fmt: skip
VQA_BACKENDS.register("openai", "auditor.perception.openai_vqa:load", "auditor.perception.openai_vqa:preflight")

EMBEDDERS = Registry("embedder", "--embedder", infer=_infer_by_model_type(_EMBEDDER_PREFIX_BY_MODEL_TYPE))
EMBEDDERS.register(
    "clip",
    "auditor.perception.clip:load",
    identify_path=_TRANSFORMERS_IDENTIFY,
    folder=_model_folder_of(_EMBEDDER_PREFIX_BY_MODEL_TYPE, "clip"),
)
EMBEDDERS.register(
    "dinov2", "auditor.perception.vision:load_dinov2", folder=_model_folder_of(_EMBEDDER_PREFIX_BY_MODEL_TYPE, "dinov2")
)
EMBEDDERS.register("hf-vision", "auditor.perception.vision:load_vision", folder=_TRANSFORMERS_FOLDER)


def check_needed_embedder(spec: str, need: str) -> None:
    """``--embedder none`` turns embeddings off where a study can go without them (a prompt audit); a study whose
    numbers ``need`` them refuses it in its own words, not as an unknown backend."""
    if spec.strip().lower() == "none":
        raise AuditorError(f"--embedder none: {need}, so this study needs one (clip:<hub id or folder>)")


DETECTORS = Registry("detector", "--detector", infer=_infer_by_model_type(_DETECTOR_PREFIX_BY_MODEL_TYPE))
DETECTORS.register(
    "grounding-dino",
    "auditor.perception.detectors:load_grounding_dino",
    folder=_model_folder_of(_DETECTOR_PREFIX_BY_MODEL_TYPE, "grounding-dino"),
)
DETECTORS.register(
    "owlv2", "auditor.perception.detectors:load_owlv2", folder=_model_folder_of(_DETECTOR_PREFIX_BY_MODEL_TYPE, "owlv2")
)

SEGMENTERS = Registry("segmenter", "--segmenter", infer=_infer_by_model_type(_SEGMENTER_PREFIX_BY_MODEL_TYPE))
SEGMENTERS.register(
    "sam", "auditor.perception.segmenters:load_sam", folder=_model_folder_of(_SEGMENTER_PREFIX_BY_MODEL_TYPE, "sam")
)


def _infer_sentence_folder(text: str) -> str | None:
    """A bare sentence-transformers folder (it has ``modules.json``)."""
    return f"minilm:{text}" if (Path(text) / "modules.json").is_file() else None


#: Sentence embedders for caption selection and near-duplicate prompts (``minilm`` = the bundled all-MiniLM-L6-v2).
SENTENCE_EMBEDDERS = Registry("sentence embedder", "--text-embedder", infer=_infer_sentence_folder)
SENTENCE_EMBEDDERS.register("minilm", "auditor.perception.sentence:load", bare=True)

#: Face detectors for the one-face filter (``haar`` = OpenCV's bundled frontal-face cascade).
FACE_DETECTORS = Registry("face detector", "--face-detector")
FACE_DETECTORS.register(
    "haar", "auditor.perception.faces:load_haar", "auditor.perception.faces:preflight_haar", bare=True
)
FACE_DETECTORS.register("mediapipe", "auditor.perception.faces:load_mediapipe", "auditor.perception.faces:preflight_mediapipe")
