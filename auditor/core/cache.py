"""The content-addressed cache: (stage, model fingerprint, inputs) -> output bytes.

One SQLite file, so a rerun or ``--resume`` never recomputes a finished image, answer or
embedding, whichever run computed it first. Each value is stored with its CRC-32: a value
damaged on disk (or edited by hand) reads as a miss and is computed again, instead of
failing the stage that decodes it. The same file remembers the digests of model weight
files, so a multi-gigabyte checkpoint is hashed once, not at every start.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from auditor.core.errors import AuditorError, CacheError
from auditor.core.fingerprint import file_sha256
from auditor.core.store import write_problem


def cache_key(stage: str, fingerprint: str, inputs: Any) -> str:
    """Key of one cached result: sha256 over the stage, the model fingerprint and the inputs as canonical JSON."""
    payload = json.dumps([stage, fingerprint, inputs], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


_INSERT = "INSERT OR REPLACE INTO cache (key, stage, value, crc) VALUES (?, ?, ?, ?)"


def json_bytes(value: Any) -> bytes:
    """How a JSON result is stored."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


#: Seconds a write waits for another process sharing the cache to finish its own (SQLite's busy timeout).
BUSY_SECONDS = 60.0


class ContentCache:
    """A SQLite key-value store of stage outputs, keyed by content.

    ``hits`` and ``misses`` count look-ups per stage, so a run can report (and a test
    can check) how much work the cache saved.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=BUSY_SECONDS)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS cache (key TEXT PRIMARY KEY, stage TEXT, value BLOB, crc INTEGER)"
            )
            if "crc" not in {row[1] for row in self._db.execute("PRAGMA table_info(cache)")}:
                self._add_crc_column()
            self._db.execute("DROP TABLE IF EXISTS file_digests")  # keyed without ctime: see file_digest
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS file_digests_v2 "
                "(path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER, inode INTEGER, sha256 TEXT)"
            )
        except sqlite3.Error as exc:
            raise CacheError(self._failure(exc)) from None
        except OSError as exc:
            raise AuditorError(
                f"cannot open the cache {self.path}: {write_problem(self.path, exc)} (set AUDITOR_CACHE_PATH)"
            ) from None
        self.hits: Counter[str] = Counter()
        self.misses: Counter[str] = Counter()
        #: Look-ups per stage that found a damaged value (counted as misses too, and computed again).
        self.damaged: Counter[str] = Counter()

    def _add_crc_column(self) -> None:
        """Give a cache from before value checksums its ``crc`` column (its rows keep none: nothing to check).
        Another process opening the same cache may add it first."""
        try:
            self._db.execute("ALTER TABLE cache ADD COLUMN crc INTEGER")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):
                raise

    @contextmanager
    def _using(self) -> Iterator[sqlite3.Connection]:
        """The connection, for one thread at a time; a SQLite failure becomes one line saying what to do."""
        with self._lock:
            try:
                yield self._db
            except sqlite3.Error as exc:
                raise CacheError(self._failure(exc)) from None

    def _failure(self, exc: sqlite3.Error) -> str:
        text = str(exc)
        if "readonly" in text or "read-only" in text:
            advice = "make it writable, or point AUDITOR_CACHE_PATH at another file"
        elif "locked" in text or "busy" in text:
            advice = f"another process held it for over {BUSY_SECONDS:.0f} s; try again, or use another AUDITOR_CACHE_PATH"
        elif isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            advice = "the file is damaged: move it away (a new cache is made; its results are computed again)"
        else:
            advice = "point AUDITOR_CACHE_PATH at another file to go on without it"
        return f"the cache {self.path} failed ({text}): {advice}"

    def get(self, stage: str, fingerprint: str, inputs: Any) -> bytes | None:
        """The stored value, or None when there is none or it no longer matches its CRC-32 (then removed)."""
        value = self._read(stage, cache_key(stage, fingerprint, inputs))
        (self.hits if value is not None else self.misses)[stage] += 1
        return value

    def contains(self, stage: str, fingerprint: str, inputs: Any) -> bool:
        """Whether a sound result is stored, without counting a hit or miss (e.g. to price work, or to decide that
        a stage needs no model): a damaged one is not, so :meth:`get` never misses where this said yes."""
        return self._read(stage, cache_key(stage, fingerprint, inputs)) is not None

    def _read(self, stage: str, key: str) -> bytes | None:
        with self._using() as db:
            row = db.execute("SELECT value, crc FROM cache WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            value = bytes(row[0])
            if row[1] is not None and zlib.crc32(value) != row[1]:
                db.execute("DELETE FROM cache WHERE key = ?", (key,))
                self.damaged[stage] += 1
                return None
            return value

    def put(self, stage: str, fingerprint: str, inputs: Any, value: bytes) -> None:
        key = cache_key(stage, fingerprint, inputs)
        with self._using() as db:
            db.execute(_INSERT, (key, stage, value, zlib.crc32(value)))

    def put_many(self, stage: str, fingerprint: str, entries: Iterable[tuple[Any, bytes]]) -> None:
        """Store one batch's results in one transaction: a process killed meanwhile leaves all of them
        or none. A resumed run then computes whole batches again, in the company they had: a
        remainder batched with other images could come out different in the last bits."""
        rows = ((cache_key(stage, fingerprint, inputs), stage, value, zlib.crc32(value)) for inputs, value in entries)
        self._in_transaction(_INSERT, rows)

    def _in_transaction(self, statement: str, rows: Iterable[tuple]) -> None:
        """Run ``statement`` for every row in one transaction (rows made as they are stored: a failure making
        one rolls back the others too)."""
        with self._using() as db:
            db.execute("BEGIN")
            try:
                db.executemany(statement, rows)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # a COMMIT that failed (the file busy) leaves it open too
                    db.execute("ROLLBACK")
                raise

    def discard(self, stage: str, fingerprint: str, inputs: Iterable[Any]) -> None:
        """Remove stored results (absent ones are ignored), e.g. replies that led nowhere."""
        keys = [(cache_key(stage, fingerprint, item),) for item in inputs]
        self._in_transaction("DELETE FROM cache WHERE key = ?", keys)  # all of them or, after a kill, none

    def get_json(self, stage: str, fingerprint: str, inputs: Any) -> Any | None:
        raw = self.get(stage, fingerprint, inputs)
        return None if raw is None else json.loads(raw)

    def put_json(self, stage: str, fingerprint: str, inputs: Any, value: Any) -> None:
        self.put(stage, fingerprint, inputs, json_bytes(value))

    def file_digest(self, path: Path, compute: Callable[[Path], str] = file_sha256) -> str:
        """sha256 of a file's bytes, remembered by (resolved path, size, mtime_ns, ctime_ns, inode).

        A file that was rewritten or replaced has another size, modification time, change
        time or inode, so its digest is computed again with ``compute``; an unchanged one is
        not read at all. The change time matters: a rewrite of the same size can put the
        old modification time back (``tar`` and ``cp -p`` do), but writing always sets ctime.
        """
        resolved = Path(path).resolve()
        stat = resolved.stat()
        identity = (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
        with self._using() as db:
            row = db.execute(
                "SELECT size, mtime_ns, ctime_ns, inode, sha256 FROM file_digests_v2 WHERE path = ?", (str(resolved),)
            ).fetchone()
        if row is not None and tuple(row[:4]) == identity:
            return row[4]
        digest = compute(resolved)
        with self._using() as db:
            db.execute(
                "INSERT OR REPLACE INTO file_digests_v2 (path, size, mtime_ns, ctime_ns, inode, sha256) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (str(resolved), *identity, digest),
            )
        return digest

    def entries(self, stage: str | None = None) -> int:
        """Number of stored results (of one stage, or all)."""
        with self._using() as db:
            if stage is None:
                return db.execute("SELECT COUNT(*) FROM cache").fetchone()[0]
            return db.execute("SELECT COUNT(*) FROM cache WHERE stage = ?", (stage,)).fetchone()[0]

    def close(self) -> None:
        with self._using() as db:
            db.close()
