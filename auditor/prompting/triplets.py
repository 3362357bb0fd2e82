"""Prompt triplets that differ only in gender (Wu et al. 2025, §3.1).

**Captions.** A caption is a neutral prompt when it contains the word "person" or
"people" (or "persons") and none of the words of Table 2 that indicate humans
(:mod:`auditor.prompting.wordlists`; whole-word, case-insensitive). Its feminine and
masculine prompts swap every such word for the gendered one, nothing else changed:

* person -> woman / man; persons, people -> women / men;
* possessives follow: "person's" -> "woman's", "people's" -> "women's",
  "persons'" -> "women's";
* the word's capitalisation is kept ("People" -> "Women", "PERSON" -> "MAN");
* "a person" stays grammatical as "a woman"/"a man" (both begin with a consonant), so no
  article changes; "peoples" (nations) is not a person word and is left as it is.

**Professions.** "female"/"male" goes right before the profession, and an indefinite
article before it is fixed for the word that now follows ("an ecologist studies ..." ->
"a female ecologist studies ..."; the paper's own example prints "an female").

Captions come in as strings (reading caption files is the study's job); each triplet keeps
the position of its caption in that input as its source id. The three prompts of a
triplet share every seed: that is the study's generation plan, not this module's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from auditor.core.errors import AuditorError
from auditor.core.resources import read_prompt_yaml
from auditor.core.text import single_spaced
from auditor.prompting.articles import fix_article, match_case
from auditor.prompting.wordlists import HumanWords, human_words, words
from auditor.records.trace import TripletSet

#: Words that make a caption about an ungendered person, with their (feminine, masculine) swaps.
SWAPS: dict[str, tuple[str, str]] = {
    "person": ("woman", "man"),
    "persons": ("women", "men"),
    "people": ("women", "men"),
}
#: Words put before the profession in the feminine and masculine profession prompts.
PROFESSION_GENDER_WORDS = ("female", "male")
#: The data file of the profession set under ``prompts/``.
PROFESSIONS_FILE = "trace/professions.yaml"

# The person word, then a bare apostrophe (a plural possessive: "persons'") if one follows.
_NOT_LETTER_BEFORE, _NOT_LETTER_AFTER = r"(?<![^\W\d_])", r"(?![^\W\d_])"
_PERSON_WORD = re.compile(
    rf"{_NOT_LETTER_BEFORE}(persons|person|people){_NOT_LETTER_AFTER}(['’]{_NOT_LETTER_AFTER})?", re.IGNORECASE
)


@dataclass(frozen=True)
class Triplet:
    """Three prompts that differ only in the gender indicator."""

    source_id: str
    """Where the neutral prompt came from: ``<prefix>-<position in the caption input>`` or ``<profession>#<template>``."""
    neutral: str
    feminine: str
    masculine: str
    profession: str | None = None
    """The profession phrase, for triplets of the profession set."""

    def prompt(self, prompt_set: TripletSet) -> str:
        """The prompt of one set ("neutral", "feminine" or "masculine")."""
        return {"neutral": self.neutral, "feminine": self.feminine, "masculine": self.masculine}[prompt_set]


@dataclass(frozen=True)
class TripletSelection:
    """Triplets from a caption list, and what the neutral-caption filter left out and why."""

    triplets: tuple[Triplet, ...]
    captions: int
    """Non-empty captions read."""
    without_person: int
    """Captions without "person"/"people"/"persons"."""
    with_indicator: int
    """Captions with a person word and a Table 2 word."""
    duplicates: int
    """Neutral captions left out because the same text (ignoring case and spacing) came earlier."""
    indicator_counts: dict[str, int] = field(default_factory=dict)
    """Table 2 word (singular) -> captions with a person word left out for containing it."""


# --------------------------------------------------------------------------- captions


def has_person_word(text: str) -> bool:
    """Whether ``text`` has "person", "persons" or "people" as a whole word (any case)."""
    return any(word in SWAPS for word in words(text))


def is_neutral_caption(text: str) -> bool:
    """The paper's two criteria: a person word, and no word of Table 2 (§3.1)."""
    return _not_neutral(text, human_words()) is None


def _not_neutral(text: str, lexicon: HumanWords) -> list[str] | None:
    """Why ``text`` is not a neutral caption: no person word (an empty list), or the words of Table 2 it has;
    None for a neutral one."""
    if not has_person_word(text):
        return []
    return lexicon.found_in(text) or None


def swap_gender(text: str, prompt_set: TripletSet) -> str:
    """``text`` with every person word swapped for the feminine or masculine one (neutral: unchanged)."""
    if prompt_set == "neutral":
        return text
    if prompt_set not in ("feminine", "masculine"):
        raise ValueError(f"unknown prompt set {prompt_set!r}")
    index = 0 if prompt_set == "feminine" else 1

    def replace(match: re.Match[str]) -> str:
        word = match.group(1)
        swapped = match_case(SWAPS[word.lower()][index], word)
        apostrophe = match.group(2) or ""
        if apostrophe and word.lower() == "persons":  # "persons'" -> "women's"
            apostrophe += "S" if swapped.isupper() else "s"
        return swapped + apostrophe

    return _PERSON_WORD.sub(replace, text)


def _swapped_triplet(text: str, source_id: str) -> Triplet:
    return Triplet(
        source_id=source_id,
        neutral=text,
        feminine=swap_gender(text, "feminine"),
        masculine=swap_gender(text, "masculine"),
    )


def select_caption_triplets(
    captions: Iterable[str], *, id_prefix: str = "caption", deduplicate: bool = True
) -> TripletSelection:
    """Triplets of the neutral captions among ``captions``, in input order.

    Blank captions are skipped (and not counted). With ``deduplicate`` a neutral caption
    whose text (case and spacing aside) came earlier is left out, so a caption repeated in
    a data set does not count twice. Source ids are ``<id_prefix>-<position>``, the
    0-based position in ``captions``, so each triplet leads back to its row.
    """
    lexicon = human_words()
    triplets: list[Triplet] = []
    seen: set[str] = set()
    indicator_counts: Counter[str] = Counter()
    read = without_person = with_indicator = duplicates = 0
    for position, caption in enumerate(captions):
        text = caption.strip()
        if not text:
            continue
        read += 1
        found = _not_neutral(text, lexicon)
        if found is not None:
            with_indicator += bool(found)
            without_person += not found
            indicator_counts.update(found)
            continue
        key = single_spaced(text).lower()
        if deduplicate and key in seen:
            duplicates += 1
            continue
        seen.add(key)
        triplets.append(_swapped_triplet(text, f"{id_prefix}-{position}"))
    return TripletSelection(
        triplets=tuple(triplets),
        captions=read,
        without_person=without_person,
        with_indicator=with_indicator,
        duplicates=duplicates,
        indicator_counts=dict(sorted(indicator_counts.items(), key=lambda item: (-item[1], item[0]))),
    )


# --------------------------------------------------------------------------- professions


def profession_phrase(name: str) -> str:
    """A profession name as written in a prompt: lower case, acronyms kept ("AI Ethics Researcher" -> "AI ethics researcher")."""
    return " ".join(word if len(word) > 1 and word.isupper() else word.lower() for word in name.split())


def _insert_before_profession(text: str, start: int, end: int, word: str | None) -> str:
    """``text`` with ``word`` put before the profession at ``[start, end)`` and the article fixed."""
    profession = text[start:end]
    if word is None:
        inserted = profession
    elif start == 0 and profession[:1].isupper():
        # Sentence-initial: the new first word takes the capital ("Female ecologist ...").
        first = profession.split(maxsplit=1)[0]
        rest = profession if len(first) > 1 and first.isupper() else profession[:1].lower() + profession[1:]
        inserted = f"{word.capitalize()} {rest}"
    else:
        inserted = f"{word} {profession}"
    return fix_article(text[:start], inserted) + text[end:]


def profession_triplet(text: str, profession: str, source_id: str) -> Triplet:
    """The triplet of a sentence about ``profession``: "female"/"male" put before it, articles fixed.

    The profession is found as a whole phrase (case-insensitive, first occurrence; a
    plural "-s"/"-es" is part of it). The neutral prompt gets its article fixed too, so a
    template "a {profession} ..." reads "an ecologist ...".
    """
    text = text.strip()
    pattern = rf"{_NOT_LETTER_BEFORE}{re.escape(profession.strip())}(?:e?s)?{_NOT_LETTER_AFTER}"
    match = re.search(pattern, text, re.IGNORECASE)
    if not profession.strip() or match is None:
        raise AuditorError(f"profession {profession!r} does not occur in the prompt {text!r}")
    feminine_word, masculine_word = PROFESSION_GENDER_WORDS
    return Triplet(
        source_id=source_id,
        neutral=_insert_before_profession(text, match.start(), match.end(), None),
        feminine=_insert_before_profession(text, match.start(), match.end(), feminine_word),
        masculine=_insert_before_profession(text, match.start(), match.end(), masculine_word),
        profession=profession.strip(),
    )


def profession_triplets(professions: Iterable[str], templates: Sequence[str]) -> list[Triplet]:
    """One triplet per distinct profession and template, professions in input order.

    Each template has one ``{profession}`` slot; names are written with
    :func:`profession_phrase`. Source ids are ``<phrase>#<template index>``.
    """
    for index, template in enumerate(templates):
        if template.count("{profession}") != 1:
            raise AuditorError(f"profession template {index} must contain {{profession}} exactly once: {template!r}")
    phrases = list(dict.fromkeys(profession_phrase(name) for name in professions if name.strip()))
    return [
        profession_triplet(template.replace("{profession}", phrase), phrase, f"{phrase}#{index}")
        for phrase in phrases
        for index, template in enumerate(templates)
    ]


def _profession_data() -> dict:
    data = read_prompt_yaml(PROFESSIONS_FILE)
    if not isinstance(data, dict):
        raise AuditorError(f"{PROFESSIONS_FILE} must be a mapping")
    return data


def load_professions() -> dict[str, list[str]]:
    """Table 3 of the paper: topic -> profession names, as printed (duplicates kept)."""
    topics = _profession_data().get("professions")
    if not isinstance(topics, dict) or not all(isinstance(names, list) and names for names in topics.values()):
        raise AuditorError(f"{PROFESSIONS_FILE}: 'professions' must map topics to lists of names")
    return {str(topic): [str(name) for name in names] for topic, names in topics.items()}


def load_profession_templates() -> list[str]:
    """The built-in sentence templates of the profession set (ours; the paper's sentences are unpublished)."""
    templates = _profession_data().get("templates")
    if not isinstance(templates, list) or not templates or not all(isinstance(t, str) for t in templates):
        raise AuditorError(f"{PROFESSIONS_FILE}: 'templates' must be a non-empty list of strings")
    return list(templates)
