"""Object grounding through the content cache: detections of given nouns, and their segmentation masks.

Detections are cached per (detector fingerprint, image sha256, labels looked for) and
masks per (segmenter fingerprint, image sha256, boxes), so a rerun or resume asks the
models nothing, and an image searched for other nouns is searched again. Images whose
label lists are equal go to the detector together (it takes one vocabulary per call).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from auditor.core.cache import ContentCache
from auditor.studies.progress import ProgressReporter, StageCounts

if TYPE_CHECKING:  # pragma: no cover
    from auditor.perception.detectors import Box, Detection, Detector
    from auditor.perception.segmenters import Segmenter

DETECT = "detect"
SEGMENT = "segment"
#: Images opened and sent to the detector or segmenter per call (each batches inside).
IMAGES_PER_CALL = 8


@dataclass(frozen=True)
class GroundingItem:
    """One image to look at: its content hash, its file in the run folder, and what to look for."""

    sha256: str
    file: str
    labels: tuple[str, ...]


def _open(run_dir: Path, file: str):
    from PIL import Image

    with Image.open(run_dir / file) as handle:
        return handle.convert("RGB")


def detect_objects(
    detector: Detector,
    items: Sequence[GroundingItem],
    cache: ContentCache,
    run_dir: Path,
    progress: ProgressReporter,
) -> tuple[dict[str, list[Detection]], StageCounts]:
    """Image sha256 -> the detections of its labels (none asked: none found), best first.

    The same image listed twice (two prompt sets with one prompt) is looked at once.
    """
    from auditor.perception.detectors import Detection

    fingerprint = detector.cache_fingerprint()
    found: dict[str, list[Detection]] = {}
    pending: dict[tuple[str, ...], dict[str, GroundingItem]] = {}
    outcome = StageCounts()
    wanted = [item for item in items if item.labels]
    for item in items:
        if not item.labels:
            found[item.sha256] = []
    progress.start(DETECT, len(wanted), "detecting objects")
    try:
        for item in wanted:
            hit = cache.get_json(DETECT, fingerprint, {"image": item.sha256, "labels": list(item.labels)})
            if hit is None:
                pending.setdefault(item.labels, {})[item.sha256] = item
                continue
            found[item.sha256] = [Detection(label, score, tuple(box)) for label, score, box in hit]
            outcome.cached += 1
            progress.advance(DETECT)
        for labels, by_hash in pending.items():
            group = list(by_hash.values())
            for start in range(0, len(group), IMAGES_PER_CALL):
                chunk = group[start : start + IMAGES_PER_CALL]
                rows = detector.detect([_open(run_dir, item.file) for item in chunk], labels)
                for item, row in zip(chunk, rows, strict=True):
                    value = [[d.label, d.score, list(d.box)] for d in row]
                    cache.put_json(DETECT, fingerprint, {"image": item.sha256, "labels": list(labels)}, value)
                    found[item.sha256] = list(row)
                outcome.computed += len(chunk)
                progress.advance(DETECT, len(chunk))
    finally:
        progress.finish(DETECT)
    return found, outcome


def _pack_masks(masks: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, shape=np.array(masks.shape), bits=np.packbits(masks.astype(bool), axis=None))
    return buffer.getvalue()


def _unpack_masks(data: bytes) -> np.ndarray:
    arrays = np.load(io.BytesIO(data), allow_pickle=False)
    shape = tuple(int(n) for n in arrays["shape"])
    return np.unpackbits(arrays["bits"], count=int(np.prod(shape))).reshape(shape).astype(bool)


def segment_objects(
    segmenter: Segmenter,
    items: Sequence[tuple[str, str, Sequence[Box]]],
    cache: ContentCache,
    run_dir: Path,
    progress: ProgressReporter,
    consume: Callable[[str, np.ndarray], None],
) -> StageCounts:
    """Segment the boxes of every ``(sha256, file, boxes)`` and hand each image's masks to ``consume``.

    ``consume(sha256, masks)`` gets a (boxes, height, width) bool array, one mask per box,
    as soon as an image's masks are known (from the cache or the model): masks of a whole
    run would not fit in memory, so none are kept here.
    """
    fingerprint = segmenter.cache_fingerprint()
    pending: list[tuple[str, str, list[list[float]]]] = []
    outcome = StageCounts()
    progress.start(SEGMENT, len(items), "segmenting objects")
    try:
        for sha, file, boxes in items:
            inputs = {"image": sha, "boxes": [list(box) for box in boxes]}
            hit = cache.get(SEGMENT, fingerprint, inputs)
            if hit is None:
                pending.append((sha, file, inputs["boxes"]))
                continue
            consume(sha, _unpack_masks(hit))
            outcome.cached += 1
            progress.advance(SEGMENT)
        for start in range(0, len(pending), IMAGES_PER_CALL):
            chunk = pending[start : start + IMAGES_PER_CALL]
            found = segmenter.segment(
                [_open(run_dir, file) for _, file, _ in chunk], [[tuple(box) for box in boxes] for *_, boxes in chunk]
            )
            for (sha, _, boxes), image_masks in zip(chunk, found, strict=True):
                cache.put(SEGMENT, fingerprint, {"image": sha, "boxes": boxes}, _pack_masks(image_masks))
                consume(sha, image_masks)
            outcome.computed += len(chunk)
            progress.advance(SEGMENT, len(chunk))
    finally:
        progress.finish(SEGMENT)
    return outcome
