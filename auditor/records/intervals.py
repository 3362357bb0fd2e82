"""Uncertainty beside every number: bootstrap intervals and multiple-testing adjustments.

A score's interval comes from the paired bootstrap over seeds (``--bootstrap``,
:mod:`auditor.scoring.uncertainty`); reports claim a difference only where its interval
supports it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from auditor.core.choices import IntervalMethod
from auditor.records.record import Record


class Interval(Record):
    """The bootstrap interval of one number (the number itself sits beside it in the record)."""

    low: float | None = Field(description="Lower bound; null where too few resamples define the statistic.")
    high: float | None = Field(description="Upper bound; null likewise.")
    method: IntervalMethod = Field(description="Method actually used ('bca' falls back to 'percentile', see note).")
    defined: float = Field(
        ge=0, le=1, description="Share of resamples in which the statistic exists; the interval is over those."
    )
    note: str | None = Field(default=None, description="Why BCa was not used when it was asked for.")

    def excludes(self, value: float = 0.0) -> bool:
        """Whether the whole interval lies above or below ``value`` (a difference that is not 0)."""
        return self.low is not None and self.high is not None and (self.low > value or self.high < value)

    def bounds(self) -> list[float | None]:
        """``[low, high]``, as the JSON outputs carry it."""
        return [self.low, self.high]


class Difference(Record):
    """CAS(first) - CAS(second) of two counterfactuals of one axis, with its interval."""

    first: str = Field(description="Prompt set id of the counterfactual with the higher CAS.")
    second: str = Field(description="Prompt set id of the counterfactual with the lower CAS.")
    value: float = Field(description="CAS(first) - CAS(second).")
    ci: Interval | None = Field(default=None, description="Its interval from the same resamples as the CAS values.")


class IntervalSettings(Record):
    """How a run's intervals were made (the settings are also in the run's scoring config)."""

    resamples: int = Field(ge=1, description="Bootstrap resamples of the seed indices.")
    level: float = Field(gt=0, lt=1, description="Coverage of every interval.")
    method: IntervalMethod = Field(description="Interval method asked for.")
    seed: int = Field(ge=0, description="Seed of the resampling.")
    seeds: int = Field(ge=1, description="Seed indices resampled (images per prompt set).")


#: How p-values of several tests in one run were adjusted.
Correction = Literal["holm", "benjamini-hochberg", "none"]
