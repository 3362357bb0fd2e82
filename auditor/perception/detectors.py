"""Open-vocabulary object detectors: ``grounding-dino:<id>`` and ``owlv2:<id>`` through transformers.

Prompt-to-image tracing asks which objects appear in each image and where (the paper's
Grounded-SAM step). A :class:`Detector` takes images and one vocabulary of labels (nouns)
shared by all of them, so the image sets it compares are searched for the same things,
and returns per image the detections above its box threshold: label, score and box
(x0, y0, x1, y1) in the image's pixels, best first.

* **Grounding DINO** reads the labels as one caption, ``"label one. label two."``. A query
  box is kept when its highest token probability exceeds ``box_threshold`` (the
  processor's and the original repository's rule) and is labelled with the label whose
  tokens reach the highest probability, if that exceeds ``text_threshold``. The
  processor's own post-processing decodes the tokens above ``text_threshold`` into a
  phrase instead, which can merge two labels or cut one ("pharma"); per-label scores give
  every box exactly one of the requested labels.
* **OWLv2** scores every label as its own text query; the processor's post-processing
  keeps boxes whose best label scores above ``box_threshold`` (OWLv2 has no text threshold).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from auditor.core.errors import AuditorError
from auditor.core.fingerprint import settings_fingerprint
from auditor.core.registry import Spec
from auditor.core.weights import LoadOptions, device_kind
from auditor.perception.loading import LoadedModel, check_batch_size, load_pretrained, on_model
from auditor.perception.registry import DETECTORS
from auditor.records import ModelRef

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from PIL import Image

#: (x0, y0, x1, y1) in pixels of the image, x to the right and y down.
Box = tuple[float, float, float, float]

_WHAT = "object detector"
_OPTION = "--detector"
#: Grounding DINO's demo thresholds (also Grounded-SAM's defaults).
GROUNDING_DINO_BOX_THRESHOLD = 0.35
GROUNDING_DINO_TEXT_THRESHOLD = 0.25
#: OWLv2's scores are lower than Grounding DINO's; 0.1 is its processor's default.
OWLV2_BOX_THRESHOLD = 0.1


@dataclass(frozen=True)
class Detection:
    """One object found in an image."""

    label: str
    score: float
    box: Box


class Detector(Protocol):
    """An open-vocabulary object detector."""

    ref: ModelRef
    #: Boxes scoring at or below it are dropped.
    box_threshold: float

    def cache_fingerprint(self) -> str:
        """Model fingerprint plus every setting that changes a detection (thresholds, labelling rule)."""
        ...

    def detect(self, images: Sequence[Image.Image], labels: Sequence[str]) -> list[list[Detection]]:
        """Per image, the detections of ``labels`` (lower-cased) above the threshold, best first."""
        ...


class _TransformersDetector:
    """Shared parts: model, processor, batching, thresholds."""

    #: How boxes are kept and labelled, for the cache key.
    rule = ""

    def __init__(self, model: Any, processor: Any, ref: ModelRef, box_threshold: float, batch_size: int = 8):
        _check_threshold("box", box_threshold)
        check_batch_size(batch_size, "the detector")
        self.model = model
        self.processor = processor
        self.ref = ref
        self.box_threshold = box_threshold
        self.batch_size = batch_size

    def _settings(self) -> dict[str, Any]:
        return {"box_threshold": self.box_threshold}

    def cache_fingerprint(self) -> str:
        return settings_fingerprint(
            self.ref.fingerprint,
            dtype=self.ref.dtype,
            device=device_kind(self.ref.device),
            rule=self.rule,
            **self._settings(),
        )

    def detect(self, images: Sequence[Image.Image], labels: Sequence[str]) -> list[list[Detection]]:
        import torch

        vocabulary = _vocabulary(labels)
        found: list[list[Detection]] = []
        for start in range(0, len(images), self.batch_size):
            batch = [image.convert("RGB") for image in images[start : start + self.batch_size]]
            inputs = self._inputs(batch, vocabulary)
            inputs = on_model(inputs, self.model)
            with torch.inference_mode():
                outputs = self.model(**inputs)
            sizes = [(image.height, image.width) for image in batch]
            found += [sorted(row, key=lambda d: -d.score) for row in self._detections(outputs, vocabulary, sizes)]
        return found

    def _inputs(self, images: list[Image.Image], vocabulary: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def _detections(self, outputs: Any, vocabulary: list[str], sizes: list[tuple[int, int]]) -> list[list[Detection]]:
        raise NotImplementedError


class GroundingDinoDetector(_TransformersDetector):
    """Grounding DINO (``AutoModelForZeroShotObjectDetection``) with per-label token scores."""

    rule = (
        "box: max token probability > box_threshold; "
        "label: argmax over labels of max token probability > text_threshold"
    )

    def __init__(
        self,
        model: Any,
        processor: Any,
        ref: ModelRef,
        box_threshold: float = GROUNDING_DINO_BOX_THRESHOLD,
        text_threshold: float = GROUNDING_DINO_TEXT_THRESHOLD,
        batch_size: int = 8,
    ):
        super().__init__(model, processor, ref, box_threshold, batch_size)
        _check_threshold("text", text_threshold)
        self.text_threshold = text_threshold

    def _settings(self) -> dict[str, Any]:
        return {"box_threshold": self.box_threshold, "text_threshold": self.text_threshold}

    def _inputs(self, images: list[Image.Image], vocabulary: list[str]) -> dict[str, Any]:
        inputs = dict(self.processor(images=images, text=[caption(vocabulary)] * len(images), return_tensors="pt"))
        limit = self.model.config.max_text_len
        if inputs["input_ids"].shape[-1] > limit:
            raise AuditorError(f"too many labels for one Grounding DINO caption (over {limit} tokens); pass fewer")
        return inputs

    def _detections(self, outputs: Any, vocabulary: list[str], sizes: list[tuple[int, int]]) -> list[list[Detection]]:
        positions = label_token_positions(self.processor.tokenizer, vocabulary)
        return grounded_detections(
            outputs.logits.float(), outputs.pred_boxes.float(), positions, vocabulary, sizes,
            self.box_threshold, self.text_threshold,
        )


class Owlv2Detector(_TransformersDetector):
    """OWLv2 (``AutoModelForZeroShotObjectDetection``), one text query per label."""

    rule = "owlv2 post_process_object_detection: best label score > box_threshold"

    def _inputs(self, images: list[Image.Image], vocabulary: list[str]) -> dict[str, Any]:
        return dict(self.processor(text=[vocabulary] * len(images), images=images, return_tensors="pt"))

    def _detections(self, outputs: Any, vocabulary: list[str], sizes: list[tuple[int, int]]) -> list[list[Detection]]:
        # OWLv2 pads images to squares; its post-processing scales boxes to the padded side, so
        # boxes may reach past the image and are clipped to it.
        results = self.processor.image_processor.post_process_object_detection(
            outputs, threshold=self.box_threshold, target_sizes=sizes
        )
        return [
            [
                Detection(vocabulary[int(label)], float(score), clip_box(box.tolist(), size))
                for score, label, box in zip(result["scores"], result["labels"], result["boxes"])
            ]
            for result, size in zip(results, sizes)
        ]


# --------------------------------------------------------------------------- pure parts


def caption(vocabulary: Sequence[str]) -> str:
    """Grounding DINO's caption for a vocabulary: labels joined by ``". "``, ending in ``"."``."""
    return ". ".join(vocabulary) + "."


def label_token_positions(tokenizer: Any, vocabulary: Sequence[str]) -> list[list[int]]:
    """Per label, the positions of its tokens in the tokenized :func:`caption` (a fast tokenizer's offsets)."""
    text = caption(vocabulary)
    offsets = tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    positions: list[list[int]] = []
    start = 0
    for label in vocabulary:
        end = start + len(label)
        positions.append([i for i, (a, b) in enumerate(offsets) if b > a and a >= start and b <= end])
        if not positions[-1]:
            raise AuditorError(f"the detector's tokenizer gives no token for the label {label!r}")
        start = end + 2  # ". "
    return positions


def grounded_detections(
    logits: torch.Tensor,
    boxes: torch.Tensor,
    positions: Sequence[Sequence[int]],
    vocabulary: Sequence[str],
    sizes: Sequence[tuple[int, int]],
    box_threshold: float,
    text_threshold: float,
) -> list[list[Detection]]:
    """Grounding DINO's raw outputs -> detections (see the module docstring for the rule).

    ``logits`` (images, queries, text positions) are token logits, ``boxes`` (images,
    queries, 4) are (cx, cy, w, h) relative to the image, ``positions[k]`` are the token
    positions of ``vocabulary[k]``, ``sizes`` the images' (height, width).
    """
    import torch

    probabilities = logits.sigmoid()
    box_scores = probabilities.max(dim=-1).values
    label_scores = torch.stack([probabilities[..., list(p)].max(dim=-1).values for p in positions], dim=-1)
    best_scores, best = label_scores.max(dim=-1)
    cx, cy, w, h = boxes.unbind(-1)
    corners = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=-1)
    found = []
    for image, (height, width) in enumerate(sizes):
        keep = ((box_scores[image] > box_threshold) & (best_scores[image] > text_threshold)).nonzero().flatten()
        scale = torch.tensor([width, height, width, height], dtype=corners.dtype, device=corners.device)
        found.append(
            [
                Detection(
                    vocabulary[int(best[image, q])],
                    float(box_scores[image, q]),
                    clip_box((corners[image, q] * scale).tolist(), (height, width)),
                )
                for q in keep.tolist()
            ]
        )
    return found


def clip_box(box: Sequence[float], size: tuple[int, int]) -> Box:
    """``box`` limited to an image of ``size`` = (height, width)."""
    height, width = size
    x0, y0, x1, y1 = box
    return (min(max(x0, 0.0), width), min(max(y0, 0.0), height), min(max(x1, 0.0), width), min(max(y1, 0.0), height))


def _vocabulary(labels: Sequence[str]) -> list[str]:
    """Labels lower-cased and trimmed, repeats dropped (first kept); none empty or containing '.'."""
    vocabulary = list(dict.fromkeys(label.strip().lower() for label in labels))
    if not vocabulary:
        raise AuditorError("the detector needs at least one label to look for")
    bad = [label for label in vocabulary if not label or "." in label]
    if bad:
        raise AuditorError(f"detector labels must be non-empty and contain no '.': {', '.join(map(repr, bad))}")
    return vocabulary


def _check_threshold(kind: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise AuditorError(f"the detector's {kind} threshold must be between 0 and 1 (got {value})")


# --------------------------------------------------------------------------- loaders


def _load_detector(spec: Spec, options: LoadOptions) -> LoadedModel:
    """The zero-shot detection model and processor ``spec`` names (both detector families load the same way)."""
    return load_pretrained(
        spec,
        options,
        what=_WHAT,
        option=_OPTION,
        model_class="AutoModelForZeroShotObjectDetection",
        processor_class="AutoProcessor",
        model_types=DETECTORS.model_types(spec.prefix),
    )


def load_grounding_dino(
    spec: Spec,
    options: LoadOptions = LoadOptions(),
    box_threshold: float | None = None,
    text_threshold: float | None = None,
    batch_size: int = 8,
) -> GroundingDinoDetector:
    """``grounding-dino:<hub id or folder>``; thresholds None = 0.35 (box) and 0.25 (text)."""
    loaded = _load_detector(spec, options)
    threshold = GROUNDING_DINO_BOX_THRESHOLD if box_threshold is None else box_threshold
    text = GROUNDING_DINO_TEXT_THRESHOLD if text_threshold is None else text_threshold
    return GroundingDinoDetector(loaded.model, loaded.processor, loaded.ref, threshold, text, batch_size)


def load_owlv2(
    spec: Spec,
    options: LoadOptions = LoadOptions(),
    box_threshold: float | None = None,
    text_threshold: float | None = None,
    batch_size: int = 8,
) -> Owlv2Detector:
    """``owlv2:<hub id or folder>``; ``box_threshold`` None = 0.1. OWLv2 has no text threshold: one is an error."""
    if text_threshold is not None:
        raise AuditorError("owlv2 detectors have no text threshold (it is Grounding DINO's); leave it out")
    loaded = _load_detector(spec, options)
    threshold = OWLV2_BOX_THRESHOLD if box_threshold is None else box_threshold
    return Owlv2Detector(loaded.model, loaded.processor, loaded.ref, threshold, batch_size)
