"""Streaming caption readers: every format, globs and folders, columns, batches, bounded memory."""

from __future__ import annotations

import gzip
import json

import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'auditor[amplification]')")
import pyarrow.parquet as pq  # noqa: E402

from auditor.core.errors import AuditorError, StartAgainError  # noqa: E402
from auditor.corpora.readers import CaptionReader, caption_files, file_format, image_path  # noqa: E402

CAPTIONS = ["A photo of a nurse", 'Teacher, "quoted", in class', "multi\nline caption", "", "a chef cooking"]
IMAGES = ["img/0.png", "img/1.png", None, "img/3.png", "/abs/4.png"]


def _all(reader):
    rows, captions, images = [], [], []
    for batch in reader:
        rows += batch.rows
        captions += batch.captions
        images += batch.images if batch.images is not None else [None] * len(batch.rows)
    return rows, captions, images


def _write(tmp_path, kind, caption_key="caption"):
    if kind == "csv" or kind == "tsv":
        import csv

        path = tmp_path / f"data.{kind}"
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, delimiter="\t" if kind == "tsv" else ",")
            writer.writerow(["url", caption_key])
            writer.writerows([[i or "", c] for c, i in zip(CAPTIONS, IMAGES)])
    elif kind == "jsonl":
        path = tmp_path / "data.jsonl"
        path.write_text("".join(json.dumps({caption_key: c, "url": i}) + "\n" for c, i in zip(CAPTIONS, IMAGES)))
    else:
        path = tmp_path / "data.parquet"
        pq.write_table(pa.table({caption_key: CAPTIONS, "url": IMAGES}), path, row_group_size=2)
    return path


@pytest.mark.parametrize("kind", ["csv", "tsv", "jsonl", "parquet"])
def test_tables_stream_captions_and_images(tmp_path, kind):
    reader = CaptionReader(_write(tmp_path, kind), image_column="url", batch_rows=2)
    rows, captions, images = _all(reader)
    # Row 3 has an empty caption and is skipped; quotes, commas and newlines survive.
    assert rows == [0, 1, 2, 4]
    assert captions == [CAPTIONS[i] for i in rows]
    assert images == [IMAGES[i] for i in rows]
    assert (reader.rows, reader.skipped) == (5, 1)
    assert reader.columns == [("caption", "url")]


@pytest.mark.parametrize("kind", ["csv", "jsonl", "parquet"])
def test_laion_text_column_is_found(tmp_path, kind):
    reader = CaptionReader(_write(tmp_path, kind, caption_key="TEXT"))
    assert reader.columns == [("TEXT", None)]
    assert _all(reader)[1] == [c for c in CAPTIONS if c]


def test_column_names_match_ignoring_case_only_for_defaults(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("Caption,Text\nfirst,second\n")
    assert _all(CaptionReader(path))[1] == ["first"]
    assert _all(CaptionReader(path, caption_column="Text"))[1] == ["second"]


def test_a_file_without_a_header_row_is_read_by_column_position(tmp_path):
    """Conceptual Captions' TSV: caption, then URL, no header. Its first line is data, not column names."""
    path = tmp_path / "gcc-val.tsv"
    path.write_text("a person riding a horse\thttp://x/1.jpg\npeople on a beach\thttp://x/2.jpg\n")
    with pytest.raises(AuditorError, match="no caption column .*--caption-column 1 \\(its position\\) for a file without"):
        CaptionReader(path)  # the first caption is taken for a header: the error says how to read it
    reader = CaptionReader(path, caption_column="1")
    assert _all(reader)[:2] == ([0, 1], ["a person riding a horse", "people on a beach"])
    assert _all(CaptionReader(path, caption_column="1", image_column="2"))[2] == ["http://x/1.jpg", "http://x/2.jpg"]
    with pytest.raises(AuditorError, match="has 2 columns; there is no caption column 3"):
        CaptionReader(path, caption_column="3")
    with pytest.raises(AuditorError, match="both by name or both by position"):
        CaptionReader(path, caption_column="1", image_column="url")
    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text('{"caption": "x"}\n')
    with pytest.raises(AuditorError, match="names its columns; a column position is for a CSV/TSV file"):
        CaptionReader(jsonl, caption_column="1")


def test_missing_columns_are_one_line_naming_the_columns(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("url,alt\nx,y\n")
    with pytest.raises(AuditorError) as error:
        CaptionReader(path)
    message = str(error.value)
    assert "no caption column" in message and "url, alt" in message and "--caption-column" in message
    assert "\n" not in message
    with pytest.raises(AuditorError, match="no caption column 'title'; its columns: url, alt"):
        CaptionReader(path, caption_column="title")
    with pytest.raises(AuditorError, match="no image column 'image'"):
        CaptionReader(path, caption_column="alt", image_column="image")


def test_txt_is_one_caption_per_line_and_may_be_compressed(tmp_path):
    lines = ["a nurse", "", "a chef", "a teacher"]
    plain = tmp_path / "captions.txt"
    plain.write_text("\n".join(lines) + "\n")
    packed = tmp_path / "more.txt.gz"
    packed.write_bytes(gzip.compress("a doctor\r\na pilot\n".encode()))
    reader = CaptionReader(plain, batch_rows=3)
    assert [b.rows for b in reader] == [[0, 2], [3]]
    assert _all(CaptionReader(packed))[1] == ["a doctor", "a pilot"]
    with pytest.raises(AuditorError, match="no image column"):
        CaptionReader(plain, image_column="url")
    assert _all(CaptionReader(plain, caption_column="1"))[1] == ["a nurse", "a chef", "a teacher"]  # its one column
    for column in ("5", "caption"):  # a column it does not have is not ignored
        with pytest.raises(AuditorError, match=f"one caption per line: it has no caption column '{column}'"):
            CaptionReader(plain, caption_column=column)
    (tmp_path / "table.csv").write_text("caption,url\na pilot,x\n")  # a glob's column names the CSV files' column
    assert sorted(_all(CaptionReader(tmp_path / "*[tv]", caption_column="caption"))[1]) == [
        "a chef", "a nurse", "a pilot", "a teacher",
    ]  # fmt: skip


def test_compressed_csv(tmp_path):
    path = tmp_path / "data.csv.gz"
    path.write_bytes(gzip.compress(b"caption\na nurse\na chef\n"))
    assert file_format(path) == "csv"
    assert _all(CaptionReader(path))[1] == ["a nurse", "a chef"]


def test_globs_and_folders_read_files_in_sorted_order(tmp_path):
    folder = tmp_path / "shards"
    (folder / "part=1").mkdir(parents=True)
    pq.write_table(pa.table({"TEXT": ["b1", "b2"]}), folder / "part=1" / "b.parquet")
    pq.write_table(pa.table({"TEXT": ["a1"]}), folder / "a.parquet")
    (folder / "notes.md").write_text("not captions")
    reader = CaptionReader(folder)
    assert [p.name for p in reader.files] == ["a.parquet", "b.parquet"]
    assert [(b.source.name, b.rows, b.captions) for b in reader] == [("a.parquet", [0], ["a1"]), ("b.parquet", [0, 1], ["b1", "b2"])]
    assert [p.name for p in caption_files(str(folder / "**" / "*.parquet"))] == ["a.parquet", "b.parquet"]
    with pytest.raises(AuditorError, match="no files match"):
        caption_files(str(tmp_path / "*.jsonl"))
    with pytest.raises(AuditorError, match="no such caption file"):
        caption_files(tmp_path / "missing.csv")
    with pytest.raises(AuditorError, match="unknown file type"):
        CaptionReader(folder / "notes.md")


def test_a_bad_file_is_one_error_line(tmp_path):
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(AuditorError, match="cannot read .*broken.parquet"):
        CaptionReader(path)
    latin = tmp_path / "latin.txt"  # not UTF-8: refused, as by every other reader, not read as other characters
    latin.write_bytes(("a person\n" * 3 + "a person at a café\n").encode("latin-1"))
    with pytest.raises(AuditorError, match=r"cannot read .*latin.txt: not UTF-8 text at or after line 1 \(byte 0xe9\)"):
        list(CaptionReader(latin))
    bom = tmp_path / "bom.txt"
    bom.write_text("\ufeffa person at work\n", encoding="utf-8")
    assert _all(CaptionReader(bom))[1] == ["a person at work"]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"caption": "a"}\n{"caption": 5}\n')
    with pytest.raises(AuditorError, match="cannot read .*mixed.jsonl"):
        list(CaptionReader(mixed))
    for name in ("empty.jsonl", "empty.csv", "empty.parquet", "empty.txt"):  # not the reader's "Empty JSON stream"
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(AuditorError, match=f"^{tmp_path / name} is empty: it holds no captions$"):
            CaptionReader(tmp_path / name)


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_large_files_stream_in_bounded_memory(tmp_path, monkeypatch, kind):
    """Arrow reads a fixed number of blocks ahead: with 64 KiB blocks an 8 MB file never has more
    than a few MB in Arrow's memory at once (with the default 1 MiB blocks the bound is ~40 MB, so
    the whole file would be in memory). How far ahead its reader threads get varies with the
    machine's load (peaks of 3 to 4.7 MB seen here), hence the margin below the file's size."""
    from auditor.corpora import readers

    monkeypatch.setattr(readers, "_BLOCK_BYTES", 1 << 16)
    path = tmp_path / f"big.{kind}"
    filler = "x" * 60
    with path.open("w") as handle:
        if kind == "csv":
            handle.write("caption,url\n")
            handle.writelines(f"a photo of teacher {i} {filler},http://e/{i}.jpg\n" for i in range(80_000))
        else:
            handle.writelines(json.dumps({"caption": f"teacher {i} {filler}", "url": f"u{i}"}) + "\n" for i in range(80_000))
    size = path.stat().st_size
    reader = CaptionReader(path, batch_rows=5_000)
    peak = count = 0
    for batch in reader:
        assert len(batch.rows) <= 5_000
        count += len(batch.rows)
        peak = max(peak, pa.total_allocated_bytes())
    assert count == 80_000 and reader.rows == 80_000
    assert peak < 0.75 * size, (peak, size)


def test_image_paths(tmp_path):
    source = tmp_path / "data" / "captions.csv"
    assert image_path("img/0.png", source) == tmp_path / "data" / "img" / "0.png"
    assert image_path("/abs/4.png", source).as_posix() == "/abs/4.png"
    assert image_path("file:///abs/5.png", source).as_posix() == "/abs/5.png"
    with pytest.raises(StartAgainError, match="download the images first"):  # a resume reads the same file
        image_path("https://example.com/a.jpg", source)


@pytest.mark.parametrize("block_bytes", [1 << 20, 1 << 12])
def test_a_jsonl_error_names_its_file_line(tmp_path, monkeypatch, block_bytes):
    """Arrow counts a JSON error's row from 0 within the block it was parsing and skips blank lines: the error
    names the file's line, in the first block (found at open) as in a later one."""
    from auditor.corpora import readers

    monkeypatch.setattr(readers, "_BLOCK_BYTES", block_bytes)
    lines = [json.dumps({"caption": f"a teacher {i}"}) for i in range(1_500)]
    lines[700:700] = ["", "   "]  # blank lines are no rows
    lines.insert(1_200, '{"caption": oops}')  # file line 1,201
    path = tmp_path / "captions.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(AuditorError) as caught:
        list(CaptionReader(path))
    assert str(caught.value) == f"cannot read {path}: JSON parse error: Invalid value. (line 1201)"
