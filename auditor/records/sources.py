"""The input files a study read, each identified by its content: a record names what it was computed from, so a
rerun months later can tell whether the same files are at hand."""

from __future__ import annotations

from pydantic import Field

from auditor.records.record import Record


class CaptionFile(Record):
    """One caption file read (amplification's training sample, a trace's captions), identified by its content."""

    path: str = Field(description="The file as read (a trace's: absolute).")
    sha256: str = Field(
        description="sha256 of its bytes (memoised in the content cache by path, size, mtime and inode)."
    )
    bytes: int = Field(ge=0, description="Its size.")
    format: str = Field(description="txt, csv, tsv, jsonl or parquet.")
    caption_column: str | None = Field(description="The column captions were read from (None for TXT).")
