"""Nouns of free text through WordNet alone: an image's object vocabulary, a prompt's noun set.

The paper lemmatises nouns with NLTK (§6.1) after tagging parts of speech; NLTK's tagger
model is not available offline, so noun-ness and lemmas come from WordNet 3.0 itself
(:func:`auditor.core.langdata.load_wordnet`), with these documented rules:

* **words**: the text in lower case, split into runs of letters (hyphenated words kept
  whole when WordNet knows them, "t-shirt"; otherwise their parts); NLTK's English
  stopwords and one-letter words are never nouns.
* **compounds first**: the longest run of two or three non-stopwords (not across
  punctuation) that WordNet lists
  as a noun is one noun ("bow tie", "tennis court", "cocktail dresses" -> "cocktail
  dress"), as the paper's object names are ("bow tie", "bikini top"); except a run that
  ends in a gender or person word ("young woman" -> "woman").
* **noun or not**: a word is a noun when WordNet has a noun reading of it and no other
  reading clearly dominates it in WordNet's sense-tagged frequencies (``cntlist.rev``,
  SemCor counts): an adjective or adverb reading wins when it is more frequent than the
  noun reading ("white", "small", "left"), a verb reading only when it is more than
  :data:`VERB_DOMINANCE` times as frequent, because the texts here are lists and
  descriptions of things, where "sink", "building", "tie" and "sign" are objects while
  "standing", "holding", "shows" stay verbs. A word in -s that WordNet lists as a noun as
  it stands ("pants", "glasses", "clothes") is that noun whatever its verb readings.
* **lemma**: WordNet's ``morphy`` (which keeps a plural that is a noun of its own:
  "glasses", "pants", "clothes"), except the plurals of the human words of Table 2
  ("men" -> "man": WordNet's own "men" is the work force, while "women" -> "woman", and
  the two must be symmetric).
* **human words**: a noun is a human word when it is one of Table 2's words (with our
  additions and plurals) or of the paper's σ words, or when its most frequent noun sense
  (by the same frequencies) is ``person.n.01`` or below it (hypernyms and instance
  hypernyms): "skier", "chef", "businessman"; a noun without frequencies must name people
  in every sense ("mannequin" and "hot dog" do not). "queen" and "model" are human through
  Table 2, while "crowd" and "team" (groups) are objects.

A VQA answer's vocabulary also leaves out the nouns that name the picture itself ("image",
"photo"; ``prompts/trace/objects.yaml``); a prompt's noun set keeps them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from auditor.core.errors import AuditorError
from auditor.core.langdata import english_stopwords, load_wordnet
from auditor.core.resources import read_prompt_yaml
from auditor.prompting.wordlists import HumanWords, human_words

if TYPE_CHECKING:  # pragma: no cover
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

#: The object question and the frame words, under ``prompts/``.
OBJECTS_FILE = "trace/objects.yaml"
#: Longest compound noun looked up, in words.
MAX_COMPOUND = 3
#: A verb reading must be this many times as frequent as the noun reading to make a word a verb.
VERB_DOMINANCE = 8

_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
# Punctuation between words (anything but letters, digits, spaces, hyphens and apostrophes).
_SEGMENT_BREAK = re.compile(r"[^\w\s'’-]+")


@dataclass(frozen=True)
class Vocabulary:
    """The nouns of one text, each once in order of first mention, objects apart from human words."""

    objects: tuple[str, ...]
    humans: tuple[str, ...]


@lru_cache(maxsize=1)
def object_question() -> str:
    """The VQA question whose answer is an image's object list ("List the objects in the image.")."""
    question = read_prompt_yaml(OBJECTS_FILE).get("question")
    if not isinstance(question, str) or not question.strip():
        raise AuditorError(f"{OBJECTS_FILE}: 'question' must be a non-empty string")
    return question.strip()


@lru_cache(maxsize=1)
def frame_words() -> frozenset[str]:
    """Nouns that name the picture itself, left out of an answer's vocabulary."""
    listed = read_prompt_yaml(OBJECTS_FILE).get("frame_words")
    if not isinstance(listed, list) or not all(isinstance(word, str) for word in listed):
        raise AuditorError(f"{OBJECTS_FILE}: 'frame_words' must be a list of words")
    return frozenset(word.lower() for word in listed)


class NounReader:
    """Nouns, lemmas and human words of free text; every word looked up once and remembered.

    Keep one instance for a whole study (:func:`default_noun_reader`): answers repeat most
    of their words, and the WordNet lookups are what costs.
    """

    def __init__(self, wordnet: WordNetCorpusReader | None = None, lexicon: HumanWords | None = None):
        self._wordnet = wordnet
        self._lexicon = lexicon or human_words()
        self._stopwords = english_stopwords()
        self._lemmas: dict[str, str | None] = {}
        self._compounds: dict[str, str | None] = {}
        self._human: dict[str, bool] = {}

    @property
    def wordnet(self) -> WordNetCorpusReader:
        if self._wordnet is None:
            self._wordnet = load_wordnet()
        return self._wordnet

    # ------------------------------------------------------------------ single words

    def _count(self, lemma: str, pos: str) -> int:
        """SemCor frequency of ``lemma`` as a ``pos`` word (sum over its senses)."""
        try:
            return sum(
                entry.count()
                for synset in self.wordnet.synsets(lemma, pos)
                for entry in synset.lemmas()
                if entry.name().lower() == lemma
            )
        except (OSError, LookupError) as exc:
            raise AuditorError(
                f"WordNet's frequency file cntlist.rev is missing ({exc}); reinstall WordNet with `auditor setup`"
            ) from None

    def lemma(self, word: str) -> str | None:
        """The noun lemma of one lower-case word, or None when it does not read as a noun."""
        if word in self._lemmas:
            return self._lemmas[word]
        result: str | None = None
        if len(word) > 1 and word not in self._stopwords:
            if word in self._lexicon.plurals:
                result = self._lexicon.plurals[word]
            elif (noun := self.wordnet.morphy(word, "n")) is not None:
                result = noun if self._reads_as_noun(word, noun) else None
        self._lemmas[word] = result
        return result

    def _reads_as_noun(self, word: str, noun: str) -> bool:
        noun_count = self._count(noun, "n")
        # A word in -s that is a noun lemma as it stands ("pants", "glasses", "clothes") is
        # that noun; as a verb it could only be a third-person form, rare in these texts.
        plural_noun = word.endswith("s") and noun == word
        for pos in ("a", "r") if plural_noun else ("a", "r", "v"):
            other = self.wordnet.morphy(word, pos)
            if other is None:
                continue
            count = self._count(other, pos)
            if count > (VERB_DOMINANCE * noun_count if pos == "v" else noun_count):
                return False
        return True

    def _compound(self, words: list[str]) -> str | None:
        """The noun lemma of a multi-word run ("bow ties" -> "bow tie"), or None.

        A run ending in a gender word or person word is not a compound ("young women" ->
        "woman", as "old man" -> "man"), so those words stay comparable across the prompts
        of a triplet and with the detector's names.
        """
        if any(word in self._stopwords for word in words) or self._lexicon.is_gender_word(words[-1]):
            return None
        key = "_".join(words)
        if key not in self._compounds:
            lemma = self.wordnet.morphy(key, "n")
            self._compounds[key] = lemma.replace("_", " ") if lemma else None
        return self._compounds[key]

    # ------------------------------------------------------------------ texts

    def nouns(self, text: str) -> list[str]:
        """The noun lemmas of ``text`` in order, repeats kept; compounds are one noun with spaces."""
        return [noun for segment in _SEGMENT_BREAK.split(text.lower()) for noun in self._segment_nouns(segment)]

    def _segment_nouns(self, segment: str) -> list[str]:
        """Nouns of a stretch of text without punctuation: a compound never spans a comma."""
        tokens = _WORD.findall(segment)
        found: list[str] = []
        index = 0
        while index < len(tokens):
            for size in range(min(MAX_COMPOUND, len(tokens) - index), 1, -1):
                compound = self._compound(tokens[index : index + size])
                if compound is not None:
                    found.append(compound)
                    index += size
                    break
            else:
                found.extend(self._word_nouns(tokens[index]))
                index += 1
        return found

    def _word_nouns(self, token: str) -> list[str]:
        lemma = self.lemma(token)
        if lemma is not None:
            return [lemma.replace("_", " ")]
        if "-" in token:
            return [noun for part in token.split("-") if (noun := self.lemma(part)) is not None]
        return []

    def is_human(self, noun: str) -> bool:
        """Whether a noun lemma names people: Table 2 (and ours), the σ words, or a hyponym of person.n.01."""
        if noun not in self._human:
            self._human[noun] = self._lexicon.is_human(noun) or self._is_person(noun)
        return self._human[noun]

    def _is_person(self, noun: str) -> bool:
        lemma = noun.replace(" ", "_")
        senses = self.wordnet.synsets(lemma, "n")
        if not senses:
            return False
        person = self.wordnet.synset("person.n.01")

        def names_people(sense) -> bool:
            return sense == person or person in sense.closure(lambda s: s.hypernyms() + s.instance_hypernyms())

        counts = [sum(entry.count() for entry in sense.lemmas() if entry.name().lower() == lemma) for sense in senses]
        if max(counts) == 0:  # no frequencies to say which sense is usual: every sense must name people
            return all(names_people(sense) for sense in senses)
        return names_people(senses[counts.index(max(counts))])

    def vocabulary(self, answer: str) -> Vocabulary:
        """An image's object vocabulary from a VQA answer: objects and human words, frame words left out."""
        skipped = frame_words()
        objects: dict[str, None] = {}
        humans: dict[str, None] = {}
        for noun in self.nouns(answer):
            if noun in skipped:
                continue
            (humans if self.is_human(noun) else objects).setdefault(noun, None)
        return Vocabulary(objects=tuple(objects), humans=tuple(humans))

    def noun_set(self, prompt: str) -> tuple[str, ...]:
        """A prompt's noun set (§6.1): its noun lemmas, each once, human words included."""
        return tuple(dict.fromkeys(self.nouns(prompt)))


@lru_cache(maxsize=1)
def default_noun_reader() -> NounReader:
    """One shared :class:`NounReader` per process (its lookups are cached)."""
    return NounReader()
