"""Intervals on the change between two runs: CAS(B) - CAS(A) and BAV(B) - BAV(A).

Two audits of the same prompt (two models, or a model before and after a mitigation)
usually share their seeds: image i of every set of both runs comes from seed i. Then the
change is bootstrapped *paired*: one draw of seed indices is applied to both runs, so
noise both runs share through a seed cancels. Runs with different seeds are resampled
independently (each run its own draw), which gives wider, still honest, intervals. Each
run is rescored with its own scoring settings, from its recorded answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from auditor.core.errors import AuditorError
from auditor.core.text import single_spaced
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
    #: True when both runs were resampled with the same draw of seed indices.
    paired: bool
    settings: BootstrapSettings


def counterfactual_key(text: str) -> str:
    """How counterfactuals of two runs are matched: by their text, case and runs of whitespace aside."""
    return single_spaced(text).casefold()


def change_intervals(a: RunRecord, b: RunRecord, settings: BootstrapSettings) -> ChangeIntervals:
    """Every change between ``a`` and ``b`` that both runs can score, rescored from their answers, with its
    percentile interval.

    Axes are matched by name, counterfactuals by :func:`counterfactual_key`.
    """
    paired = a.config.seeds == b.config.seeds
    samples = {}
    for label, record, offset in (("a", a, 0), ("b", b, 0 if paired else 1)):
        plan = plan_of(record)
        axes = [(axis.name, axis.counterfactuals) for axis in plan.axes]
        seeds = record.config.images_per_prompt
        check_resamplable(seeds)
        draws = bootstrap.resample_weights(seeds, settings.resamples, settings.seed + offset)
        weights = np.vstack([np.ones((1, seeds)), draws])
        try:
            found = tibet_samples(axes, record_counts(record), record.config.scoring, weights)
        except AuditorError as exc:
            raise AuditorError(f"run {label.upper()} ({record.run_id!r}): {exc}") from None
        pairs = [(name, counterfactual_key(cf)) for name, cfs in axes for cf in cfs]
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
    return ChangeIntervals(cas=cas, bav=bav, paired=paired, settings=settings)
