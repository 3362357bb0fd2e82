"""The offline proposer of ``auditor explore``: templates x WordNet nouns of a topic, no LLM.

"people at work" is read as the offline planner reads a prompt: its head noun ("people") is a
person, so the nouns come from under ``person.n.01``; among the hyponyms near that root, those
tied to the topic's other words lead the way (``worker.n.01``, derivationally related to
"work"), and their hyponyms, most frequent first by WordNet's sense-tagged counts, fill the
category's templates ("a photo of a {noun}", "a {noun} at work"). Seed prompts without a topic
become templates themselves, their head noun swapped for its WordNet relatives. How the roots,
templates and depths are chosen is data: ``prompts/explore/templates.yaml``.

Proposals are a pure function of the topic, the seeds and what was proposed so far, so a
resumed exploration proposes the same prompts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from auditor.core.errors import AuditorError
from auditor.prompting.guard import normalised

if TYPE_CHECKING:  # pragma: no cover
    from nltk.corpus.reader.wordnet import Synset, WordNetCorpusReader

    from auditor.planning.offline import Reading

TEMPLATES_FILE = "explore/templates.yaml"
_NOUN = "{noun}"


@dataclass(frozen=True)
class Noun:
    """A noun to put into templates, and where WordNet gave it from."""

    text: str
    source: str


@dataclass(frozen=True)
class Frame:
    """A template with a ``{noun}`` slot; frames of one ``group`` share their nouns (mutations move between them)."""

    template: str
    group: int
    where: str

    def fill(self, noun: str) -> str:
        from auditor.prompting.articles import fix_article

        start = self.template.index(_NOUN)
        return fix_article(self.template[:start], noun) + self.template[start + len(_NOUN) :]


@dataclass(frozen=True)
class Proposal:
    """A proposed prompt: its text, the candidate it mutates (if any), and how it was made."""

    prompt: str
    parent: str | None
    origin: str


class OfflineProposer:
    """Proposes from frames and their groups' nouns (see the module docstring)."""

    def __init__(self, frames: Sequence[Frame], nouns: Sequence[Sequence[Noun]]):
        self.frames = list(frames)
        self.nouns = [list(group) for group in nouns]

    @classmethod
    def build(cls, topic: str | None, seeds: Sequence[str]) -> OfflineProposer:
        """Frames and nouns for a topic (the category's templates) and for seed prompts (each one a template)."""
        from auditor.core.langdata import load_wordnet
        from auditor.core.resources import read_prompt_yaml
        from auditor.planning.offline import axis_library

        wordnet, library, data = load_wordnet(), axis_library(), read_prompt_yaml(TEMPLATES_FILE)
        frames: list[Frame] = []
        nouns: list[list[Noun]] = []
        if topic:
            category, found = topic_nouns(topic, wordnet, library, data)
            frames += [Frame(t, 0, f"template {t!r}") for t in data["categories"][category]["templates"]]
            nouns.append(found)
        elif seeds:
            for seed in seeds:
                frame, found = _seed_frame(seed, wordnet, library)
                if frame is not None:
                    frames.append(Frame(frame, len(nouns), f"seed prompt {seed!r}"))
                    nouns.append(found)
        return cls(frames, nouns)

    @cached_property
    def _made_by(self) -> dict[str, tuple[int, Noun]]:
        """Normalised prompt -> (frame index, noun) of every prompt the frames can make."""
        found = {}
        for index, frame in enumerate(self.frames):
            for noun in self.nouns[frame.group]:
                found.setdefault(normalised(frame.fill(noun.text)), (index, noun))
        return found

    def propose(self, count: int, proposed: set[str], leaders: Sequence[tuple[str, str]]) -> list[Proposal]:
        """Up to ``count`` prompts not in ``proposed`` (normalised): first mutations of the ``leaders``
        (``(candidate id, prompt)``, best first: their noun in their group's other templates), then
        new nouns, one group after another."""
        taken = set(proposed)
        found: list[Proposal] = []

        def add(prompt: str, parent: str | None, origin: str) -> None:
            if normalised(prompt) not in taken and len(found) < count:
                taken.add(normalised(prompt))
                found.append(Proposal(prompt, parent, origin))

        for candidate_id, prompt in leaders:
            made = self._made_by.get(normalised(prompt))
            if made is None:
                continue
            index, noun = made
            for other in self.frames:
                if other.group == self.frames[index].group and other is not self.frames[index]:
                    if len(found) < count // 2:
                        add(
                            other.fill(noun.text),
                            candidate_id,
                            f"{other.where} with the noun {noun.text!r} of {candidate_id}",
                        )
        firsts = {frame.group: frame for frame in reversed(self.frames)}
        queues = {group: iter(self.nouns[group]) for group in sorted(firsts)}
        while len(found) < count and queues:
            for group in list(queues):
                noun = next(queues[group], None)
                if noun is None:
                    del queues[group]
                    continue
                add(
                    firsts[group].fill(noun.text),
                    None,
                    f"{firsts[group].where} x WordNet noun {noun.text!r} ({noun.source})",
                )
        return found


# --------------------------------------------------------------------------- WordNet nouns


def check_topic(topic: str) -> None:
    """Refuse a topic the offline proposer cannot read (no noun WordNet knows), before a run exists."""
    from auditor.core.langdata import load_wordnet
    from auditor.core.resources import read_prompt_yaml
    from auditor.planning.offline import axis_library

    _read_topic(topic, load_wordnet(), axis_library(), read_prompt_yaml(TEMPLATES_FILE))


def _read_topic(
    topic: str, wordnet: WordNetCorpusReader, library: dict[str, Any], data: dict[str, Any]
) -> Reading:
    """The topic read as a prompt (its head noun and category), or a one-line error."""
    from auditor.planning.offline import read_prompt

    overrides = {**library.get("category_overrides", {}), **data.get("category_overrides", {})}
    reading = read_prompt(topic, wordnet, {**library, "category_overrides": overrides})
    if reading.head is None or reading.category not in data["categories"]:
        raise AuditorError(f"the topic {topic!r} names no noun WordNet knows: give a noun, e.g. 'people at work'")
    return reading


def topic_nouns(
    topic: str, wordnet: WordNetCorpusReader, library: dict[str, Any], data: dict[str, Any]
) -> tuple[str, list[Noun]]:
    """The topic's category and its nouns, most frequent first."""
    from auditor.core.langdata import english_stopwords

    reading = _read_topic(topic, wordnet, library, data)
    settings = data["categories"][reading.category]
    lexnames = next(c["lexnames"] for c in library["categories"] if c["name"] == reading.category)
    head = wordnet.synsets(reading.head.lemma, pos="n")[0]
    # A head of the category's own kind is the root ("nurses" -> nurse.n.01); a general word
    # ("people", "objects") stands for the category's root. Abstract topics have no other root.
    root = head if head.lexname() in lexnames or not lexnames else wordnet.synset(settings["root"])
    stopwords = english_stopwords()
    others = {
        form
        for word in reading.words
        if word is not reading.head and word.text.lower() not in stopwords
        for form in _forms(word.text.lower(), wordnet)
    }
    near = list(root.closure(lambda s: s.hyponyms(), depth=data["search_depth"]))
    pivots = [
        s
        for s in near
        if others & {f.name().lower() for lemma in s.lemmas() for f in lemma.derivationally_related_forms()}
    ]
    if not pivots and others:
        gloss = re.compile(r"\b(" + "|".join(map(re.escape, sorted(others))) + r")\b")
        pivots = [s for s in near if s.lexname() in lexnames and gloss.search(s.definition())]
    nouns = _hyponym_nouns(pivots, data["noun_depth"]) or _hyponym_nouns([root], data["noun_depth"])
    return reading.category, nouns


def _hyponym_nouns(roots: Sequence[Synset], depth: int) -> list[Noun]:
    """The hyponyms of ``roots`` (``depth`` levels) as nouns, most frequent first, then alphabetical."""
    nouns: dict[str, tuple[int, Noun]] = {}
    for root in roots:
        for synset in root.closure(lambda s: s.hyponyms(), depth=depth):
            text = _noun_text(synset)
            if text is not None and text not in nouns:
                nouns[text] = (_count(synset), Noun(text, f"hyponym of {root.name()}"))
    return [noun for _, noun in sorted(nouns.values(), key=lambda item: (-item[0], item[1].text))]


def _seed_frame(seed: str, wordnet: WordNetCorpusReader, library: dict[str, Any]) -> tuple[str | None, list[Noun]]:
    """The seed with its head noun as ``{noun}``, and the head's co-hyponyms then hyponyms, most frequent first."""
    from auditor.planning.offline import read_prompt

    reading = read_prompt(seed, wordnet, library)
    if reading.head is None or "{" in seed or "}" in seed:
        return None, []
    head = wordnet.synsets(reading.head.lemma, pos="n")[0]
    relatives = [s for parent in head.hypernyms() for s in parent.hyponyms() if s != head] + head.hyponyms()
    found: dict[str, tuple[int, int, Noun]] = {}
    for rank, synset in enumerate(relatives):
        text = _noun_text(synset)
        if text is not None and text != reading.head.lemma and text not in found:
            tier = 0 if rank < len(relatives) - len(head.hyponyms()) else 1
            found[text] = (tier, -_count(synset), Noun(text, f"WordNet relative of {head.name()}"))
    template = seed[: reading.head.start] + _NOUN + seed[reading.head.end :]
    return template, [noun for *_, noun in sorted(found.values(), key=lambda item: (item[0], item[1], item[2].text))]


def _forms(word: str, wordnet: WordNetCorpusReader) -> set[str]:
    """A word and its WordNet base forms as a noun and a verb ("working" -> work)."""
    forms = {word}
    for pos in ("n", "v"):
        base = wordnet.morphy(word, pos)
        if base:
            forms.add(base)
    return forms


def _noun_text(synset: Synset) -> str | None:
    """The synset's first lemma as text, or None for proper nouns and odd names (digits, parentheses)."""
    name = synset.lemmas()[0].name()
    if not name[:1].islower() or not re.fullmatch(r"[a-z][a-z_'-]*", name):
        return None
    return name.replace("_", " ")


def _count(synset: Synset) -> int:
    """How often the synset's senses occur in WordNet's sense-tagged corpus."""
    return sum(lemma.count() for lemma in synset.lemmas())
