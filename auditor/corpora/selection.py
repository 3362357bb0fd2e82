"""Choosing an occupation's training captions, as the bias-amplification study does (Seshadri et al. 2023).

All selections of all occupations come from one streamed pass over the captions:

- **keyword** (§4): the captions that mention the occupation as a whole word (case
  ignored, any run of white space between the words of a multi-word occupation), of
  which a seeded uniform sample of at most ``per_occupation`` is kept (the paper samples
  500). The sample is a reservoir (Vitter's Algorithm R) drawing one uniform number per
  match from a generator seeded by ``(seed, occupation)``: the same file, seed and
  occupation give the same sample whatever the batch size and whichever other
  occupations are selected alongside.
- **nn** (§6.1): among the same keyword matches, the ``per_occupation`` captions closest
  to the occupation's prompt by cosine similarity of sentence embeddings (MiniLM in the
  paper), kept in a bounded heap while streaming; ties go to the earlier caption. One
  selection per prompt when several are given (the paper ranks for each of its prompts).
- **no-indicator** (§6.2): the keyword sample without the captions that carry any gender
  indicator, i.e. those labelled ``none`` (the paper "split[s] our training examples by
  detecting gender indicators" and keeps the subset without any); it therefore holds at
  most ``per_occupation`` captions, usually fewer.
- **nn+no-indicator** (§6.3): the nn selection without the captions that carry a gender
  indicator, composed the same way as no-indicator (select, then drop), so its captions
  are exactly the indicator-free part of the nn selection. The paper does not spell the
  order out and the authors' released code does not include this step; this reading keeps
  the two filters comparable (each "no-indicator" subset is a subset of its base
  selection, §6.2: "we focus on the subset of training captions, S_o, without any male or
  female indicators").
"""

from __future__ import annotations

import heapq
import re
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from auditor.core.choices import Method
from auditor.core.errors import AuditorError
from auditor.core.text import single_spaced
from auditor.corpora.gender import CaptionLabeller, GenderLabel
from auditor.corpora.readers import CaptionBatch
from auditor.metrics.amplification import Percentage, percentage
from auditor.metrics.t2iat import unit_rows

#: Every selection method, in the order of the paper's Table 4.
METHODS: tuple[Method, ...] = ("keyword", "nn", "no-indicator", "nn+no-indicator")
#: Methods that rank captions by similarity to a prompt.
NN_METHODS: frozenset[str] = frozenset({"nn", "nn+no-indicator"})
#: Methods that keep only captions without gender words: their caption proxy is undefined by construction.
NO_INDICATOR_METHODS: frozenset[str] = frozenset({"no-indicator", "nn+no-indicator"})
#: The paper's number of training examples per occupation.
PER_OCCUPATION = 500


_WORDS = re.compile(r"\w+")


def _needle(occupation: str) -> str:
    """The occupation's longest word, lower-cased (what the prefilter looks for)."""
    words = _WORDS.findall(occupation.lower())
    if not words:
        raise AuditorError(f"the occupation {occupation!r} has no word to search for")
    return max(words, key=len)


def occupation_pattern(occupation: str) -> re.Pattern:
    """The occupation as a whole word (or words), case ignored: "teacher" finds "Teacher," but not "teachers".

    Whole means no letter, digit or underscore just before or after it, which ``\\b`` does not say at an
    occupation that starts or ends with punctuation (".NET developer", "C++ programmer")."""
    words = occupation.split()
    if not words:
        raise AuditorError("an occupation cannot be empty")
    return re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, words)) + r"(?!\w)", re.IGNORECASE)


@dataclass(frozen=True)
class SelectedCaption:
    """One training example chosen for an occupation."""

    source: str
    row: int
    caption: str
    #: The image column's value, when the captions come with images.
    image: str | None
    label: GenderLabel
    #: Cosine similarity to the prompt (nn methods only).
    similarity: float | None = None


@dataclass(frozen=True)
class Selection:
    """The captions one method chose for one occupation (and prompt, for the nn methods)."""

    occupation: str
    method: Method
    #: The prompt the nn methods ranked by; None for keyword and no-indicator.
    prompt: str | None
    #: Captions in the whole stream that mention the occupation (the candidates of every method).
    matched: int
    captions: tuple[SelectedCaption, ...]

    def counts(self) -> dict[GenderLabel, int]:
        """How many selected captions are labelled male, female, both and none."""
        counts: dict[GenderLabel, int] = {"male": 0, "female": 0, "both": 0, "none": 0}
        for caption in self.captions:
            counts[caption.label] += 1
        return counts

    def caption_proxy(self) -> Percentage:
        """% female among the captions labelled male or female: the caption proxy for T when
        there are no images (the paper classifies the images; this only reads the text)."""
        counts = self.counts()
        return percentage(counts["female"], counts["male"] + counts["female"])


def select_captions(
    batches: Iterable[CaptionBatch],
    occupations: Sequence[str],
    methods: Sequence[str] = METHODS,
    *,
    labeller: CaptionLabeller,
    per_occupation: int = PER_OCCUPATION,
    seed: int = 0,
    prompts: Mapping[str, Sequence[str]] | None = None,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
) -> list[Selection]:
    """Every requested selection for every occupation, from one pass over ``batches``.

    ``prompts`` maps each occupation to the prompt(s) the nn methods rank by, and ``embed``
    turns texts into unit rows (e.g. :meth:`auditor.perception.sentence.SentenceEmbedder.embed`,
    or a cached wrapper of it); both are needed only for the nn methods. Results come in
    the order of ``occupations``, then ``methods``, then prompts.
    """
    methods = _check_methods(methods)
    if per_occupation < 1:
        raise AuditorError(f"--per-occupation must be at least 1 (got {per_occupation})")
    occupations = _unique_occupations(occupations)
    wants_nn = any(m in NN_METHODS for m in methods)
    ranked: dict[str, list[str]] = {}
    if wants_nn:
        if embed is None:
            raise AuditorError("the nn selection methods need a sentence embedder")
        for occupation in occupations:
            listed = list((prompts or {}).get(occupation) or ())
            if not listed:
                raise AuditorError(f"the nn selection methods need a prompt for {occupation!r}")
            ranked[occupation] = list(dict.fromkeys(listed))
    scan = _Scan(occupations, per_occupation, seed, ranked, embed if wants_nn else None)
    for batch in batches:
        scan.add(batch)
    return scan.selections(methods, labeller)


def _check_methods(methods: Sequence[str]) -> list[Method]:
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise AuditorError(f"unknown selection method {', '.join(map(repr, unknown)) or '(none)'}: use {', '.join(METHODS)}")
    return list(dict.fromkeys(methods))  # type: ignore[arg-type]


def _unique_occupations(occupations: Sequence[str]) -> list[str]:
    cleaned = [o.strip() for o in occupations]
    if not cleaned or not all(cleaned):
        raise AuditorError("name at least one occupation, none of them empty")
    folded: dict[str, str] = {}
    for occupation in cleaned:
        key = single_spaced(occupation).casefold()
        if key in folded:
            raise AuditorError(f"{folded[key]!r} and {occupation!r} are the same occupation")
        folded[key] = occupation
    return cleaned


#: A caption as the scan keeps it: (stream position, source, row, caption, image).
_Item = tuple[int, str, int, str, "str | None"]


class _Scan:
    """The state of one pass: a reservoir per occupation and a bounded heap per (occupation, prompt)."""

    def __init__(
        self,
        occupations: list[str],
        size: int,
        seed: int,
        prompts: dict[str, list[str]],
        embed: Callable[[Sequence[str]], np.ndarray] | None,
    ):
        self.occupations = occupations
        self.size = size
        self.patterns = {o: occupation_pattern(o) for o in occupations}
        # Prefilter: a caption can only match an occupation if the occupation's longest word is
        # one of its words (a whole-word match implies it), so each caption is split into words
        # once and the regular expressions only run on those candidates.
        self.needles = {o: _needle(o) for o in occupations}
        self.needle_set = frozenset(self.needles.values())
        self.rngs = {o: np.random.default_rng([seed, zlib.crc32(o.casefold().encode())]) for o in occupations}
        self.matched = dict.fromkeys(occupations, 0)
        self.reservoirs: dict[str, list[_Item]] = {o: [] for o in occupations}
        self.prompts = prompts
        self.embed = embed
        self.heaps: dict[tuple[str, str], list[tuple[float, int, _Item]]] = {
            (o, p): [] for o, listed in prompts.items() for p in listed
        }
        self.prompt_vectors: dict[str, np.ndarray] = {}
        if embed is not None:
            texts = list(dict.fromkeys(p for listed in prompts.values() for p in listed))
            vectors = unit_rows(embed(texts), "prompt embeddings")
            self.prompt_vectors = dict(zip(texts, vectors))
        self.position = 0

    def add(self, batch: CaptionBatch) -> None:
        source = str(batch.source)
        candidates: dict[str, list[int]] = {}
        for i, caption in enumerate(batch.captions):
            for needle in self.needle_set.intersection(_WORDS.findall(caption.lower())):
                candidates.setdefault(needle, []).append(i)
        hits: dict[str, list[int]] = {}
        for occupation in self.occupations:
            pattern = self.patterns[occupation]
            found = [i for i in candidates.get(self.needles[occupation], ()) if pattern.search(batch.captions[i])]
            if found:
                hits[occupation] = found
        items = [
            (self.position + i, source, row, caption, batch.images[i] if batch.images is not None else None)
            for i, (row, caption) in enumerate(zip(batch.rows, batch.captions))
        ]
        self.position += len(batch.captions)
        for occupation, found in hits.items():
            self._sample(occupation, [items[i] for i in found])
        if self.embed is not None and hits:
            self._rank(hits, items)

    def _sample(self, occupation: str, found: list[_Item]) -> None:
        """Algorithm R with one uniform draw per match (so batch boundaries do not matter)."""
        reservoir, seen = self.reservoirs[occupation], self.matched[occupation]
        draws = self.rngs[occupation].random(len(found))
        for item, draw in zip(found, draws):
            if seen < self.size:
                reservoir.append(item)
            else:
                slot = int(draw * (seen + 1))
                if slot < self.size:
                    reservoir[slot] = item
            seen += 1
        self.matched[occupation] = seen

    def _rank(self, hits: dict[str, list[int]], items: list[_Item]) -> None:
        needed = sorted({i for occupation, found in hits.items() if occupation in self.prompts for i in found})
        if not needed:
            return
        assert self.embed is not None
        vectors = unit_rows(self.embed([items[i][3] for i in needed]), "caption embeddings")
        if vectors.shape[0] != len(needed):
            raise AuditorError(f"the sentence embedder returned {vectors.shape[0]} rows for {len(needed)} captions")
        row_of = {index: k for k, index in enumerate(needed)}
        for occupation, found in hits.items():
            for prompt in self.prompts.get(occupation, ()):
                scores = vectors[[row_of[i] for i in found]] @ self.prompt_vectors[prompt]
                heap = self.heaps[(occupation, prompt)]
                for i, score in zip(found, scores.tolist()):
                    # Larger (score, -position) is better: equal scores keep the earlier caption.
                    entry = (score, -items[i][0], items[i])
                    if len(heap) < self.size:
                        heapq.heappush(heap, entry)
                    elif entry[:2] > heap[0][:2]:
                        heapq.heapreplace(heap, entry)

    def selections(self, methods: list[Method], labeller: CaptionLabeller) -> list[Selection]:
        labels: dict[str, GenderLabel] = {}

        def chosen(item: _Item, similarity: float | None = None) -> SelectedCaption:
            caption = item[3]
            if caption not in labels:
                labels[caption] = labeller.label(caption)
            return SelectedCaption(item[1], item[2], caption, item[4], labels[caption], similarity)

        results = []
        for occupation in self.occupations:
            matched = self.matched[occupation]
            keyword = tuple(chosen(item) for item in sorted(self.reservoirs[occupation]))
            nn = {
                prompt: tuple(
                    chosen(item, score)
                    for score, _, item in sorted(self.heaps[(occupation, prompt)], key=lambda e: (-e[0], -e[1]))
                )
                for prompt in self.prompts.get(occupation, ())
            }
            for method in methods:
                if method == "keyword":
                    results.append(Selection(occupation, method, None, matched, keyword))
                elif method == "no-indicator":
                    results.append(Selection(occupation, method, None, matched, _without_indicators(keyword)))
                else:
                    for prompt, ranked in nn.items():
                        picked = ranked if method == "nn" else _without_indicators(ranked)
                        results.append(Selection(occupation, method, prompt, matched, picked))
        return results


def _without_indicators(captions: tuple[SelectedCaption, ...]) -> tuple[SelectedCaption, ...]:
    return tuple(c for c in captions if c.label == "none")

