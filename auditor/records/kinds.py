"""Every kind of study record, told apart by its ``kind`` field.

A new study adds its record class to :data:`RECORD_TYPES` (loading and listing then know
it) and to :data:`auditor.records.schemas.SCHEMA_MODELS` under its schema's file name
(``tests/test_records.py`` fails while one is missing from the other).
"""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import Field

from auditor.records.amplification import AmplificationRecord
from auditor.records.base import StudyRecord
from auditor.records.batch import BatchRecord
from auditor.records.explore import ExploreRecord
from auditor.records.prompt_audit import RunRecord
from auditor.records.t2iat import OccupationsRecord, T2IATRecord
from auditor.records.trace import TraceRecord

#: The record classes, one per kind of study.
RECORD_TYPES: tuple[type[StudyRecord], ...] = (
    RunRecord, T2IATRecord, OccupationsRecord, AmplificationRecord, TraceRecord, BatchRecord, ExploreRecord
)

#: Any run record, validated by its ``kind`` field.
AnyRecord = Annotated[Union[RECORD_TYPES], Field(discriminator="kind")]  # noqa: UP007 (a tuple unpacks only here)

