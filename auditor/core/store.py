"""Run folders and atomic writes.

A run folder is ``<runs>/<run-id>/`` with ``record.json``, ``images/`` and the LLM
transcript. Every file is written to a temporary sibling and renamed into place, so a
crash never leaves a half-written record. The content cache that makes reruns free is
:mod:`auditor.core.cache`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import AnyRecord

RECORD_FILE = "record.json"
#: The page every run folder gets beside its record.
REPORT_FILE = "report.html"
TRANSCRIPT_FILE = "transcript.json"
#: A ``--review`` edit that was not a valid plan when the review gave up: the next review opens it.
PLAN_DRAFT_FILE = "plan.edit.yaml"
#: Where a batch keeps its prompts' audits, each a run folder of its own, inside its run folder.
AUDITS_FOLDER = "audits"
#: A run id: a safe folder name (no separators, no leading dot).
RUN_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_RUN_ID_PATTERN = re.compile(f"^{RUN_ID}$")


# --------------------------------------------------------------------------- atomic files


def _default_file_mode() -> int:
    """The mode a plain ``open()`` would give a new file (0o666 less the umask)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_problem(path: Path, exc: OSError) -> str:
    """Why ``path`` could not be written, in words: a file (or a broken link) standing where one of its folders
    must be is named, where the OS says only "File exists" or "Not a directory"."""
    try:
        for folder in path.parents:
            if os.path.lexists(folder):
                if not folder.is_dir():
                    return f"{folder} is not a folder"
                break
    except OSError:  # a folder this user may not look into: the OS's own words are all there is
        pass
    return exc.strerror or str(exc)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never a mix.

    The file gets the usual permissions (not ``mkstemp``'s owner-only 0600), so a run
    folder can be shared as it is. A folder that cannot be written is a one-line error.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise AuditorError(f"cannot write {path}: {write_problem(path, exc)}") from None
    try:
        os.fchmod(fd, _default_file_mode())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except OSError as exc:  # a full disk or quota, an I/O error: the old file stands
        Path(tmp_name).unlink(missing_ok=True)
        raise AuditorError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def remove_partial_writes(folder: Path) -> None:
    """Delete the temporary files that atomic writes of a killed process left under ``folder``
    (``.<name>.<random>.tmp``: the files they were to replace are whole, old or new)."""
    for path in Path(folder).rglob(".*.tmp"):
        if path.is_file():
            path.unlink(missing_ok=True)


def write_model(path: Path, model: BaseModel) -> None:
    """Write a pydantic model as indented JSON, atomically."""
    atomic_write_text(path, model.model_dump_json(indent=2) + "\n")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- run folders


def check_run_id(run_id: str) -> str:
    """Return ``run_id`` if it is a safe folder name (no path separators, no leading dot)."""
    if not _RUN_ID_PATTERN.fullmatch(run_id) or run_id in {".", ".."}:
        raise AuditorError(
            f"invalid run name {run_id!r}: use letters, digits, '.', '_' or '-' (at most 128, starting with a letter "
            "or digit)"
        )
    return run_id


def slugify(text: str, max_length: int = 40) -> str:
    """A file-name-safe slug of a prompt, for readable run ids."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:max_length].rstrip("-") or "run"


def new_run_id(prompt: str, now: datetime | None = None) -> str:
    """``YYYYMMDD-HHMMSS-<prompt slug>``: sortable by time and recognisable by prompt."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{slugify(prompt)}"


class RunStore:
    """The runs directory: creates, finds and lists run folders."""

    def __init__(self, root: Path):
        self.root = Path(root)
        if (self.root.exists() or self.root.is_symlink()) and not self.root.is_dir():  # "no runs in it" would hide it
            raise AuditorError(
                f"the runs folder {_what_is(self.root)}; give a folder (--runs-dir or AUDITOR_RUNS_DIR)"
            )

    def path_for(self, run_id: str) -> Path:
        return self.root / check_run_id(run_id)

    def create(self, run_id: str) -> Path:
        """Create a new run folder; refuses to reuse an existing one (every study's command has --resume)."""
        path = self._make(run_id)
        if path is None:
            taken = self.root / run_id
            if not taken.is_dir():
                raise AuditorError(f"{_what_is(taken)}, not a run: move it away, or give another --name")
            if not (taken / RECORD_FILE).is_file():  # --resume would not take it (yet): say what is there
                raise AuditorError(
                    f"run {run_id!r} already exists in {self.root} but holds no record yet (a run starting now, or "
                    "a folder left behind: move it away to reuse the name); give another --name"
                )
            raise AuditorError(f"run {run_id!r} already exists in {self.root}; use --resume {run_id} or another --name")
        return path

    def create_run(self, name: str | None, subject: str) -> Path:
        """A new run's folder: ``name`` when the user gave one (refused if taken), else
        ``YYYYMMDD-HHMMSS-<subject slug>``, with ``-2``, ``-3``, ... for runs started in the same second."""
        if name:
            return self.create(name)
        base = new_run_id(subject)
        for number in range(1, 1000):
            path = self._make(base if number == 1 else f"{base}-{number}")
            if path is not None:
                return path
        raise AuditorError(f"999 runs named {base!r} already exist in {self.root}; give one a --name")

    def _make(self, run_id: str) -> Path | None:
        """Create ``run_id``'s folder; None when it exists."""
        path = self.path_for(run_id)
        try:
            path.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            return None
        except OSError as exc:
            raise AuditorError(f"cannot create run folder {path}: {exc.strerror or exc}") from None
        return path

    def resolve(self, run: str | Path) -> Path:
        """Find a run folder from a run id (looked up here first), a folder path or the path of its record file, or a
        path inside the runs folder (a batch's audit: ``b1/audits/001-a-photo-of-a-nurse``). Another file, even a copy
        of a record, names no run: the run is its folder's record, images and lock. A name that is both a run id here
        and another run's folder in the working directory is refused: either reading could be the one meant."""
        text = str(run)
        if not text.strip():  # an empty shell variable: "" would read as the working directory
            raise AuditorError("no run given (an empty name): give a run id, a run folder or its record.json")
        if _RUN_ID_PATTERN.fullmatch(text) and _has_record(self.root / text):
            here = Path(text)
            if _has_record(here) and here.resolve() != (self.root / text).resolve():  # which one is meant?
                raise AuditorError(
                    f"{text!r} names two runs: {self.root / text} (a run id) and the folder {here.absolute()}; give "
                    "the path of the one you mean"
                )
            return self.root / text
        for candidate in filter(None, (Path(run), self._inside(text))):
            if not _is_file(candidate):
                folder = candidate
            elif candidate.name == RECORD_FILE:
                folder = candidate.parent
            else:
                continue
            if _has_record(folder):
                return folder
        raise AuditorError(self._not_a_run(text))

    def _inside(self, text: str) -> Path | None:
        """``text`` as a path inside the runs folder (a batch's audit); None for an absolute path or one that leads
        out of it (``../x`` names no run of this folder)."""
        path = Path(text)
        if path.is_absolute():
            return None
        candidate, root = self.root / path, self.root.resolve()
        resolved = candidate.resolve()
        return candidate if resolved != root and resolved.is_relative_to(root) else None

    def _not_a_run(self, text: str) -> str:
        """Why ``text`` names no run, in the words of what it looks like: a folder or file that is no run, a run id
        (which may hold a dot, as ``sd-1.5``), or a path to nothing."""
        path = Path(text)
        if path.is_dir():
            return f"{text} holds no {RECORD_FILE}: not a run folder"
        if "/" in text and (inside := self._inside(text)) is not None and inside.is_dir():
            return f"{inside} holds no {RECORD_FILE}: not a run folder"
        if path.exists() or path.is_symlink():
            return f"{_what_is(path)}, not a run: give the run's folder, its id or its {RECORD_FILE}"
        if _RUN_ID_PATTERN.fullmatch(text):
            if (self.root / text).is_dir():  # e.g. a run that stopped before it wrote its record
                return f"{self.root / text} holds no {RECORD_FILE}: not a run folder"
            if (self.root / text).exists() or (self.root / text).is_symlink():
                return f"{_what_is(self.root / text)}, not a run"
            audits = sorted(self.root.glob(f"*/{AUDITS_FOLDER}/{text}/{RECORD_FILE}")) if self.root.is_dir() else []
            if audits:  # an audit's id, as its batch's report names it
                named = " or ".join(str(path.parent.relative_to(self.root)) for path in audits)
                return f"no run {text!r} in {self.root}: it is an audit of a batch, named {named}"
            return f"no run {text!r} in {self.root} (and no file or folder of that name)"
        if "/" in text and self._inside(text) is not None:  # looked for here and as a batch's audit, in the runs
            return f"no file or folder {text} here or in {self.root}"
        return f"no file or folder {text}"

    def list_records(self) -> list[tuple[Path, AnyRecord | None, str | None]]:
        """All run folders with their record's summary (:func:`~auditor.records.loading.load_record_summary`: no
        images or results), or None and why it does not load, newest first.

        Unreadable records sort by their folder's modification time.
        """
        from auditor.records.loading import load_record_summary

        if not self.root.is_dir():
            return []
        found = []
        for folder in self.root.iterdir():
            if _has_record(folder):
                why = None
                try:
                    record = load_record_summary(folder / RECORD_FILE)
                    started = record.created_at.timestamp()
                except AuditorError as exc:
                    record, started, why = None, folder.stat().st_mtime, str(exc)
                found.append((started, folder, record, why))
        found.sort(key=lambda entry: (entry[0], entry[1].name), reverse=True)
        return [(folder, record, why) for _, folder, record, why in found]


def run_files(run_dir: Path) -> dict[str, str | None]:
    """Where a run is, for ``--json``: its folder and its ``report.html`` (None for a run that has no page yet,
    such as one made before its kind of run had one), as absolute paths: a program reading them may not share the
    working directory of the command, and the folder reads the same whether it was made, found by its id or given
    as a relative path to --resume."""
    run_dir = run_dir.resolve()
    page = run_dir / REPORT_FILE
    return {"run_dir": str(run_dir), "report_html": str(page) if page.is_file() else None}


def run_files_text(run_dir: Path) -> str:
    """The same for the terminal: a blank line, the run folder and its page, one per line."""
    files = run_files(run_dir)
    page = f"\nHTML report: {files['report_html']}" if files["report_html"] else ""
    return f"\nrun folder: {files['run_dir']}{page}"


def run_folder_holding(path: Path) -> Path | None:
    """The run folder that ``path`` lies in (the nearest folder above it with a record), or None. Its files are the
    run's own: a command that writes elsewhere by a user-given path (a comparison page, a plan) must not replace
    them."""
    path = Path(path)
    where = path.parent.resolve()  # ``..`` and links resolved: where the file really is
    for folder in (where, *where.parents):
        if _has_record(folder):
            return folder
    return None


def _is_file(path: Path) -> bool:
    """``path.is_file()``, except that a path in a folder we may not read counts as a file:
    reading it then fails with one line saying why (``is_file`` raises there)."""
    try:
        return path.is_file()
    except OSError:
        return True


def _what_is(path: Path) -> str:
    """What stands at ``path``, which is no folder: a link to nothing (called a file, it would mislead), else a file."""
    if path.is_symlink() and not path.exists():
        return f"{path} is a broken link (to {os.readlink(path)})"
    return f"{path} is a file"


def _has_record(folder: Path) -> bool:
    return _is_file(folder / RECORD_FILE)


def read_text_file(path: Path) -> str:
    """A file the user names, as UTF-8 text, with a one-line error for a missing or unreadable (non-UTF-8) file.

    A leading byte-order mark (spreadsheet programs write one) is not part of the text: kept, it would become
    part of the first prompt or column name, where nobody can see it.
    """
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise AuditorError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise AuditorError(f"{path} is a folder; give a file") from None
    except OSError as exc:
        raise AuditorError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise AuditorError(f"cannot read {path}: {exc}") from None


def load_json(path: Path) -> Any:
    """Read a JSON file with a one-line error for unreadable or malformed files."""
    text = read_text_file(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise AuditorError(f"{path} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None


def describe_validation_error(exc: ValidationError) -> str:
    """The first validation problem as 'path.to.field: message'."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "<root>"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {validation_message(first)}{more}"


def validation_message(error: Mapping[str, Any]) -> str:
    """One problem of a ``ValidationError.errors()`` in the words its validator said it: pydantic prefixes a
    validator's own ValueError with "Value error, ", which reads as the library talking, not the tool."""
    message = str(error["msg"])
    return message.removeprefix("Value error, ") if error.get("type") == "value_error" else message
