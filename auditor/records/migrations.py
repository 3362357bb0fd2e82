"""Upgrades of older record files, so a run recorded months ago still loads and reports.

Each step takes the JSON of one schema version and returns the next version's JSON; a
record is upgraded step by step before it is validated. Every record this package has
written carries ``schema_version``.

* 1 -> 2: T2IAT's effect size d is ``null`` when the pooled standard deviation is ~0,
  and its label is then ``"undefined"``; version 1 wrote ``"large"`` or ``"negligible"``
  for such a d. Every association (prompt-audit axes, T2IAT results, occupation tests)
  with a null d gets the ``"undefined"`` label. Version 1 computed no intervals, so a
  prompt audit's scoring settings say ``bootstrap: 0`` (version 2's default is 1000
  resamples); ``auditor score`` adds the intervals. The other fields version 2 added
  (partial weights, API service, interval fields) have defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from auditor.core.errors import AuditorError
from auditor.records.base import SCHEMA_VERSION

JSON = Any


def _undefined_effect_labels(data: JSON) -> JSON:
    """1 -> 2: an association whose effect size is null is labelled ``undefined``."""
    if isinstance(data, dict):
        upgraded = {key: _undefined_effect_labels(value) for key, value in data.items()}
        if "effect_label" in upgraded and "effect_size" in upgraded and upgraded["effect_size"] is None:
            upgraded["effect_label"] = "undefined"
        return upgraded
    if isinstance(data, list):
        return [_undefined_effect_labels(item) for item in data]
    return data


def _version_2(data: JSON) -> JSON:
    """1 -> 2: undefined effect labels; no bootstrap in a prompt audit's scoring settings."""
    data = _undefined_effect_labels(data)
    config = data.get("config") if data.get("kind") == "prompt_audit" else None
    scoring = config.get("scoring") if isinstance(config, dict) else None  # a malformed one fails validation
    if isinstance(scoring, dict):
        scoring.setdefault("bootstrap", 0)
    return data


#: Schema version -> the step that upgrades a record of that version to the next one.
MIGRATIONS: dict[str, Callable[[JSON], JSON]] = {"1": _version_2}


def upgrade(data: JSON, where: str) -> JSON:
    """``data`` (a record's decoded JSON) upgraded to :data:`SCHEMA_VERSION`; ``where`` names it in errors."""
    if not isinstance(data, dict):
        return data  # validation will say what is wrong
    if data.get("schema_version") is None:
        raise AuditorError(f"{where} names no record schema version: it is not a record auditor wrote")
    version = str(data["schema_version"])
    while version != SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise AuditorError(
                f"{where} has record schema version {version!r}; this auditor reads versions "
                f"{', '.join(sorted([*MIGRATIONS, SCHEMA_VERSION]))} (a newer auditor may have written it)"
            )
        data = {**step(data), "schema_version": str(int(version) + 1)}
        version = data["schema_version"]
    return data
