"""Streaming readers for caption files: TXT, CSV, TSV, JSONL and Parquet, one file or a glob.

Training-data samples can be far larger than memory, so files are read in record batches
(pyarrow's streaming CSV/JSON readers and Parquet row groups; plain line iteration for
TXT) and only the caption column, plus the image column when asked for, is ever
materialised. Files of a glob or folder are read one after another in sorted order, so a
row's identity, ``(file, row)``, is the same on every run.

Formats by suffix: ``.txt`` (one caption per line), ``.csv``, ``.tsv``, ``.jsonl`` /
``.ndjson`` (one JSON object per line), ``.parquet`` / ``.pq``; the text formats may be
compressed (``.gz``, ``.bz2``, ``.zst``, ``.lz4``, detected from the suffix). The caption
column is the one given, else ``caption`` or ``TEXT`` (LAION's name), matched exactly
first and then ignoring case. A column given by its position (``1`` for the first) reads a
CSV/TSV file that has no header row, such as Conceptual Captions' TSV (caption, then URL).
Rows whose caption is empty or missing are counted and skipped.
"""

from __future__ import annotations

import glob
import io
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from auditor.core.errors import AuditorError, StartAgainError

#: Caption column names tried, in order, when none is given.
DEFAULT_CAPTION_COLUMNS = ("caption", "TEXT")
#: Rows per batch.
BATCH_ROWS = 10_000
#: Compression suffixes the text formats may carry.
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zst", ".lz4")
#: Format by (uncompressed) suffix.
FORMATS = {
    ".txt": "txt",
    ".csv": "csv",
    ".tsv": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
#: Bytes per block of the CSV/JSON readers; Arrow reads a fixed number of blocks ahead, so this bounds memory.
_BLOCK_BYTES = 1 << 20


@dataclass(frozen=True)
class CaptionBatch:
    """Consecutive rows of one file that have a caption."""

    #: The file read.
    source: Path
    #: 0-based data-row numbers within ``source`` (header excluded), one per caption.
    rows: list[int]
    captions: list[str]
    #: The image column's values (None where empty), or None when no image column was asked for.
    images: list[str | None] | None


def file_format(path: Path) -> str:
    """The format of ``path`` from its suffix (a compression suffix is looked through)."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes = suffixes[:-1]
    kind = FORMATS.get(suffixes[-1]) if suffixes else None
    if kind is None:
        raise AuditorError(
            f"cannot read captions from {path}: unknown file type; use one of "
            f"{', '.join(sorted(FORMATS))} (text formats optionally compressed)"
        )
    if kind == "parquet" and path.suffix.lower() in COMPRESSION_SUFFIXES:
        raise AuditorError(f"cannot read {path}: Parquet files are compressed inside; do not compress the file itself")
    return kind


def caption_files(pattern: str | Path) -> list[Path]:
    """The files a path, folder or glob names, sorted; a one-line error when there are none.

    A folder means every file of a known type under it (recursively, so a partitioned
    Parquet dataset works).
    """
    text = str(pattern)
    path = Path(text).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(p for p in path.rglob("*") if p.is_file() and _known(p))
        if not found:
            raise AuditorError(f"no caption files ({', '.join(sorted(FORMATS))}) in folder {path}")
        return found
    if glob.has_magic(text):
        found = sorted(Path(p) for p in glob.glob(str(Path(text).expanduser()), recursive=True) if Path(p).is_file())
        if not found:
            raise AuditorError(f"no files match {text}")
        return found
    raise AuditorError(f"no such caption file or folder: {text}")


def _known(path: Path) -> bool:
    try:
        file_format(path)
    except AuditorError:
        return False
    return True


def is_position(column: str | None) -> bool:
    """Whether a column is given by its 1-based position (a file without a header row) rather than its name."""
    return column is not None and column.isdigit()


def resolve_column(available: Sequence[str], wanted: str | None, where: Path, what: str = "caption") -> str:
    """The column to read: ``wanted`` if given (exact name, or position in a file read without a header), else the
    first default caption column.

    Defaults match exactly first, then ignoring case ("Caption", "text"). A missing column
    is one line naming the columns the file has.
    """
    if is_position(wanted):
        position = int(wanted)
        if not 1 <= position <= len(available):
            raise AuditorError(f"{where} has {len(available)} columns; there is no {what} column {position}")
        return available[position - 1]
    if wanted is not None:
        if wanted in available:
            return wanted
        raise AuditorError(f"{where} has no {what} column {wanted!r}; its columns: {', '.join(available) or '(none)'}")
    for candidate in DEFAULT_CAPTION_COLUMNS:
        if candidate in available:
            return candidate
    folded = {name.casefold(): name for name in available}
    for candidate in DEFAULT_CAPTION_COLUMNS:
        if candidate.casefold() in folded:
            return folded[candidate.casefold()]
    raise AuditorError(
        f"{where} has no caption column (looked for {' or '.join(map(repr, DEFAULT_CAPTION_COLUMNS))}); "
        f"its columns: {', '.join(available) or '(none)'}; pass --caption-column NAME, or --caption-column 1 (its "
        "position) for a file without a header row"
    )


class CaptionReader:
    """Captions (and image references) of one file or many, in batches.

    Iterating reads the files again from the start; the counters describe the last
    complete pass: ``rows`` read and ``skipped`` rows without a caption.
    """

    def __init__(
        self,
        pattern: str | Path,
        caption_column: str | None = None,
        image_column: str | None = None,
        batch_rows: int = BATCH_ROWS,
    ):
        if batch_rows < 1:
            raise AuditorError(f"the batch size must be at least 1 (got {batch_rows})")
        self.files = caption_files(pattern)
        self.formats = [file_format(path) for path in self.files]
        self.caption_column = caption_column
        self.image_column = image_column
        self.batch_rows = batch_rows
        self.rows = 0
        self.skipped = 0
        #: Columns given by position: the CSV/TSV files have no header row, their first line is data.
        self.headerless = is_position(caption_column)
        if image_column is not None and is_position(image_column) != self.headerless:
            raise AuditorError("give the caption and image columns both by name or both by position (no header row)")
        if self.headerless:
            for path, kind in zip(self.files, self.formats):
                if kind not in ("csv", "tsv", "txt"):
                    raise AuditorError(f"{path} names its columns; a column position is for a CSV/TSV file without a header row")
        if image_column is not None:
            for path, kind in zip(self.files, self.formats):
                if kind == "txt":
                    raise AuditorError(f"{path} is a TXT file of captions only; it has no image column {image_column!r}")
        #: The caption column each file is read from (None for TXT), resolved up front so a
        #: missing column fails before anything is computed.
        self.columns = [self._columns(path, kind) for path, kind in zip(self.files, self.formats)]

    def __iter__(self) -> Iterator[CaptionBatch]:
        rows = skipped = 0
        for path, kind, (caption, image) in zip(self.files, self.formats, self.columns):
            for batch in _read(path, kind, caption, image, self.batch_rows, self.headerless):
                rows += batch.read
                skipped += batch.read - len(batch.captions)
                if batch.captions:
                    yield CaptionBatch(path, batch.rows, batch.captions, batch.images)
        self.rows, self.skipped = rows, skipped

    def _columns(self, path: Path, kind: str) -> tuple[str | None, str | None]:
        if path.stat().st_size == 0:  # the table readers' own words for it ("Empty JSON stream") name no captions
            raise AuditorError(f"{path} is empty: it holds no captions")
        if kind == "txt":  # one caption per line: a column named for the other files of a glob is theirs
            if self.caption_column not in (None, "1") and all(other == "txt" for other in self.formats):
                raise AuditorError(
                    f"{path} is a TXT file, one caption per line: it has no caption column {self.caption_column!r}"
                )
            return None, None
        available = _column_names(path, kind, self.headerless)
        caption = resolve_column(available, self.caption_column, path)
        image = resolve_column(available, self.image_column, path, "image") if self.image_column else None
        return caption, image


@dataclass
class _Chunk:
    read: int
    rows: list[int]
    captions: list[str]
    images: list[str | None] | None


def _column_names(path: Path, kind: str, headerless: bool = False) -> list[str]:
    """The columns of a file, reading only its first block (or the Parquet footer); of a CSV/TSV file without a
    header row, Arrow's names for them by position."""
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return list(pq.ParquetFile(path).schema_arrow.names)
        if kind in ("csv", "tsv"):
            import pyarrow.csv as pcsv

            return list(pcsv.open_csv(path, **_csv_options(kind, headerless=headerless)).schema.names)
        import pyarrow.json as pjson

        return list(pjson.open_json(path, read_options=pjson.ReadOptions(block_size=_BLOCK_BYTES)).schema.names)
    except (OSError, ValueError) as exc:  # pyarrow.ArrowInvalid is a ValueError
        raise AuditorError(f"cannot read {path}: {_problem(path, kind, exc, 0)}") from exc


def _csv_options(kind: str, convert=None, headerless: bool = False) -> dict:
    import pyarrow.csv as pcsv

    options = {
        "read_options": pcsv.ReadOptions(block_size=_BLOCK_BYTES, autogenerate_column_names=headerless),
        "parse_options": pcsv.ParseOptions(delimiter="\t" if kind == "tsv" else ",", newlines_in_values=True),
    }
    if convert is not None:
        options["convert_options"] = convert
    return options


def _read(
    path: Path, kind: str, caption: str | None, image: str | None, batch_rows: int, headerless: bool = False
) -> Iterator[_Chunk]:
    done = 0  # rows read before a failing block
    try:
        if kind == "txt":
            chunks = _read_txt(path, batch_rows)
        else:
            chunks = _read_table(path, kind, caption, image, batch_rows, headerless)
        for chunk in chunks:
            done += chunk.read
            yield chunk
    except (OSError, ValueError) as exc:
        raise AuditorError(f"cannot read {path}: {_problem(path, kind, exc, done)}") from exc


#: Where Arrow's JSON reader says a parse error is: the row within the block it was parsing.
_JSON_ROW = re.compile(r"\s*in row (\d+)$")


def _problem(path: Path, kind: str, exc: BaseException, done: int) -> str:
    """What went wrong reading ``path``, in the reader's words; a JSONL error is placed by its file line, where Arrow
    counts rows from 0 within the block it read (after the ``done`` rows of the blocks before)."""
    message = _first_line(exc)
    if kind != "jsonl" or (match := _JSON_ROW.search(message)) is None:
        return message
    row = done + int(match[1])
    line = _nonblank_line(path, row)
    where = f"line {line}" if line is not None else f"JSON object {row + 1}"
    return f"{message[: match.start()]} ({where})"


def _nonblank_line(path: Path, index: int) -> int | None:
    """The 1-based number of the line holding the ``index``-th (0-based) JSON object of a JSONL file: Arrow skips
    blank lines and reads one object per line. Read only on the way to an error, as far as that line."""
    import pyarrow as pa

    with pa.input_stream(str(path), compression="detect") as raw:
        seen = -1
        for number, line in enumerate(io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace"), 1):
            seen += bool(line.strip())
            if seen == index:
                return number
    return None


def _read_txt(path: Path, batch_rows: int) -> Iterator[_Chunk]:
    import pyarrow as pa

    with pa.input_stream(str(path), compression="detect") as raw:
        # UTF-8 as every other input file (a byte-order mark dropped); other bytes are "cannot read", not guessed at.
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline=None)
        start, lines = 0, []
        try:
            for line in text:
                lines.append(line.rstrip("\r\n"))
                if len(lines) == batch_rows:
                    yield _chunk(start, lines, None)
                    start, lines = start + len(lines), []
        except UnicodeDecodeError as exc:  # text is decoded a block ahead: the line read next is where it starts
            bad = exc.object[exc.start : exc.start + 1].hex()
            raise AuditorError(
                f"cannot read {path}: not UTF-8 text at or after line {start + len(lines) + 1} (byte 0x{bad})"
            ) from None
        if lines:
            yield _chunk(start, lines, None)


def _read_table(
    path: Path, kind: str, caption: str, image: str | None, batch_rows: int, headerless: bool = False
) -> Iterator[_Chunk]:
    import pyarrow as pa

    columns = [caption] if image is None or image == caption else [caption, image]
    if kind == "parquet":
        import pyarrow.parquet as pq

        batches = pq.ParquetFile(path).iter_batches(batch_size=batch_rows, columns=columns)
    elif kind in ("csv", "tsv"):
        import pyarrow.csv as pcsv

        convert = pcsv.ConvertOptions(
            include_columns=columns, column_types={name: pa.string() for name in columns}, strings_can_be_null=False
        )
        batches = pcsv.open_csv(path, **_csv_options(kind, convert, headerless))
    else:
        import pyarrow.json as pjson

        schema = pa.schema([(name, pa.string()) for name in columns])
        parse = pjson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        batches = pjson.open_json(path, read_options=pjson.ReadOptions(block_size=_BLOCK_BYTES), parse_options=parse)
    start = 0
    for batch in batches:
        # CSV/JSON blocks are sized in bytes, not rows: cut them to at most batch_rows.
        for offset in range(0, batch.num_rows, batch_rows):
            part = batch.slice(offset, batch_rows)
            captions = _strings(part.column(columns.index(caption)))
            images = _strings(part.column(columns.index(image))) if image is not None else None
            yield _chunk(start, captions, images)
            start += part.num_rows


def _strings(column) -> list[str | None]:
    """A column's values as Python strings (numbers written as text), None for nulls."""
    return [None if value is None else str(value) for value in column.to_pylist()]


def _chunk(start: int, captions: list[str | None], images: list[str | None] | None) -> _Chunk:
    keep = [i for i, text in enumerate(captions) if text is not None and text.strip()]
    return _Chunk(
        read=len(captions),
        rows=[start + i for i in keep],
        captions=[captions[i] for i in keep],  # type: ignore[misc]
        images=[images[i] or None for i in keep] if images is not None else None,
    )


def image_path(value: str, source: Path) -> Path:
    """The image file an image-column value names: an absolute path, a ``file://`` URL, or a path
    relative to the caption file's folder. Web URLs are refused: images must already be on disk, and a run that met
    one starts again with another file (its resume would read the same one, and refuses a changed one)."""
    text = value.strip()
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif "://" in text:
        raise StartAgainError(
            f"image {value!r} in {source} is a URL; download the images first and give their paths in the image column"
        )
    path = Path(text).expanduser()
    return path if path.is_absolute() else source.parent / path


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
