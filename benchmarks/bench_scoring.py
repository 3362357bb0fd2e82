"""Benchmark: scoring one full-size prompt audit against a straightforward implementation.

Full size = the paper's setting: 31 image sets (the initial prompt and 30 counterfactuals
over 7 axes) x 48 images x 8 answers (7 VQA answers and a caption). Words are drawn from
WordNet's own nouns, so synonym links are as dense as in real answers.

"ours" is :func:`auditor.scoring.score_axes` with a fresh (cold) :class:`SynonymIndex`,
so every word is looked up once for the whole audit. "per-pair" is what a direct reading
of Algorithm 1 gives: for each (initial, counterfactual) pair, look up every word of the
joint vocabulary in WordNet again and test every pair of words. Both start from the same
histograms and must give the same CAS values. Target (issue 3): well under the time it
takes to load WordNet twice.

Run with ``make bench`` or ``.venv/bin/python benchmarks/bench_scoring.py``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from auditor.core.langdata import load_wordnet  # noqa: E402
from auditor.metrics.tibet import cas  # noqa: E402
from auditor.records import (  # noqa: E402
    INITIAL_PROMPT_ID,
    ImageAnswers,
    ScoringSettings,
    SetConcepts,
    counterfactual_id,
)
from auditor.scoring.concepts import EXTRA_SYNONYMS, SynonymIndex, set_concepts  # noqa: E402
from auditor.scoring.tibet import score_axes  # noqa: E402

AXES = {"gender": 4, "age": 4, "ethnicity": 5, "setting": 5, "style": 4, "clothing": 4, "emotion": 4}  # 30 counterfactuals
IMAGES = 48
GENDER_WORDS = ["male", "female", "man", "woman", "men", "women", "boy", "girl", "person"]


def word_pool(wordnet, size: int, rng: random.Random) -> list[str]:
    """``size`` plain single-word WordNet nouns (and some plurals), chosen reproducibly."""
    nouns = sorted(name for name in wordnet.all_lemma_names("n") if name.isalpha() and 3 <= len(name) <= 10)
    chosen = rng.sample(nouns, size)
    return chosen + [word + "s" for word in chosen[: size // 10]]


def build_answers(wordnet, seed: int = 0) -> dict[str, list[ImageAnswers]]:
    """Prompt id -> 48 images' answers; each set leans on its own slice of the vocabulary."""
    rng = random.Random(seed)
    pool = word_pool(wordnet, 1500, rng)
    axis_words = {axis: rng.sample(pool, 25) + (GENDER_WORDS if axis == "gender" else []) for axis in AXES}
    common = rng.sample(pool, 120)
    prompt_ids = [INITIAL_PROMPT_ID] + [counterfactual_id(axis, k) for axis, n in AXES.items() for k in range(n)]
    found = {}
    for prompt_id in prompt_ids:
        theme = rng.sample(pool, 60)
        images = []
        for index in range(IMAGES):
            answers = {
                axis: " ".join(rng.choices(words, k=rng.randint(1, 3))) + ("." if rng.random() < 0.5 else "")
                for axis, words in axis_words.items()
            }
            caption = "a photo of " + ", ".join(rng.choices(common, k=6) + rng.choices(theme, k=6))
            images.append(ImageAnswers(image_index=index, answers=answers, caption=caption))
        found[prompt_id] = images
    return found


def all_concepts(answers: Mapping[str, list[ImageAnswers]]) -> dict[str, SetConcepts]:
    return {prompt_id: set_concepts(prompt_id, images, list(AXES)) for prompt_id, images in answers.items()}


# --------------------------------------------------------------------------- the straightforward way


def per_pair_merge(p: Mapping[str, float], q: Mapping[str, float], wordnet) -> tuple[dict, dict]:
    """Algorithm 1 read literally: fresh WordNet look-ups for this pair, then every word pair tested."""
    vocabulary = sorted(p.keys() | q.keys())
    lemmas = {word: {name.lower() for s in wordnet.synsets(word) for name in s.lemma_names()} for word in vocabulary}
    extra = {frozenset(pair) for pair in EXTRA_SYNONYMS}
    group = {word: {word} for word in vocabulary}
    for i, u in enumerate(vocabulary):
        for v in vocabulary[i + 1 :]:
            if (u in lemmas[v] or v in lemmas[u] or frozenset((u, v)) in extra) and group[u] is not group[v]:
                joined = group[u] | group[v]
                for word in joined:
                    group[word] = joined
    merged_p, merged_q = {}, {}
    for members in {id(g): g for g in group.values()}.values():
        name = min(members, key=lambda w: (-(p.get(w, 0.0) + q.get(w, 0.0)), w))
        for source, target in ((p, merged_p), (q, merged_q)):
            values = sorted(source[w] for w in members if w in source)
            if values:
                target[name] = sum(values)
    return merged_p, merged_q


def per_pair_cas(concepts: Mapping[str, SetConcepts], wordnet) -> list[float]:
    initial = concepts[INITIAL_PROMPT_ID].overall
    values = []
    for axis, n in AXES.items():
        for k in range(n):
            p, q = per_pair_merge(initial, concepts[counterfactual_id(axis, k)].overall, wordnet)
            values.append(cas(p, q))
    return values


# --------------------------------------------------------------------------- timing


def ours(concepts, wordnet) -> tuple[float, list[float], int]:
    start = time.perf_counter()
    index = SynonymIndex(wordnet)
    scores = score_axes(
        [(axis, [f"{axis} {k}" for k in range(n)]) for axis, n in AXES.items()], concepts, ScoringSettings(), synonyms=index
    )
    seconds = time.perf_counter() - start
    return seconds, [cf.cas for axis in scores.axes for cf in axis.counterfactuals], index.lookups


def straightforward(concepts, wordnet) -> tuple[float, list[float]]:
    start = time.perf_counter()
    values = per_pair_cas(concepts, wordnet)
    return time.perf_counter() - start, values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Timed runs of each implementation (best is kept).")
    args = parser.parse_args()

    start = time.perf_counter()
    wordnet = load_wordnet()
    load_seconds = time.perf_counter() - start
    answers = build_answers(wordnet)
    start = time.perf_counter()
    concepts = all_concepts(answers)
    histogram_seconds = time.perf_counter() - start
    vocab = len(set().union(*(c.overall for c in concepts.values())))
    per_set = sum(len(c.overall) for c in concepts.values()) / len(concepts)
    print(f"input: {len(answers)} sets x {IMAGES} images x {len(AXES) + 1} answers; "
          f"{vocab} distinct concepts, {per_set:.0f} per set on average")
    print(f"WordNet load (this process, cold):         {load_seconds:.3f} s")
    print(f"concept histograms of all sets (shared):   {histogram_seconds:.3f} s")

    runs = [ours(concepts, wordnet) for _ in range(args.repeats)]
    first_ours = runs[0][0]
    best_ours, ours_cas, lookups = min(runs)
    best_plain, plain_cas = min(straightforward(concepts, wordnet) for _ in range(args.repeats))
    if len(ours_cas) != len(plain_cas) or any(abs(a - b) > 1e-12 for a, b in zip(ours_cas, plain_cas)):
        raise SystemExit("the two implementations disagree on CAS: a bug in one of them")
    print(f"scoring, ours (each of {lookups} words looked up once): {best_ours:.3f} s "
          f"(first run, WordNet pages cold: {first_ours:.3f} s)")
    print(f"scoring, straightforward per-pair look-ups:   {best_plain:.3f} s")
    print(f"ratio straightforward / ours: {best_plain / best_ours:.1f}x")
    total = histogram_seconds + first_ours
    print(f"ours end to end (histograms + cold scoring): {total:.3f} s = {total / (2 * load_seconds):.1%} "
          f"of two WordNet loads ({2 * load_seconds:.2f} s)")


if __name__ == "__main__":
    main()
