"""Which process is running a run folder: an exclusive ``flock`` on ``<run>/.lock``.

A record says ``running`` from the moment an attempt begins until it ends, and a process
killed with ``kill -9`` (or on a machine that went down) never writes the end, so the record
alone cannot tell a run that is still going from one that died. The kernel drops a ``flock``
when its holder exits, however it exits, so the lock can: an attempt holds it while it runs, a
second attempt on the same folder is refused instead of deleting the first one's half-written
files and interleaving its saves with the first one's, and ``auditor runs`` asks whether anyone
holds it. On a filesystem without ``flock`` support the run goes on unguarded.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from auditor.core.errors import RunBusyError, RunLockError
from auditor.core.store import AUDITS_FOLDER, RECORD_FILE

LOCK_FILE = ".lock"
#: How long an attempt waits for the lock before saying another process has it: ``auditor runs``
#: holds it for an instant when it looks, and must not make a starting run fail.
WAIT_SECONDS = 1.0


def lock_folder(run_dir: Path) -> Path:
    """The run folder whose lock covers ``run_dir``: a batch's, for one of the batch's audits (a batch runs them
    all under its one lock, and an audit resumed alone must not run while its batch does), else its own."""
    run_dir = Path(run_dir)
    resolved = run_dir.resolve()  # a batch's audit reached through a link (or "..") is still the batch's
    outer = resolved.parent.parent
    if resolved.parent.name == AUDITS_FOLDER and _is_batch(outer):
        return outer
    return run_dir


def _is_batch(folder: Path) -> bool:
    """Whether ``folder`` holds a batch's record (any other run, or none, does not lock an ``audits`` folder)."""
    try:
        return json.loads((folder / RECORD_FILE).read_text(encoding="utf-8")).get("kind") == "batch"
    except (OSError, ValueError, AttributeError):
        return False


class RunLock:
    """The lock of a run folder (see :func:`lock_folder`), held by this process from :meth:`acquire` to
    :meth:`release`."""

    def __init__(self, run_dir: Path, purpose: str = ""):
        self.run_dir = lock_folder(run_dir)
        #: What the holder does, when it is not running the run (said to a process refused meanwhile).
        self._purpose = purpose
        #: How a refusal names the run that is busy.
        self._busy = f"run {self.run_dir.name} is being run"
        if self.run_dir != Path(run_dir):
            self._busy = f"run {Path(run_dir).name} belongs to run {self.run_dir.name}, which is being run"
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        """Hold the run's lock (again: nothing), or raise a one-line error naming the process that holds it."""
        if self._handle is not None:
            return
        try:
            handle = open(self.run_dir / LOCK_FILE, "a+", encoding="utf-8")
        except OSError as exc:
            mend = (  # a run is written in its folder
                "; make it writable, or copy the run to a folder that is and run that"
                if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
                else ""
            )
            raise RunLockError(f"cannot lock run folder {self.run_dir}: {exc.strerror or exc}{mend}") from None
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                handle.seek(0)
                holder = handle.read(200).strip() or "another process"
                handle.close()
                raise RunBusyError(
                    f"{self._busy} by {holder}; wait for it to end or stop it first"
                ) from None
            except OSError:  # no flock on this filesystem: run without the guard
                handle.close()
                return
        handle.seek(0)
        handle.truncate()
        purpose = f" ({self._purpose})" if self._purpose else ""
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}{purpose}\n")
        handle.flush()
        self._handle = handle

    @property
    def held(self) -> bool:
        """Whether this process holds the lock (not where the filesystem has no ``flock``, which runs unguarded)."""
        return self._handle is not None

    def release(self) -> None:
        """Let go of the lock (the file stays: removing it would race with a process opening it)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None


#: Lock folders this process holds to read a run and write from it (:func:`held_while_read`), resolved.
_HELD_TO_READ: set[Path] = set()


@contextmanager
def held_while_read(run_dir: Path, purpose: str, why: str) -> Iterator[None]:
    """Hold the run's lock while its record is read and something is written from it (its page), so that no attempt
    starts or ends in between and the page never shows a record older than the run's own last page. Refused while a
    process runs it (``why`` says what the refusal stops); ``purpose`` tells a run refused meanwhile what holds it.
    To this process the run is not running meanwhile (:func:`is_running`): the lock it holds is its own, and it runs
    nothing in the folder. A lock file this process may not open (another user's, in a shared runs folder) or a
    filesystem without ``flock`` leaves it unguarded, as it leaves a run."""
    lock = RunLock(run_dir, purpose)
    try:
        lock.acquire()
    except RunBusyError as exc:
        raise RunBusyError(f"{exc}; {why}") from None
    except RunLockError:
        yield
        return
    held = lock.run_dir.resolve() if lock.held else None
    if held is not None:
        _HELD_TO_READ.add(held)
    try:
        yield
    finally:
        if held is not None:
            _HELD_TO_READ.discard(held)
        lock.release()


def is_running(run_dir: Path) -> bool | None:
    """Whether a process holds the run's lock now: True, False, or None where this cannot be told
    (the lock file cannot be opened, or the filesystem has no ``flock``). False while this process holds it only to
    read the run (:func:`held_while_read`)."""
    if Path(run_dir).resolve() in _HELD_TO_READ:
        return False
    try:
        handle = open(Path(run_dir) / LOCK_FILE, encoding="utf-8")
    except FileNotFoundError:
        return False  # no attempt of this run ever held it
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return None
        return False
