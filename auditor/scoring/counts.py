"""Per-image concept counts and embeddings of a run's prompt sets: what the bootstrap resamples.

Each image's answers are tokenised once (the same words as :func:`auditor.scoring.concepts.words`)
into a row of a (seeds, concepts) matrix, with zero rows for the seeds a set has no usable
image of, so a bootstrap resample is a weighted sum of rows instead of a re-tokenisation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from auditor.core.errors import AuditorError
from auditor.records import ImageAnswers, PromptSet
from auditor.scoring.concepts import words
from auditor.scoring.tibet_files import TibetResult


@dataclass(frozen=True)
class SetCounts:
    """Concept-word counts of one prompt set, image by image (row i = seed index i)."""

    #: The words any usable image of the set mentions, sorted (before any frequency floor).
    vocabulary: tuple[str, ...]
    #: (seeds, words) counts; zero rows where the set has no usable image.
    counts: np.ndarray
    #: (seeds,) whether the set has a usable image (generated, not flagged, answered) for the seed.
    available: np.ndarray


@dataclass(frozen=True)
class ConceptCounts:
    """Per-image concept counts of every prompt set, over ``seeds`` shared seed indices."""

    seeds: int
    sets: dict[str, SetCounts]


def set_counts(texts_by_seed: Sequence[Iterable[str] | None]) -> SetCounts:
    """Counts of one set from, per seed index, its image's texts (None: no usable image).

    Tokenised with :func:`auditor.scoring.concepts.words`, the point estimate's rules.
    """
    counters = [None if texts is None else Counter(w for text in texts for w in words(text)) for texts in texts_by_seed]
    vocabulary = tuple(sorted(set().union(*(counter for counter in counters if counter is not None))))
    column = {word: j for j, word in enumerate(vocabulary)}
    matrix = np.zeros((len(counters), len(vocabulary)))
    for i, counter in enumerate(counters):
        if counter:
            matrix[i, [column[word] for word in counter]] = list(counter.values())
    available = np.array([counter is not None for counter in counters], dtype=bool)
    return SetCounts(vocabulary=vocabulary, counts=matrix, available=available)


def answer_counts(
    answers: Mapping[str, Sequence[ImageAnswers]],
    axes: Sequence[str],
    *,
    include_captions: bool = True,
    flagged: Mapping[str, Collection[int]] | None = None,
    seeds: int | None = None,
) -> ConceptCounts:
    """Counts of every prompt set from its VQA answers, as :func:`set_concepts` would count them.

    An image's texts are its answers to the ``axes`` questions and, with
    ``include_captions``, its caption. Images in ``flagged[prompt_id]`` (NSFW) do not
    count, like images without answers. ``seeds`` is the number of seed indices (images
    generated per set); by default one past the highest image index answered.
    """
    flagged = flagged or {}
    highest = max((image.image_index for images in answers.values() for image in images), default=-1)
    seeds = highest + 1 if seeds is None else seeds
    if seeds < 1:
        raise AuditorError("no answered images, so there is nothing to score")
    if highest >= seeds:
        raise AuditorError(f"an answer for image {highest}, but only {seeds} images per prompt set")
    sets = {}
    for prompt_id, images in answers.items():
        skipped = set(flagged.get(prompt_id, ()))
        texts: list[list[str] | None] = [None] * seeds
        for image in images:
            if texts[image.image_index] is not None:
                raise AuditorError(f"prompt set {prompt_id!r} has two answers for image {image.image_index}")
            if image.image_index in skipped:
                continue
            texts[image.image_index] = [image.answers[axis] for axis in axes if axis in image.answers]
            if include_captions and image.caption is not None:
                texts[image.image_index].append(image.caption)
        sets[prompt_id] = set_counts(texts)
    return ConceptCounts(seeds=seeds, sets=sets)


def tibet_file_counts(result: TibetResult) -> ConceptCounts:
    """Counts of a TIBET result file: image i of each set is seed index i, and every answer counts.

    Sets with fewer images than the longest have no image for the remaining seeds.
    """
    image_sets = result.image_sets()
    seeds = max(len(images) for images in image_sets.values())
    if seeds == 0:
        raise AuditorError("the TIBET file has no images, so there is nothing to score")
    return ConceptCounts(
        seeds=seeds,
        sets={
            prompt_id: set_counts([images[i] if i < len(images) else None for i in range(seeds)])
            for prompt_id, images in image_sets.items()
        },
    )


@dataclass(frozen=True)
class SetEmbeddings:
    """Embeddings of one prompt set's usable images, with the seed index of each row."""

    image_indices: np.ndarray
    vectors: np.ndarray


def usable_embeddings(
    prompt_sets: Sequence[PromptSet], embeddings: Mapping[str, np.ndarray]
) -> dict[str, SetEmbeddings]:
    """Seed indices for the embed stage's arrays: one row per not-flagged image, in image order."""
    found = {}
    for prompt_set in prompt_sets:
        vectors = embeddings.get(prompt_set.prompt_id)
        if vectors is None or np.asarray(vectors).ndim != 2 or len(vectors) == 0:
            continue
        indices = np.array([image.index for image in prompt_set.images if not image.flagged_nsfw], dtype=np.intp)
        if len(indices) != len(vectors):
            raise AuditorError(
                f"prompt set {prompt_set.prompt_id!r}: {len(vectors)} embeddings for {len(indices)} usable images"
            )
        found[prompt_set.prompt_id] = SetEmbeddings(image_indices=indices, vectors=np.asarray(vectors))
    return found
