"""Reading any record from disk in one call: upgraded, validated, and typed by its ``kind``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from auditor.core.errors import AuditorError
from auditor.core.store import describe_validation_error, load_json
from auditor.records.base import StudyRecord
from auditor.records.kinds import RECORD_TYPES, AnyRecord
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


def load_record_summary(path: Path) -> AnyRecord:
    """A record as a listing reads it: only its kind's ``SUMMARY_FIELDS`` are validated, its images and results are
    neither read nor checked (left at their defaults), nor are fields the summary does not know. A listing of
    hundreds of paper-size runs then takes a second, not half a minute and gigabytes; a record whose results are
    damaged lists as its summary reads, and the commands that read it whole (report, score, compare) say what is
    wrong. Not for anything that reads results or writes the record back.

    A record of another schema version (upgraded on load, or a newer auditor's), or one whose summary does not
    read, is loaded whole, which upgrades it or says in one line what is wrong.
    """
    try:
        summary = _SUMMARY.validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return load_any_record(path)
    return _SUMMARIES[type(summary)].model_construct(**dict(summary))


def _summary_type(record_type: type[StudyRecord]) -> type[BaseModel]:
    """The model of ``record_type``'s summary fields, other fields ignored (unread, so a listing stays fast)."""
    fields = {name: (info.annotation, info) for name, info in record_type.model_fields.items()
              if name in record_type.SUMMARY_FIELDS}  # fmt: skip
    return create_model(f"{record_type.__name__}Summary", __config__=ConfigDict(extra="ignore"), **fields)


#: Each kind's summary model -> its record class.
_SUMMARIES = {_summary_type(kind): kind for kind in RECORD_TYPES}
_SUMMARY = TypeAdapter(Annotated[Union[tuple(_SUMMARIES)], Field(discriminator="kind")])  # noqa: UP007


def load_record(path: Path, expected: type[RecordT] = RunRecord) -> RecordT:
    """Load a record of the ``expected`` kind (a prompt audit by default); any other is a one-line error that names
    the command which made it (the one that continues or shows it)."""
    record = load_any_record(path)
    if not isinstance(record, expected):
        raise AuditorError(
            f"{path} is {record.a_title()} record (made by `{record.made_by}`); "
            f"this command reads {expected.title} records "
            f"(made by `{expected.made_by}`)"
        )
    return record


__all__ = ["load_any_record", "load_record", "load_record_summary"]
