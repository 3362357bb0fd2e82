"""Protocols of the perception backends (VQA models and embedders), and what a short answer is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from auditor.records import ModelRef, PerceptionSettings

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from PIL import Image


class VisualQuestionAnswerer(Protocol):
    """A vision-language model that answers questions about images with short greedy answers."""

    ref: ModelRef
    #: The settings it answers with, defaults resolved (the run records these).
    settings: PerceptionSettings

    def cache_fingerprint(self) -> str:
        """Model fingerprint plus every setting that changes an answer (token limits, prompt format)."""
        ...

    def answer(
        self,
        images: Sequence[Image.Image],
        questions: Sequence[str],
        caption_question: str | None = None,
        wanted: Sequence[Sequence[int]] | None = None,
    ) -> list[list[str | None]]:
        """``result[i][j]`` answers ``questions[j]`` about ``images[i]``.

        Each image is encoded once and all its questions are asked in batch. The question
        equal to ``caption_question`` asks for a caption (longer answer budget). ``wanted[i]``
        (default: all) are the indexes of the questions image ``i`` needs answered: a model that
        answers a batch at once may answer the others too, one that is paid per request (an
        API) answers only these and leaves the others None.
        """
        ...


#: The attribute of an exception that stopped :meth:`VisualQuestionAnswerer.answer` part way, holding the answers
#: already paid for: ``{(image index, question index): answer}``.
_ANSWERED = "auditor_answered_before"


def note_answered(exc: BaseException, answered: dict[tuple[int, int], str]) -> None:
    """Let the failure (or Ctrl-C) that stopped an answering call carry the answers it got first, so the stage can
    keep them: each one of a paid API's is a request a resumed run need not send again."""
    setattr(exc, _ANSWERED, answered)


def answered_before(exc: BaseException) -> dict[tuple[int, int], str]:
    """The answers :func:`note_answered` put on ``exc`` (none when the backend keeps no partial answers)."""
    return getattr(exc, _ANSWERED, {})


def first_line(text: str) -> str:
    """A short answer is its first non-empty line, trimmed (models and APIs may add an explanation below it)."""
    return next((line.strip() for line in text.strip().splitlines() if line.strip()), "")


class Embedder(Protocol):
    """An image/text embedder (CLIP-like) returning L2-normalised rows."""

    ref: ModelRef

    def cache_fingerprint(self) -> str:
        ...

    def embed_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        """Array of shape (len(images), dim), each row of unit length."""
        ...

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Array of shape (len(texts), dim), each row of unit length."""
        ...
