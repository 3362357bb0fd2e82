"""The input files a study read, each identified by its content: a record names what it was computed from, so a
rerun months later can tell whether the same files are at hand."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from auditor.records.record import Record

if TYPE_CHECKING:  # pragma: no cover
    from auditor.corpora.readers import CaptionReader


class CaptionFile(Record):
    """One caption file read (amplification's training sample, a trace's captions), identified by its content."""

    path: str = Field(description="The file as read (a trace's: absolute).")
    sha256: str = Field(
        description="sha256 of its bytes (memoised in the content cache by path, size, mtime and inode)."
    )
    bytes: int = Field(ge=0, description="Its size.")
    format: str = Field(description="txt, csv, tsv, jsonl or parquet.")
    caption_column: str | None = Field(description="The column captions were read from (None for TXT).")


def caption_files_read(
    reader: CaptionReader, digest: Callable[[Path], str], name: Callable[[Path], str] = str
) -> list[CaptionFile]:
    """The files ``reader`` reads, in order, each with its sha256 (``digest``), size, format and caption column;
    ``name`` writes a file's path (as read, or absolute)."""
    return [
        CaptionFile(
            path=name(path), sha256=digest(path), bytes=path.stat().st_size, format=kind, caption_column=columns[0]
        )
        for path, kind, columns in zip(reader.files, reader.formats, reader.columns, strict=True)
    ]
