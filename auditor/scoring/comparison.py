"""Intervals on the change between two runs: CAS(B) - CAS(A) and BAV(B) - BAV(A).

Two audits of the same prompt (two models, or a model before and after a mitigation)
usually share their seeds: image i of every set of both runs comes from seed i. The
change is bootstrapped *paired* over the seeds they share: one draw of those seeds is
applied to both runs, so noise both runs share through a seed cancels. A run's other seeds
(one run drew 40 images, the other 20 of the same seeds) are resampled independently, each
run its own draw, so each run's resample keeps its own number of images. Runs that share no
seed, or whose pairing would leave one seed alone in a stratum, are resampled wholly
independently, which gives wider, still honest, intervals. Runs whose backend takes no seed
(an images API, a folder of images) pair image i with image i, all that links their images
(the same request, the same file); such a run and a seeded one share no noise and are
resampled independently. Each run is rescored with its own scoring settings, from its
recorded answers.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from auditor.core.errors import AuditorError
from auditor.core.text import text_key
from auditor.metrics import bootstrap
from auditor.records import Interval, RunRecord
from auditor.scoring.intervals import record_counts
from auditor.scoring.tibet import plan_of
from auditor.scoring.uncertainty import BootstrapSettings, check_resamplable, tibet_samples

#: Decimals a change between two runs is rounded to: what lies below is floating-point noise.
NOISE_DIGITS = 12


@dataclass(frozen=True)
class ChangeIntervals:
    """Intervals of B - A per axis (BAV) and per counterfactual (CAS), matched by the caller's keys."""

    #: (axis, counterfactual key) -> CAS(B) - CAS(A) rescored from the answers (None where undefined), and its interval.
    cas: dict[tuple[str, str], tuple[float | None, Interval]]
    #: axis -> BAV(B) - BAV(A), and its interval.
    bav: dict[str, tuple[float | None, Interval]]
    #: How many seeds the runs share, resampled with one draw for both.
    paired_seeds: int
    #: Seeds of run A, then of run B, that the other run lacks (each run's own draw).
    unpaired_seeds: tuple[int, int]
    #: How many seeds both runs drew, paired or not (a pairing that would leave a lone seed in a stratum is not made).
    common_seeds: int
    settings: BootstrapSettings
    #: Whether run A's, and run B's, seeds chose their images (False for a backend that takes no seed). Two runs
    #: without seeds count image positions where the fields above say seeds.
    seeded: tuple[bool, bool] = (True, True)

    @property
    def fully_paired(self) -> bool:
        """Whether every seed of both runs was resampled with one draw for both."""
        return self.paired_seeds > 0 and self.unpaired_seeds == (0, 0)


def change_intervals(a: RunRecord, b: RunRecord, settings: BootstrapSettings) -> ChangeIntervals:
    """Every change between ``a`` and ``b`` that both runs can score, rescored from their answers, with its
    percentile interval.

    Axes are matched by name, counterfactuals by :func:`text_key`.
    """
    for record in (a, b):
        check_resamplable(record.config.images_per_prompt)
    seeds_a, seeds_b = a.image_seeds(), b.image_seeds()
    draws = paired_draws(
        image_keys(seeds_a, a.config.images_per_prompt),
        image_keys(seeds_b, b.config.images_per_prompt),
        settings.resamples,
        settings.seed,
    )
    samples = {}
    for label, record, weights in (("a", a, draws.a), ("b", b, draws.b)):
        plan = plan_of(record)
        axes = [(axis.name, axis.counterfactuals) for axis in plan.axes]
        weights = np.vstack([np.ones((1, weights.shape[1])), weights])
        try:
            found = tibet_samples(axes, record_counts(record), record.config.scoring, weights)
        except AuditorError as exc:
            raise AuditorError(f"run {label.upper()} ({record.run_id!r}): {exc}") from None
        pairs = [(name, text_key(cf)) for name, cfs in axes for cf in cfs]
        columns = {pair: j for j, pair in enumerate(pairs)}
        samples[label] = (found, columns, {name: i for i, (name, _) in enumerate(axes)})

    (found_a, cas_a, axes_a), (found_b, cas_b, axes_b) = samples["a"], samples["b"]

    def interval(change: np.ndarray) -> tuple[float | None, Interval]:
        """The change (row 0) and its interval over the resamples; differences below 1e-12 are rounding noise
        (equal values summed in another order), kept as 0 so an unchanged value never excludes 0."""
        change = np.round(change, NOISE_DIGITS)
        bounds = bootstrap.intervals(change[:1], change[1:, None], level=settings.level)
        low, high = bounds.low[0], bounds.high[0]
        return None if np.isnan(change[0]) else float(change[0]), Interval(
            low=None if np.isnan(low) else float(low),
            high=None if np.isnan(high) else float(high),
            method="percentile",
            defined=float(bounds.defined[0]),
        )

    cas = {
        shared: interval(found_b.cas[:, cas_b[shared]] - found_a.cas[:, cas_a[shared]])
        for shared in cas_a.keys() & cas_b.keys()
    }
    bav = {
        axis: interval(found_b.bav[:, axes_b[axis]] - found_a.bav[:, axes_a[axis]])
        for axis in axes_a.keys() & axes_b.keys()
    }
    return ChangeIntervals(
        cas=cas, bav=bav, paired_seeds=draws.shared, unpaired_seeds=draws.unshared, common_seeds=draws.common,
        settings=settings, seeded=(seeds_a is not None, seeds_b is not None),
    )  # fmt: skip


def image_keys(seeds: list[int] | None, images: int) -> list[Hashable]:
    """What ties image i of a run (its :meth:`~auditor.records.StudyRecord.image_seeds`, ``images`` per set) to
    another run's images: its seed, or for a backend that takes no seed its position (the same request, the same
    file); the two kinds never match each other."""
    if seeds is None:
        return [("position", i) for i in range(images)]
    return [("seed", seed) for seed in seeds]


@dataclass(frozen=True)
class PairedDraws:
    """Bootstrap weight rows of two runs over their own image indices (image i: the run's seed i)."""

    a: np.ndarray
    b: np.ndarray
    #: Seeds both runs drew, resampled with one draw for both (0 when the runs were resampled independently).
    shared: int
    #: Seeds of run A, and of run B, resampled with each run's own draw (all of them when not paired).
    unshared: tuple[int, int]
    #: Seeds both runs drew, whether or not they were paired.
    common: int


def paired_draws(seeds_a: Sequence[Hashable], seeds_b: Sequence[Hashable], resamples: int, seed: int) -> PairedDraws:
    """Resample the seeds both runs drew with one draw for both (``seed``), and each run's other seeds with a
    draw of its own (``seed + 1`` for A's, ``seed + 2`` for B's): a bootstrap stratified by whether a seed is
    shared, so each run's resample has its own number of images and shared noise cancels in the change.

    A stratum's resamples vary its seeds' share of the variance by (n - 1) / n, so a stratum of one seed
    would never vary at all and the intervals would come out too narrow: where a stratum would hold a single
    seed, each run is resampled on its own instead (``seed + 1`` and ``seed + 2``). A seed a run repeats (an
    old record) pairs with its same occurrence in the other run. Runs with the same seeds in the same order get
    exactly the rows of one ``resample_weights(len(seeds), resamples, seed)`` each."""
    keys_a, keys_b = _occurrences(seeds_a), _occurrences(seeds_b)
    in_a, in_b = set(keys_a), set(keys_b)
    strata = {
        "shared": [key for key in keys_a if key in in_b],
        "a": [key for key in keys_a if key not in in_b],
        "b": [key for key in keys_b if key not in in_a],
    }
    common = len(strata["shared"])
    if any(len(keys) == 1 for keys in strata.values()) or not common:
        strata = {"shared": [], "a": keys_a, "b": keys_b}
    columns: dict[tuple[Hashable, int], np.ndarray] = {}
    own: dict[str, dict[tuple[Hashable, int], np.ndarray]] = {"a": {}, "b": {}}
    for stratum, keys, offset in (("shared", strata["shared"], 0), ("a", strata["a"], 1), ("b", strata["b"], 2)):
        if keys:
            rows = bootstrap.resample_weights(len(keys), resamples, seed + offset)
            (columns if stratum == "shared" else own[stratum]).update({key: rows[:, j] for j, key in enumerate(keys)})
    return PairedDraws(
        a=np.column_stack([columns.get(key, own["a"].get(key)) for key in keys_a]),
        b=np.column_stack([columns.get(key, own["b"].get(key)) for key in keys_b]),
        shared=len(strata["shared"]),
        unshared=(len(strata["a"]), len(strata["b"])),
        common=common,
    )


def _occurrences(seeds: Sequence[Hashable]) -> list[tuple[Hashable, int]]:
    """Each seed with how many times it came before: (seed, 0) for a seed drawn once."""
    seen: dict[Hashable, int] = {}
    keys = []
    for value in seeds:
        keys.append((value, seen.get(value, 0)))
        seen[value] = seen.get(value, 0) + 1
    return keys
