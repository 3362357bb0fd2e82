"""The base model of every record type: strict, so nothing is half-understood."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    """Base for every record model: strict on unknown fields, validated on assignment.

    A record from a newer or corrupted run fails loudly on load instead of being read
    with fields silently dropped.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
