"""The face and gender stages of the amplification study: image files -> face boxes -> CLIP decisions.

They look at generated images (in the run folder) and at training images (anywhere on
disk) alike, so they take plain files identified by the sha256 of their bytes, and cache
by it:

- face boxes per (detector fingerprint, image sha256) under ``faces``;
- CLIP image embeddings per (embedder fingerprint, image sha256) under the ``embed``
  stage with the same inputs as :class:`auditor.executors.perception.EmbedReader`, so
  an image embedded by any study is embedded once; the two class texts likewise under
  ``embed_text``. The zero-shot decision is a pure function of those embeddings
  (:mod:`auditor.perception.zero_shot`), so a rerun classifies without running CLIP again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from auditor.core.cache import ContentCache
from auditor.executors.perception import EMBED
from auditor.perception.faces import FaceBox, FaceDetector
from auditor.studies.progress import ProgressReporter, StageCounts

if TYPE_CHECKING:  # pragma: no cover
    from auditor.perception.base import Embedder

FACES = "faces"
CLASSIFY = "classify"
EMBED_TEXT = "embed_text"


@dataclass(frozen=True)
class ImageFile:
    """An image to look at: the sha256 of its bytes and where it is."""

    sha256: str
    path: Path


def _unique(images: Sequence[ImageFile]) -> list[ImageFile]:
    return list({image.sha256: image for image in images}.values())


def _open(path: Path):
    from PIL import Image

    with Image.open(path) as handle:
        return handle.convert("RGB")


def _readable(path: Path):
    """The image, or None when the file is gone or does not decode (a broken download in a training sample)."""
    from PIL import Image

    try:
        return _open(path)
    except (OSError, ValueError, Image.DecompressionBombError):
        return None


def detect_faces(
    detector: FaceDetector, images: Sequence[ImageFile], cache: ContentCache, progress: ProgressReporter
) -> tuple[dict[str, list[FaceBox]], StageCounts]:
    """sha256 -> the faces found in that image (each distinct image looked at once); an image that cannot be
    read is left out (and not cached, so a repaired file is looked at next time)."""
    fingerprint = detector.cache_fingerprint()
    found: dict[str, list[FaceBox]] = {}
    outcome = StageCounts()
    unique = _unique(images)
    progress.start(FACES, len(unique), "detecting faces")
    try:
        for image in unique:
            hit = cache.get_json(FACES, fingerprint, {"image": image.sha256})
            if hit is not None:
                found[image.sha256] = [FaceBox(*box) for box in hit]
                outcome.cached += 1
            elif (picture := _readable(image.path)) is not None:
                boxes = detector.detect(picture)
                cache.put_json(FACES, fingerprint, {"image": image.sha256}, [_box(b) for b in boxes])
                found[image.sha256] = boxes
                outcome.computed += 1
            progress.advance(FACES)
    finally:
        progress.finish(FACES)
    return found, outcome


def _box(box: FaceBox) -> list[float]:
    return [box.left, box.top, box.width, box.height]


def embed_image_files(
    embedder: Embedder, images: Sequence[ImageFile], cache: ContentCache, batch_size: int, progress: ProgressReporter
) -> tuple[dict[str, np.ndarray], StageCounts]:
    """sha256 -> unit-length image embedding, only the cache misses run through the embedder (in batches)."""
    fingerprint = embedder.cache_fingerprint()
    vectors: dict[str, np.ndarray] = {}
    outcome = StageCounts()
    missing = []
    for image in _unique(images):
        hit = cache.get(EMBED, fingerprint, {"image": image.sha256})
        if hit is None:
            missing.append(image)
        else:
            vectors[image.sha256] = np.frombuffer(hit, dtype=np.float32)
            outcome.cached += 1
    progress.start(CLASSIFY, len(missing), "classifying faces (CLIP)")
    try:
        for start in range(0, len(missing), batch_size):
            chunk = missing[start : start + batch_size]
            rows = embedder.embed_images([_open(image.path) for image in chunk])
            for image, row in zip(chunk, rows, strict=True):
                vectors[image.sha256] = np.asarray(row, dtype=np.float32)
                cache.put(EMBED, fingerprint, {"image": image.sha256}, vectors[image.sha256].tobytes())
            outcome.computed += len(chunk)
            progress.advance(CLASSIFY, len(chunk))
    finally:
        progress.finish(CLASSIFY)
    return vectors, outcome


def embed_texts_cached(embedder: Embedder, texts: Sequence[str], cache: ContentCache) -> np.ndarray:
    """Unit-length text embeddings of ``texts`` (in order), each computed once per embedder."""
    fingerprint = embedder.cache_fingerprint()
    hits = [cache.get(EMBED_TEXT, fingerprint, {"text": text}) for text in texts]
    if all(hit is not None for hit in hits):
        return np.stack([np.frombuffer(hit, dtype=np.float32) for hit in hits])  # type: ignore[arg-type]
    rows = np.asarray(embedder.embed_texts(list(texts)), dtype=np.float32)
    for text, row in zip(texts, rows, strict=True):
        cache.put(EMBED_TEXT, fingerprint, {"text": text}, row.tobytes())
    return rows
