"""Reading any record from disk in one call: upgraded, validated, and typed by its ``kind``."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import TypeAdapter, ValidationError

from auditor.core.errors import AuditorError
from auditor.core.store import describe_validation_error, load_json
from auditor.records.base import StudyRecord
from auditor.records.kinds import AnyRecord
from auditor.records.migrations import upgrade
from auditor.records.prompt_audit import RunRecord

RecordT = TypeVar("RecordT", bound=StudyRecord)

_ANY_RECORD = TypeAdapter(AnyRecord)


def load_any_record(path: Path) -> AnyRecord:
    """Load a run record of any kind (chosen by its ``kind`` field), upgrading older schema versions."""
    data = upgrade(load_json(path), str(path))
    try:
        return _ANY_RECORD.validate_python(data)
    except ValidationError as exc:
        raise AuditorError(f"{path} is not a valid run record: {describe_validation_error(exc)}") from None


def load_record(path: Path, expected: type[RecordT] = RunRecord) -> RecordT:
    """Load a record of the ``expected`` kind (a prompt audit by default); any other is a one-line error."""
    record = load_any_record(path)
    if not isinstance(record, expected):
        raise AuditorError(
            f"{path} is {record.a_title()} record; "
            f"this command reads {expected.title} records "
            f"(made by `{expected.made_by}`)"
        )
    return record


__all__ = ["load_any_record", "load_record"]
