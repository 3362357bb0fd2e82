"""The exploration's guard: a candidate prompt must be neutral on the audited axes and new.

* **Indicator words.** A prompt that names an axis's value ("a photo of a *female* nurse", "an
  *elderly* farmer") already decides the axis, so its images cannot show how the model leans
  there. Each axis's words are data (``prompts/explore/indicator_words.yaml``; the gender axis
  also takes the bias-amplification study's male and female word lists), matched whole and
  case-insensitively, as :class:`~auditor.corpora.gender.GenderWords` matches captions.
* **Near-duplicates.** A prompt too close to an earlier candidate spends images on the same
  question twice: rejected when the cosine of their sentence embeddings (MiniLM) exceeds the
  threshold (0.9), or, without a sentence embedder, when they are equal once case, spacing and
  punctuation are ignored (which also catches exact repeats when there is one).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from auditor.core.cache import ContentCache
from auditor.core.errors import AuditorError
from auditor.core.text import single_spaced

if TYPE_CHECKING:  # pragma: no cover
    from auditor.perception.sentence import SentenceEmbedder

WORDS_FILE = "explore/indicator_words.yaml"
#: Content-cache stage of prompt embeddings.
EMBED_STAGE = "sentence"
_PUNCTUATION = str.maketrans({char: " " for char in string.punctuation})


@dataclass(frozen=True)
class IndicatorWords:
    """Axis -> the words that give away a value on it, matched whole and case-insensitively."""

    words: dict[str, frozenset[str]]

    @classmethod
    def builtin(cls) -> IndicatorWords:
        return _builtin()

    def axes(self) -> list[str]:
        """Axes that have words (the others reject nothing)."""
        return list(self.words)

    def found(self, prompt: str, axes: Iterable[str]) -> tuple[str, str] | None:
        """``(axis, word)`` of the first of ``axes`` whose word ``prompt`` contains; None when neutral on all."""
        text = prompt.lower()
        for axis in axes:
            pattern = _pattern(self.words.get(axis, frozenset()))
            match = pattern.search(text) if pattern is not None else None
            if match:
                return axis, match.group(1)
        return None


@lru_cache(maxsize=64)
def _pattern(words: frozenset[str]) -> re.Pattern | None:
    if not words:
        return None
    ordered = sorted(words, key=lambda word: (-len(word), word))  # longest first: "middle-aged" before "aged"
    return re.compile(r"\b(" + "|".join(map(re.escape, ordered)) + r")\b")


@lru_cache(maxsize=1)
def _builtin() -> IndicatorWords:
    from auditor.core.resources import read_prompt_yaml
    from auditor.corpora.gender import GenderWords

    data = read_prompt_yaml(WORDS_FILE)
    if not isinstance(data, dict) or not all(isinstance(words, list) for words in data.values()):
        raise AuditorError(f"prompts/{WORDS_FILE} must map axis names to lists of words")
    words = {axis: frozenset(str(word).strip().lower() for word in listed) for axis, listed in data.items()}
    gender = GenderWords.builtin()
    words["gender"] = words.get("gender", frozenset()) | gender.male | gender.female
    return IndicatorWords(words)


def normalised(prompt: str) -> str:
    """The prompt for exact comparison: lower case, punctuation and repeated spaces gone."""
    return single_spaced(prompt.lower().translate(_PUNCTUATION))


@dataclass(frozen=True)
class Duplicate:
    """An earlier candidate the prompt repeats, and how alike they are (1.0 for an exact match)."""

    candidate_id: str
    prompt: str
    similarity: float


class DuplicateFinder:
    """Finds the earlier candidate a prompt (nearly) repeats.

    ``embedder`` None: exact matches only (normalised text). Embeddings are cached by text in
    the content cache, so a resumed exploration embeds nothing again.
    """

    def __init__(self, threshold: float, embedder: SentenceEmbedder | None = None, cache: ContentCache | None = None):
        if not 0 < threshold <= 1:
            raise AuditorError(f"the near-duplicate threshold must lie in (0, 1], got {threshold}")
        self.threshold = threshold
        self.embedder = embedder
        self.cache = cache

    def find(self, prompt: str, earlier: Sequence[tuple[str, str]]) -> Duplicate | None:
        """The earlier ``(candidate id, prompt)`` most like ``prompt`` if it is an exact or near repeat."""
        key = normalised(prompt)
        for candidate_id, text in earlier:
            if normalised(text) == key:
                return Duplicate(candidate_id, text, 1.0)
        if self.embedder is None or not earlier:
            return None
        vectors = self.vectors([prompt, *(text for _, text in earlier)])
        similarities = vectors[1:] @ vectors[0]
        best = int(np.argmax(similarities))
        if similarities[best] > self.threshold:
            return Duplicate(earlier[best][0], earlier[best][1], float(similarities[best]))
        return None

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit rows of ``texts``, through the content cache when there is one."""
        assert self.embedder is not None
        fingerprint = self.embedder.cache_fingerprint()
        rows: dict[str, np.ndarray] = {}
        for text in texts:
            hit = self.cache.get(EMBED_STAGE, fingerprint, {"text": text}) if self.cache is not None else None
            if hit is not None:
                rows[text] = np.frombuffer(hit, dtype=np.float32)
        missing = [text for text in dict.fromkeys(texts) if text not in rows]
        if missing:
            for text, row in zip(missing, self.embedder.embed(missing), strict=True):
                rows[text] = np.asarray(row, dtype=np.float32)
                if self.cache is not None:
                    self.cache.put(EMBED_STAGE, fingerprint, {"text": text}, rows[text].tobytes())
        return np.stack([rows[text] for text in texts])
