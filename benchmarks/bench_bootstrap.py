"""Benchmark: paired-bootstrap intervals for one full-size prompt audit, against the point estimate.

Full size is the prompt of ``bench_scoring.py``: 31 image sets (the initial prompt and 30
counterfactuals over 7 axes) x 48 images x 8 answers (7 VQA answers and a caption).

- "point estimate": concept histograms of every set (``set_concepts``) and ``score_axes``;
- "bootstrap": per-image count matrices (``answer_counts``) and ``score_intervals`` with
  B resamples, every score recomputed in every resample (percentile, then BCa, which adds
  48 leave-one-seed-out rows); optionally with 768-d image embeddings (similarity per
  counterfactual, T2IAT S and d per two-counterfactual axis);
- "naive": what a loop gives: per resample, gather the drawn images' answers, rebuild
  every histogram and rerun ``score_axes``. Timed on a few resamples and extrapolated to
  B (labelled as such); its CAS must equal the vectorised ones on the same resamples.

The synonym index is warm for every row (one point-estimate run first), so each row
measures its own work, not WordNet's first page-ins. Target (issue): B = 1000 under 2 s.

The matrix products are small (1001 x 48 by 48 x a few hundred), and on a machine whose
cores are busy with other work, OpenBLAS's threads wait on each other: the same run can be
several times slower than with ``OPENBLAS_NUM_THREADS=1``. The header prints the load and
that setting so numbers from different runs can be compared.

Run with ``.venv/bin/python benchmarks/bench_bootstrap.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scoring import AXES, IMAGES, all_concepts, build_answers  # noqa: E402

from auditor.core.langdata import load_wordnet  # noqa: E402
from auditor.metrics.bootstrap import multiplicities, resample_indices  # noqa: E402
from auditor.records import INITIAL_PROMPT_ID, ScoringSettings, counterfactual_id  # noqa: E402
from auditor.scoring.concepts import SynonymIndex, set_concepts  # noqa: E402
from auditor.scoring.counts import SetEmbeddings, answer_counts  # noqa: E402
from auditor.scoring.tibet import score_axes  # noqa: E402
from auditor.scoring.uncertainty import BootstrapSettings, score_intervals, tibet_samples  # noqa: E402

AXIS_SPECS = [(axis, [f"a photo of a {axis} {k}" for k in range(n)]) for axis, n in AXES.items()]
SETTINGS = ScoringSettings()


def best_of(repeats: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def naive_cas(answers, indices: np.ndarray, synonyms: SynonymIndex) -> np.ndarray:
    """CAS of every counterfactual per resample, by rebuilding histograms from the drawn images and rescoring."""
    rows = []
    for drawn in indices:
        concepts = {}
        for prompt_id, images in answers.items():
            by_index = {image.image_index: image for image in images}
            picked = [by_index[i].model_copy(update={"image_index": k}) for k, i in enumerate(drawn) if i in by_index]
            concepts[prompt_id] = set_concepts(prompt_id, picked, list(AXES))
        scores = score_axes(AXIS_SPECS, concepts, SETTINGS, synonyms=synonyms)
        rows.append([cf.cas for axis in scores.axes for cf in axis.counterfactuals])
    return np.array(rows, dtype=float)


def fake_embeddings(dim: int = 768) -> dict[str, SetEmbeddings]:
    rng = np.random.default_rng(0)
    ids = [INITIAL_PROMPT_ID] + [counterfactual_id(axis, k) for axis, n in AXES.items() for k in range(n)]
    return {p: SetEmbeddings(np.arange(IMAGES), rng.normal(size=(IMAGES, dim)).astype(np.float32)) for p in ids}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=1000, help="B for the vectorised bootstrap.")
    parser.add_argument("--naive-resamples", type=int, default=20, help="Resamples the naive loop really runs.")
    parser.add_argument("--repeats", type=int, default=3, help="Timed runs of each row (best is kept).")
    args = parser.parse_args()

    wordnet = load_wordnet()
    answers = build_answers(wordnet)
    synonyms = SynonymIndex(wordnet)
    axis_names = list(AXES)
    score_axes(AXIS_SPECS, all_concepts(answers), SETTINGS, synonyms=synonyms)  # warm the synonym index

    def point() -> None:
        score_axes(AXIS_SPECS, all_concepts(answers), SETTINGS, synonyms=synonyms)

    def intervals(method: str, embeddings=None) -> Callable[[], object]:
        boot = BootstrapSettings(resamples=args.resamples, method=method)  # type: ignore[arg-type]
        return lambda: score_intervals(
            AXIS_SPECS, answer_counts(answers, axis_names), SETTINGS, boot, synonyms=synonyms, embeddings=embeddings
        )

    point_s = best_of(args.repeats, point)
    counts_s = best_of(args.repeats, lambda: answer_counts(answers, axis_names))
    percentile_s = best_of(args.repeats, intervals("percentile"))
    bca_s = best_of(args.repeats, intervals("bca"))
    embedded_s = best_of(args.repeats, intervals("percentile", fake_embeddings()))

    indices = resample_indices(IMAGES, args.naive_resamples, seed=0)
    start = time.perf_counter()
    slow = naive_cas(answers, indices, synonyms)
    naive_s = (time.perf_counter() - start) / args.naive_resamples * args.resamples
    counts = answer_counts(answers, axis_names)
    fast = tibet_samples(AXIS_SPECS, counts, SETTINGS, multiplicities(indices, IMAGES), synonyms=synonyms)
    if not np.allclose(fast.cas, slow, rtol=0, atol=1e-12, equal_nan=True):
        raise SystemExit("the vectorised and the naive bootstrap disagree on CAS: a bug in one of them")

    b = args.resamples
    print(f"input: {len(answers)} sets x {IMAGES} images x {len(AXES) + 1} answers; B = {b}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    print(f"{'':52} {'seconds':>8} {'x point':>8}")
    rows = [
        ("point estimate (histograms + score_axes)", point_s),
        ("count matrices, built once (included below)", counts_s),
        (f"bootstrap, percentile, B={b}", percentile_s),
        (f"bootstrap, BCa, B={b} (+{IMAGES} jackknife rows)", bca_s),
        (f"bootstrap, percentile, B={b}, with 768-d embeddings", embedded_s),
        (f"naive loop, B={b} (extrapolated from {args.naive_resamples})", naive_s),
    ]
    for label, seconds in rows:
        print(f"{label:52} {seconds:8.3f} {seconds / point_s:8.1f}")
    print(f"naive / vectorised (percentile): {naive_s / percentile_s:.0f}x; "
          f"naive and vectorised CAS agree on {args.naive_resamples} shared resamples")
    verdict = "meets" if percentile_s < 2.0 else "misses"
    print(f"target B={b} under 2 s: {verdict} ({percentile_s:.2f} s)")


if __name__ == "__main__":
    main()
