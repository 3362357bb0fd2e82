"""A completed run folder's snapshot: it sees every write an attempt makes, even one its clock cannot."""

from __future__ import annotations

import os

from auditor.core.snapshot import FolderSnapshot
from auditor.core.store import atomic_write_bytes


def _folder(tmp_path):
    folder = tmp_path / "run"
    (folder / "images").mkdir(parents=True)
    (folder / "record.json").write_text('{"status": "completed"}')
    (folder / "images" / "a.png").write_bytes(b"first image")
    return folder


def test_a_rewrite_of_the_same_size_and_time_is_a_change(tmp_path):
    """The kernel stamps files at its clock tick: two writes within one tick share a time. An atomic write is a new
    file all the same."""
    folder = _folder(tmp_path)
    image = folder / "images" / "a.png"
    before = image.stat()
    snapshot = FolderSnapshot(folder)
    atomic_write_bytes(image, b"other image")  # as many bytes
    os.utime(image, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the same time, as within one tick
    assert image.stat().st_size == before.st_size and image.stat().st_mtime_ns == before.st_mtime_ns
    assert not snapshot.unchanged()


def test_the_record_and_page_rewritten_are_put_back_and_other_files_added_or_removed_are_changes(tmp_path):
    folder = _folder(tmp_path)
    record = folder / "record.json"
    kept_time = record.stat().st_mtime_ns
    snapshot = FolderSnapshot(folder)
    atomic_write_bytes(record, b'{"status": "running"}')
    (folder / "report.html").write_text("<p>running</p>")
    assert snapshot.unchanged()  # the record and the page do not count
    snapshot.restore()
    assert record.read_text() == '{"status": "completed"}' and record.stat().st_mtime_ns == kept_time
    assert not (folder / "report.html").exists()  # it had no page

    (folder / "images" / "b.png").write_bytes(b"new")
    assert not snapshot.unchanged()
    (folder / "images" / "b.png").unlink()
    assert snapshot.unchanged()
    (folder / "images" / "a.png").unlink()
    assert not snapshot.unchanged()
