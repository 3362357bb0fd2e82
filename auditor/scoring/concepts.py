"""Answers -> concept histograms, and WordNet synonym merging for one pair of sets.

TIBET (paper §3.3, Appendix 8.3) turns every VQA answer and caption of an image set into
a bag of words and measures each word's frequency per image. Two sets are compared only
after synonyms are merged (Algorithm 1), so "physician" in one set meets "doctor" in the
other. The exact rules (issue 3):

* words: lower-case, ASCII punctuation removed, split on whitespace, NLTK's English
  stopwords plus "image" removed, "yes"/"no"/"none" dropped;
* histogram: count / number of images used; entries below ``min_frequency`` dropped;
* synonym link u~v (over the pair's joint vocabulary): u is a lower-cased lemma name of a
  WordNet synset of v, or v of u; plus male~man and female~woman. Connected components
  merge, their frequencies summed, named after the most frequent member (ties:
  alphabetical), so every process gives the same result whatever ``PYTHONHASHSEED`` is.

Each word's lemma-name set is looked up once per :class:`SynonymIndex` and reused across
every pair and set: a full prompt (31 sets) shares most of its vocabulary between pairs.
"""

from __future__ import annotations

import json
import math
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.core.errors import AuditorError
from auditor.core.langdata import (
    english_stopwords,
    load_wordnet,
    reads_auditors_wordnet,
    used_remembered_wordnet,
    wordnet_identity,
)
from auditor.records import ImageAnswers, SetConcepts

if TYPE_CHECKING:  # pragma: no cover
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

#: Words the paper drops besides the stopwords: the question's own noun and bare VQA replies.
EXTRA_DROPPED_WORDS = frozenset({"image", "yes", "no", "none"})
#: Links WordNet lacks but the gender question's answers need ("male" vs "man").
EXTRA_SYNONYMS = (("male", "man"), ("female", "woman"))

_STRIP_PUNCTUATION = str.maketrans("", "", string.punctuation)


@lru_cache(maxsize=1)
def _dropped_words() -> frozenset[str]:
    return english_stopwords() | EXTRA_DROPPED_WORDS


def words(text: str) -> list[str]:
    """The concept words of one answer or caption, in order (repeats kept: they are counted)."""
    dropped = _dropped_words()
    return [word for word in text.lower().translate(_STRIP_PUNCTUATION).split() if word not in dropped]


def histogram(texts: Iterable[str], images: int, min_frequency: float = 0.01) -> dict[str, float]:
    """Word -> count / ``images`` over ``texts``, without words rarer than ``min_frequency``.

    Sorted by frequency (highest first), then alphabetically, so records read well and
    compare equal across processes. No images -> an empty histogram.
    """
    if images <= 0:
        return {}
    counts = Counter(word for text in texts for word in words(text))
    frequencies = ((word, count / images) for word, count in counts.items())
    kept = [(word, freq) for word, freq in frequencies if freq >= min_frequency]
    return dict(sorted(kept, key=lambda item: (-item[1], item[0])))


def set_concepts(
    prompt_id: str,
    answers: Sequence[ImageAnswers],
    axes: Sequence[str],
    *,
    include_captions: bool = True,
    min_frequency: float = 0.01,
    images_total: int | None = None,
) -> SetConcepts:
    """Concept histograms of one prompt set from the answers of the images that count.

    ``answers`` holds only the images that count (callers leave NSFW-flagged images out),
    so frequencies are per image *used*. ``overall`` pools every axis's answer (and the
    caption when ``include_captions``); ``by_axis`` has one histogram per axis, from that
    axis's question only. ``images_total`` (images generated for the set, flagged ones
    included) is a consistency check: more answers than images is a caller bug.
    """
    if images_total is not None and len(answers) > images_total:
        raise ValueError(f"{prompt_id}: {len(answers)} answered images but only {images_total} generated")
    images = len(answers)
    overall_texts = [image.answers[axis] for image in answers for axis in axes if axis in image.answers]
    if include_captions:
        overall_texts += [image.caption for image in answers if image.caption is not None]
    by_axis = {
        axis: histogram((image.answers[axis] for image in answers if axis in image.answers), images, min_frequency)
        for axis in axes
    }
    return SetConcepts(
        prompt_id=prompt_id,
        images_used=images,
        overall=histogram(overall_texts, images, min_frequency),
        by_axis=by_axis,
    )


class LemmaStore:
    """WordNet's lemma names of the words looked up so far, kept on disk for later processes.

    Loading WordNet costs a process about 3 s (importing NLTK, reading its lemma index),
    while scoring a run looks up a few hundred words. One JSON file per WordNet, named by
    :func:`~auditor.core.langdata.wordnet_identity` (another WordNet or NLTK, or the same
    WordNet changed, gets a file of its own; none where NLTK might read another WordNet
    than auditor's), holds that WordNet's version and each word's lemma names. It is filled
    only from auditor's WordNet (:func:`~auditor.core.langdata.reads_auditors_wordnet`).
    Written atomically, after reading the file again: words another process stored meanwhile
    are kept (two writing in the same instant may still keep only one's). A store that cannot
    be read or written, or holds anything else, only costs the lookups again.
    """

    #: Changes when what a word's entry holds changes (the lookup rule of :meth:`SynonymIndex.lemma_names`): a new
    #: format starts a new file.
    FORMAT = 1

    def __init__(self, path: Path):
        self.path = path
        self.version: str | None = None
        self.lemmas: dict[str, frozenset[str]] = {}
        self._added = False
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            version, lemmas = data["version"], data["lemmas"]
            if not isinstance(version, str) or not all(
                isinstance(word, str) and isinstance(names, list) and all(isinstance(n, str) for n in names)
                for word, names in lemmas.items()
            ):
                raise ValueError("not a lemma store")
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return  # none yet, or not one this class wrote: it fills again
        self.version = version
        self.lemmas = {word: frozenset(names) for word, names in lemmas.items()}

    def add(self, word: str, names: frozenset[str], version: str) -> None:
        """Remember ``word``'s lemma names, read from WordNet ``version`` (the store's own: its file says which)."""
        self.version = version
        self.lemmas[word] = names
        self._added = True

    def save(self) -> None:
        """Write the store if words were added since it was read or saved."""
        from auditor.core.store import atomic_write_text

        if not self._added:
            return
        on_disk = LemmaStore(self.path)  # what other processes added since this one read the file
        if on_disk.version == self.version:
            self.lemmas = {**on_disk.lemmas, **self.lemmas}
        lemmas = {word: sorted(names) for word, names in sorted(self.lemmas.items())}
        try:
            atomic_write_text(self.path, json.dumps({"version": self.version, "lemmas": lemmas}) + "\n")
        except AuditorError:
            return  # a folder auditor cannot write: the next process looks the words up again
        self._added = False


class SynonymIndex:
    """WordNet synonym links, each word looked up once and remembered.

    Keep one instance for a whole audit (or use :func:`default_synonym_index`): the
    cache is what makes scoring 30 pairs cost about one pass over the vocabulary. With a
    :class:`LemmaStore`, words an earlier process looked up are read from it, and WordNet is
    loaded only for words it lacks.
    """

    def __init__(self, wordnet: WordNetCorpusReader | None = None, store: LemmaStore | None = None):
        self._wordnet = wordnet
        self._store = store
        self._lemmas: dict[str, frozenset[str]] = {}
        self._extra: dict[str, frozenset[str]] = {}
        for u, v in EXTRA_SYNONYMS:
            self._extra[u] = self._extra.get(u, frozenset()) | {v}
            self._extra[v] = self._extra.get(v, frozenset()) | {u}

    @property
    def lookups(self) -> int:
        """Distinct words looked up so far (in WordNet or the store)."""
        return len(self._lemmas)

    def lemma_names(self, word: str) -> frozenset[str]:
        """Lower-cased lemma names of every WordNet synset of ``word`` (morphy applied: 'books' -> book's)."""
        found = self._lemmas.get(word)
        if found is not None:
            return found
        store = self._store
        if store is not None and store.version is not None and (found := store.lemmas.get(word)) is not None:
            used_remembered_wordnet(store.version)
        else:
            if self._wordnet is None:
                self._wordnet = load_wordnet()
                if store is not None and not reads_auditors_wordnet(self._wordnet):
                    self._store = store = None  # NLTK read another WordNet than the store's: keep none of it
            found = frozenset(name.lower() for synset in self._wordnet.synsets(word) for name in synset.lemma_names())
            if store is not None:
                store.add(word, found, self._wordnet.get_version())
        self._lemmas[word] = found
        return found

    def neighbours(self, word: str) -> frozenset[str]:
        """Words ``word`` links to by its own synsets or the extra gender pairs (links are made symmetric by the caller)."""
        return self.lemma_names(word) | self._extra.get(word, frozenset())

    def components(self, vocabulary: Iterable[str]) -> list[list[str]]:
        """Connected components of the synonym links within ``vocabulary``, each sorted, in sorted order."""
        vocab = sorted(set(vocabulary))
        present = set(vocab)
        parent = {word: word for word in vocab}

        def root(word: str) -> str:
            while parent[word] != word:
                parent[word] = parent[parent[word]]
                word = parent[word]
            return word

        for word in vocab:
            for other in self.neighbours(word) & present:
                a, b = root(word), root(other)
                if a != b:
                    parent[max(a, b)] = min(a, b)
        if self._store is not None:
            self._store.save()
        groups: dict[str, list[str]] = {}
        for word in vocab:
            groups.setdefault(root(word), []).append(word)
        return sorted(groups.values())


@lru_cache(maxsize=1)
def default_synonym_index() -> SynonymIndex:
    """The process-wide index, so lookups are shared by every pair and set of a run; with a :class:`LemmaStore` in
    auditor's home folder once WordNet is installed there, so later processes need not load WordNet."""
    from auditor.core.settings import get_settings

    identity = wordnet_identity()
    path = get_settings().home / "wordnet-lemmas" / f"v{LemmaStore.FORMAT}-{identity}.json"
    return SynonymIndex(store=None if identity is None else LemmaStore(path))


def merge_synonyms(
    p: Mapping[str, float], q: Mapping[str, float], index: SynonymIndex | None = None
) -> tuple[dict[str, float], dict[str, float]]:
    """Algorithm 1, step 1: ``p`` and ``q`` with synonyms merged over their joint vocabulary.

    Both results share one naming: a merged concept is called after its member with the
    highest combined frequency in ``p`` and ``q`` (ties: alphabetically first). A concept
    missing from one side stays missing there (CAS counts it as 0).
    """
    index = index or default_synonym_index()
    merged_p: dict[str, float] = {}
    merged_q: dict[str, float] = {}
    for members in index.components(p.keys() | q.keys()):
        name = min(members, key=lambda word: (-(p.get(word, 0.0) + q.get(word, 0.0)), word))
        for source, target in ((p, merged_p), (q, merged_q)):
            values = [source[word] for word in members if word in source]
            if values:
                target[name] = math.fsum(values)
    return merged_p, merged_q
