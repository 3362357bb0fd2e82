"""Words that indicate humans (Wu et al. 2025, Table 2), read from ``prompts/trace/human_words.yaml``.

The neutral-caption filter rejects a caption that contains any of them, and the object
vocabulary counts them apart from objects, so both read the same data through
:func:`human_words`.

Matching is whole-word and case-insensitive over :func:`words`: runs of letters, so
"people's" holds "people" and "boy's" holds "boy" (an apostrophe or hyphen ends a word).
That is deliberately conservative for a filter whose job is to keep gender cues out of
neutral prompts: "U-turn" holds Table 2's "u" and is rejected, never the other way round.
Besides the printed words, the file's ``additions`` (readings of the table's misprints)
and ``plurals`` ("boys" is as much a gender cue as "boy") count as indicators.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from auditor.core.errors import AuditorError
from auditor.core.resources import read_prompt_yaml

#: The data file under ``prompts/``.
HUMAN_WORDS_FILE = "trace/human_words.yaml"
#: Table 2's three lists, in the paper's order.
TABLE2_LISTS = ("gender", "geography", "others")

#: An initialism ("U.S.", "a.m.": single letters joined by dots, no letter right after) is one word; otherwise a
#: word is a run of letters ("a.man", a full stop without its space, is "a" and "man").
_WORD = re.compile(r"[^\W\d_](?:\.[^\W\d_])+\.?(?![^\W\d_])|[^\W\d_]+")


def words(text: str) -> list[str]:
    """The lower-case words of ``text`` in order: maximal runs of letters (any script), an initialism whole.

    Whole so that "U.S." is not read as Table 2's "u" (texting "you"); "U-turn" still is, which leaves
    a caption out rather than call it neutral wrongly.
    """
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class HumanWords:
    """Table 2 as printed, our additions and plural forms, and the paper's σ words."""

    table2: dict[str, tuple[str, ...]]
    """List name (gender, geography, others) -> its words, as printed (duplicates kept)."""
    additions: tuple[str, ...]
    """Our readings of the table's misprints (e.g. "bridesmaid" for "bridemaid")."""
    plurals: dict[str, str]
    """Plural form -> singular, for the nouns of Table 2 and of ``additions`` (lower case)."""
    sigma_words: frozenset[str]
    """The six words §6.2 calls human for the coverage threshold σ."""
    indicators: frozenset[str]
    """Every lower-case form that makes a caption not neutral: Table 2, additions, plurals."""
    gender: frozenset[str]
    """Table 2's gender list in lower case."""

    def singular(self, word: str) -> str:
        """The singular of a listed plural ("women" -> "woman"); any other word unchanged."""
        return self.plurals.get(word, word)

    def found_in(self, text: str) -> list[str]:
        """The indicator words of ``text`` as their singular, each once, in order of appearance."""
        found: dict[str, None] = {}
        for word in words(text):
            if word in self.indicators:
                found.setdefault(self.singular(word), None)
        return list(found)

    def is_gender_word(self, word: str) -> bool:
        """Whether a lower-case word (or its singular) is in Table 2's gender list or is a σ word."""
        singular = self.singular(word)
        return singular in self.sigma_words or word in self.sigma_words or singular in self.gender

    def is_human(self, word: str) -> bool:
        """Whether a lower-case word (or its singular) is one of the human words above."""
        return word in self.indicators or word in self.sigma_words or self.singular(word) in self.sigma_words


def _word_list(data: dict, key: str) -> tuple[str, ...]:
    value = data.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(item, str) and item for item in value):
        raise AuditorError(f"{HUMAN_WORDS_FILE}: '{key}' must be a non-empty list of words")
    return tuple(value)


@lru_cache(maxsize=1)
def human_words() -> HumanWords:
    """The human words of ``prompts/trace/human_words.yaml``, read once per process."""
    data = read_prompt_yaml(HUMAN_WORDS_FILE)
    if not isinstance(data, dict):
        raise AuditorError(f"{HUMAN_WORDS_FILE} must be a mapping")
    table2 = {name: _word_list(data, name) for name in TABLE2_LISTS}
    additions = _word_list(data, "additions")
    plurals = data.get("plurals")
    if not isinstance(plurals, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in plurals.items()):
        raise AuditorError(f"{HUMAN_WORDS_FILE}: 'plurals' must map plural words to singular words")
    plurals = {plural.lower(): singular.lower() for plural, singular in plurals.items()}
    listed = {word.lower() for group in table2.values() for word in group} | {word.lower() for word in additions}
    orphans = sorted(set(plurals.values()) - listed)
    if orphans:
        raise AuditorError(f"{HUMAN_WORDS_FILE}: plurals of unlisted words: {', '.join(orphans)}")
    return HumanWords(
        table2=table2,
        additions=additions,
        plurals=plurals,
        sigma_words=frozenset(word.lower() for word in _word_list(data, "sigma_human_words")),
        indicators=frozenset(listed | set(plurals)),
        gender=frozenset(word.lower() for word in table2["gender"]),
    )
