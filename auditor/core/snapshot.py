"""A completed run folder as an attempt found it, put back when the attempt ends having changed none of its files.

Running a completed run again (``--resume`` to rescore it, or with other models) starts by
saying ``running`` and clearing the scores, since the attempt may replace what they were
computed from. An attempt that then fails or is stopped before it writes a single file into
the folder (a mistyped model path, a changed input file, Ctrl-C while a model loads) has
replaced nothing: the images, answers and scores of the finished study all still agree. So
its record and page are put back as they were, byte for byte and with their old times, and
the run stays ``completed``; what the attempt computed is in the content cache for the next
one. An attempt that did write into the folder (an image made with other weights) leaves the
run ``failed`` or ``interrupted``, as any other, because the old scores no longer describe
its files.

Files are compared by size, modification time and inode. Every write here replaces its file
atomically (a new file renamed over the old, so a new inode), and identical images are not
rewritten; a file's time alone is coarse (the kernel stamps it at its clock tick, milliseconds),
so a rewrite of the same size within one tick would pass for no write. A batch's audits are
files of the batch's folder: an audit put back gets its record and page back as new files
with their old bytes and times, so those two are compared by size and time alone, and a
batch all of whose audits were put back is unchanged as well.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from auditor.core.runlock import LOCK_FILE
from auditor.core.store import RECORD_FILE, REPORT_FILE, atomic_write_bytes

#: The files an attempt rewrites whatever it does (they say it is running, or how it ended): kept whole to put back.
REWRITTEN = (RECORD_FILE, REPORT_FILE)


@dataclass(frozen=True)
class _KeptFile:
    data: bytes
    mtime_ns: int


class FolderSnapshot:
    """The run folder ``folder`` now: its record and page kept whole, every other file's size, time and inode."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._kept = {
            name: _KeptFile(path.read_bytes(), path.stat().st_mtime_ns)
            for name in REWRITTEN
            if (path := self.folder / name).is_file()
        }
        self._files = self._file_times()

    def _file_times(self) -> dict[str, tuple[int, int, int]]:
        """Path (relative) -> (size, modification time, inode) of every file but the record, the page and the
        lock (a nested record or page: no inode)."""
        times = {}
        for path in self.folder.rglob("*"):
            name = path.relative_to(self.folder).as_posix()
            if name in REWRITTEN or name == LOCK_FILE or not path.is_file():
                continue
            stat = path.stat()
            put_back = path.name in REWRITTEN  # a batch's audit's, restored as a new file (another inode)
            times[name] = (stat.st_size, stat.st_mtime_ns, 0 if put_back else stat.st_ino)
        return times

    def unchanged(self) -> bool:
        """Whether every file but the record and the page is as it was: none written, added or removed."""
        return self._file_times() == self._files

    def restore(self) -> None:
        """Put the record and the page back as they were, times included; a page the folder did not have is
        removed."""
        for name in REWRITTEN:
            path = self.folder / name
            kept = self._kept.get(name)
            if kept is None:
                path.unlink(missing_ok=True)
                continue
            atomic_write_bytes(path, kept.data)
            os.utime(path, ns=(kept.mtime_ns, kept.mtime_ns))
