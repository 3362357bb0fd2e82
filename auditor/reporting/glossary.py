"""What each number means, for people: the glossary every report reads (``glossary.yaml``).

HELM's habit: a metric carries its display name, what it measures, what high and low
values mean, its range and whether lower is better. The terminal, HTML and JSON reports
all print these same words beside the numbers; the text lives in one data file so a
wording change is one edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import yaml


@dataclass(frozen=True)
class MetricInfo:
    """What a number means, for people: the renderers print this beside the number."""

    key: str
    name: str
    description: str
    high: str
    low: str
    value_range: str
    lower_is_better: bool | None = None

    @property
    def explanation(self) -> str:
        """One line: what it measures, then what high and low values mean."""
        return f"{self.description} High: {self.high}. Low: {self.low}."


def _load() -> dict[str, MetricInfo]:
    text = resources.files("auditor.reporting").joinpath("glossary.yaml").read_text(encoding="utf-8")
    entries = yaml.safe_load(text)["metrics"]
    keys = [entry["key"] for entry in entries]
    if repeated := sorted({key for key in keys if keys.count(key) > 1}):
        raise ValueError(f"glossary.yaml lists {', '.join(repeated)} twice: one would explain the other's number")
    return {
        entry["key"]: MetricInfo(
            key=entry["key"],
            name=entry["name"],
            description=entry["description"],
            high=entry["high"],
            low=entry["low"],
            value_range=entry["range"],
            lower_is_better=entry.get("lower_is_better"),
        )
        for entry in entries
    }


#: Metric key -> what it means, in the order reports explain them.
METRICS: dict[str, MetricInfo] = _load()
