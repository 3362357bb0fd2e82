"""The perception stages shared by studies: VQA answers and image embeddings, through the cache.

Answers are cached per (VQA fingerprint, image sha256, question) and embeddings per
(embedder fingerprint, image sha256), so a rerun with a new axis asks only the new
question, and an image that appears in two runs is looked at once. Images the safety
checker blacked out are skipped: they carry no concepts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from auditor.core.cache import ContentCache
from auditor.perception.base import Embedder, VisualQuestionAnswerer
from auditor.records import GeneratedImage, ImageAnswers, PromptSet
from auditor.studies.progress import ProgressReporter, StageCounts

PERCEIVE = "perceive"
EMBED = "embed"


def _open_image(run_dir: Path, image: GeneratedImage):
    from PIL import Image

    with Image.open(run_dir / image.file) as handle:
        return handle.convert("RGB")


def _usable(prompt_sets: Sequence[PromptSet]) -> list[tuple[str, GeneratedImage]]:
    return [(s.prompt_id, image) for s in prompt_sets for image in s.images if not image.flagged_nsfw]


def answer_questions(
    vqa: VisualQuestionAnswerer,
    prompt_sets: Sequence[PromptSet],
    questions: dict[str, str],
    caption_question: str | None,
    cache: ContentCache,
    run_dir: Path,
    images_per_call: int,
    progress: ProgressReporter,
    checkpoint: Callable[[dict[str, list[ImageAnswers]]], None] = lambda _answers: None,
) -> tuple[dict[str, list[ImageAnswers]], StageCounts]:
    """Ask every axis question (``questions``: axis -> question) and the caption of every usable image.

    Images are sent ``images_per_call`` at a time; the backend encodes each once and asks
    all of its questions in one batch.
    """
    fingerprint = vqa.cache_fingerprint()
    asked = list(questions.values()) + ([caption_question] if caption_question else [])
    asked = list(dict.fromkeys(asked))  # two axes may share a question (race, ethnicity): ask it once
    known: dict[tuple[str, str], str] = {}
    pending: dict[str, GeneratedImage] = {}  # sha256 -> an image lacking at least one answer
    outcome = StageCounts()
    images = _usable(prompt_sets)

    for _, image in images:
        for question in asked:
            hit = cache.get_json(PERCEIVE, fingerprint, {"image": image.sha256, "question": question})
            if hit is None:
                pending.setdefault(image.sha256, image)
            else:
                known[image.sha256, question] = hit
    missing = list(pending.values())

    # prompt id -> image index -> answers, filled in as images become complete (not rebuilt per chunk)
    finished: dict[str, dict[int, ImageAnswers]] = {s.prompt_id: {} for s in prompt_sets}

    def complete(prompt_id: str, image: GeneratedImage) -> None:
        finished[prompt_id][image.index] = ImageAnswers(
            image_index=image.index,
            answers={axis: known[image.sha256, q] for axis, q in questions.items()},
            caption=known[image.sha256, caption_question] if caption_question else None,
        )

    def collect() -> dict[str, list[ImageAnswers]]:
        return {pid: [by_index[i] for i in sorted(by_index)] for pid, by_index in finished.items()}

    for prompt_id, image in images:
        if image.sha256 not in pending:
            complete(prompt_id, image)

    done_images = sum(1 for _, image in images if image.sha256 not in pending)
    outcome.cached = done_images
    progress.start(PERCEIVE, len(images), "asking VQA questions")
    progress.advance(PERCEIVE, done_images)
    try:
        for start in range(0, len(missing), images_per_call):
            chunk = missing[start : start + images_per_call]
            chunk_questions = [q for q in asked if any((image.sha256, q) not in known for image in chunk)]
            pictures = [_open_image(run_dir, image) for image in chunk]
            replies = vqa.answer(pictures, chunk_questions, caption_question)
            for image, row in zip(chunk, replies, strict=True):
                for question, reply in zip(chunk_questions, row, strict=True):
                    known[image.sha256, question] = reply
                    cache.put_json(PERCEIVE, fingerprint, {"image": image.sha256, "question": question}, reply)
            outcome.computed += len(chunk)
            chunk_hashes = {image.sha256 for image in chunk}
            now_complete = [(pid, image) for pid, image in images if image.sha256 in chunk_hashes]
            for prompt_id, image in now_complete:
                complete(prompt_id, image)
            checkpoint(collect())
            progress.advance(PERCEIVE, len(now_complete))
    finally:
        progress.finish(PERCEIVE)
    return collect(), outcome


def merge_answers(
    earlier: dict[str, list[ImageAnswers]], newer: dict[str, list[ImageAnswers]]
) -> dict[str, list[ImageAnswers]]:
    """Answers of both, per prompt id and image index: an image asked in both gets the union of its answers."""
    merged = {prompt_id: {image.image_index: image for image in images} for prompt_id, images in earlier.items()}
    for prompt_id, images in newer.items():
        by_index = merged.setdefault(prompt_id, {})
        for image in images:
            old = by_index.get(image.image_index)
            if old is not None:
                image = image.model_copy(
                    update={"answers": old.answers | image.answers, "caption": image.caption or old.caption}
                )
            by_index[image.image_index] = image
    return {prompt_id: [by_index[i] for i in sorted(by_index)] for prompt_id, by_index in merged.items()}


def embed_images(
    embedder: Embedder,
    prompt_sets: Sequence[PromptSet],
    cache: ContentCache,
    run_dir: Path,
    batch_size: int,
    progress: ProgressReporter,
) -> tuple[dict[str, np.ndarray], StageCounts]:
    """Prompt id -> (n_images, dim) array of unit-length image embeddings (usable images only)."""
    fingerprint = embedder.cache_fingerprint()
    vectors: dict[str, np.ndarray] = {}
    outcome = StageCounts()
    images = _usable(prompt_sets)
    missing: list[GeneratedImage] = []
    for _, image in images:
        hit = cache.get(EMBED, fingerprint, {"image": image.sha256})
        if hit is None:
            missing.append(image)
        else:
            vectors[image.sha256] = np.frombuffer(hit, dtype=np.float32)
    unique_missing = list({image.sha256: image for image in missing}.values())
    outcome.cached = len(images) - len(missing)
    progress.start(EMBED, len(unique_missing), "embedding images")
    try:
        for start in range(0, len(unique_missing), batch_size):
            chunk = unique_missing[start : start + batch_size]
            rows = embedder.embed_images([_open_image(run_dir, image) for image in chunk])
            for image, row in zip(chunk, rows, strict=True):
                vectors[image.sha256] = np.asarray(row, dtype=np.float32)
                cache.put(EMBED, fingerprint, {"image": image.sha256}, vectors[image.sha256].tobytes())
            outcome.computed += len(chunk)
            progress.advance(EMBED, len(chunk))
    finally:
        progress.finish(EMBED)
    by_set: dict[str, list[np.ndarray]] = {s.prompt_id: [] for s in prompt_sets}
    for prompt_id, image in images:
        by_set[prompt_id].append(vectors[image.sha256])
    return {pid: np.stack(rows) if rows else np.zeros((0, 0), np.float32) for pid, rows in by_set.items()}, outcome
