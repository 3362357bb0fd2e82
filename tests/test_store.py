"""Run store: atomic writes, safe run ids, the content cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from auditor.core.cache import ContentCache, cache_key
from auditor.core.errors import AuditorError
from auditor.core.store import (
    RunStore,
    atomic_write_text,
    check_run_id,
    new_run_id,
    write_model,
)
from auditor.records import load_record
from tests.factories import make_record


def test_interrupted_atomic_write_leaves_the_old_record_intact(tmp_path, monkeypatch):
    path = tmp_path / "record.json"
    first = make_record()
    write_model(path, first)

    def crash(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", crash)
    changed = first.model_copy(update={"status": "completed"})
    with pytest.raises(KeyboardInterrupt):
        write_model(path, changed)
    monkeypatch.undo()
    assert load_record(path).status == "running"
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"], "temp file left behind"


def test_a_full_disk_is_one_line_and_leaves_the_old_file(tmp_path, monkeypatch):
    import errno

    target = tmp_path / "record.json"
    atomic_write_text(target, "old")

    def full(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("auditor.core.store.os.fsync", full)
    with pytest.raises(AuditorError, match=r"cannot write .*record\.json: No space left on device"):
        atomic_write_text(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_atomic_write_replaces_content(tmp_path):
    path = tmp_path / "a" / "b.txt"
    atomic_write_text(path, "one")
    atomic_write_text(path, "two")
    assert path.read_text() == "two"


@pytest.mark.parametrize("bad", ["../escape", "a/b", ".hidden", "-dash", "", "..", "x" * 200, "a\\b", "nul\0"])
def test_unsafe_run_ids_are_refused(bad):
    with pytest.raises(AuditorError, match="at most 128, starting with a letter or digit"):
        check_run_id(bad)


def test_a_runs_folder_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "runs").write_text("not a folder")
    with pytest.raises(AuditorError, match="the runs folder .*runs is a file"):
        RunStore(tmp_path / "runs")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")  # not a file, and no run could be made under it
    with pytest.raises(AuditorError, match=r"the runs folder .*gone is a broken link \(to .*nowhere\); give a folder"):
        RunStore(tmp_path / "gone")


def test_store_cannot_escape_its_root(tmp_path):
    store = RunStore(tmp_path / "runs")
    with pytest.raises(AuditorError):
        store.create("../outside")
    assert not (tmp_path / "outside").exists()


def test_new_run_id_is_safe_and_readable():
    run_id = new_run_id("A photo of a <pharmacist>!/..")
    assert check_run_id(run_id) == run_id
    assert run_id.endswith("a-photo-of-a-pharmacist")


def test_create_refuses_an_existing_run(tmp_path):
    store = RunStore(tmp_path)
    store.create("r1")
    with pytest.raises(AuditorError, match="already exists"):
        store.create("r1")


def test_resolve_finds_runs_by_id_folder_or_record(tmp_path):
    store = RunStore(tmp_path)
    folder = store.create("r1")
    write_model(folder / "record.json", make_record("r1"))
    assert store.resolve("r1") == folder
    assert store.resolve(folder) == folder
    assert store.resolve(folder / "record.json") == folder
    with pytest.raises(AuditorError, match="no run"):
        store.resolve("missing")


def test_a_name_that_is_a_run_id_and_another_runs_folder_here_is_refused(tmp_path, monkeypatch):
    """``nurse`` in a folder holding a run ``nurse`` of its own, beside the runs folder's ``nurse``: either reading
    could be meant, so neither is taken without a word; the same run reached both ways is no ambiguity."""
    store = RunStore(tmp_path / "runs")
    write_model(store.root / "nurse" / "record.json", make_record("nurse"))
    write_model(tmp_path / "work" / "nurse" / "record.json", make_record("other"))
    monkeypatch.chdir(tmp_path / "work")
    with pytest.raises(AuditorError) as info:
        store.resolve("nurse")
    assert str(info.value) == (
        f"'nurse' names two runs: {store.root / 'nurse'} (a run id) and the folder {tmp_path / 'work' / 'nurse'}; "
        "give the path of the one you mean"
    )
    assert store.resolve("./nurse") == Path("nurse") and store.resolve(store.root / "nurse") == store.root / "nurse"
    monkeypatch.chdir(tmp_path)  # runs/nurse from the folder above: the run id's folder itself
    assert store.resolve("nurse") == store.root / "nurse"
    assert RunStore(Path("runs")).resolve("nurse") == Path("runs") / "nurse"


def test_a_batchs_audit_is_found_by_its_path_in_the_runs_folder_and_its_id_alone_says_so(tmp_path, monkeypatch):
    """``b1/audits/001-x`` from anywhere (not only from the runs folder); ``001-x`` alone names the batch it is in."""
    store = RunStore(tmp_path / "runs")
    audit = store.root / "b1" / "audits" / "001-x"
    write_model(audit / "record.json", make_record("001-x"))
    monkeypatch.chdir(tmp_path)  # not the runs folder
    assert store.resolve("b1/audits/001-x") == audit
    assert store.resolve("b1/audits/001-x/record.json") == audit
    with pytest.raises(AuditorError) as info:
        store.resolve("001-x")
    assert str(info.value) == f"no run '001-x' in {store.root}: it is an audit of a batch, named b1/audits/001-x"
    (store.root / "b1" / "audits" / "002-y").mkdir()  # stopped before it wrote its record
    with pytest.raises(AuditorError, match=f"^{store.root}/b1/audits/002-y holds no record.json: not a run folder$"):
        store.resolve("b1/audits/002-y")
    write_model(tmp_path / "outside" / "record.json", make_record("outside"))
    (tmp_path / "elsewhere" / "deeper").mkdir(parents=True)  # where ../outside is nothing
    monkeypatch.chdir(tmp_path / "elsewhere" / "deeper")
    with pytest.raises(AuditorError, match="no file or folder ../outside"):  # not the runs folder's ../outside
        store.resolve("../outside")


def test_resolve_says_what_a_name_that_is_no_run_looks_like(tmp_path):
    store = RunStore(tmp_path / "runs")
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("hi")
    missing_file = tmp_path / "missing.json"
    (store.root / "half-made").mkdir(parents=True)  # a run folder without its record
    why = {}
    names = (
        "nope", "sd-1.5", "half-made", str(missing_file), str(tmp_path / "empty"), str(tmp_path / "notes.txt"),
        "b1/audits/001-x",
    )  # fmt: skip
    for given in names:
        with pytest.raises(AuditorError) as info:
            store.resolve(given)
        why[given] = str(info.value)
    assert why["nope"] == f"no run 'nope' in {store.root} (and no file or folder of that name)"
    assert why["sd-1.5"].startswith("no run 'sd-1.5' in ")  # a run id may hold a dot
    assert why["half-made"] == f"{store.root / 'half-made'} holds no record.json: not a run folder"
    assert why[str(missing_file)] == f"no file or folder {missing_file}"
    # a batch's audit as its page names it: looked for here and in the runs folder, and the error says both
    assert why["b1/audits/001-x"] == f"no file or folder b1/audits/001-x here or in {store.root}"
    assert why[str(tmp_path / "empty")] == f"{tmp_path / 'empty'} holds no record.json: not a run folder"
    assert why[str(tmp_path / "notes.txt")] == (
        f"{tmp_path / 'notes.txt'} is a file, not a run: give the run's folder, its id or its record.json"
    )

    # A copy of another run's record beside a run's own: it names neither run (report would show the folder's).
    run = store.create("r")
    write_model(run / "record.json", make_record("r"))
    write_model(run / "old-record.json", make_record("other"))
    assert store.resolve(str(run / "record.json")) == run
    with pytest.raises(AuditorError, match="old-record.json is a file, not a run"):
        store.resolve(str(run / "old-record.json"))


def test_invalid_record_is_a_one_line_error(tmp_path):
    path = tmp_path / "record.json"
    path.write_text('{"run_id": "x", "bogus": 1}')
    with pytest.raises(AuditorError) as info:
        load_record(path)
    assert "\n" not in str(info.value)


def test_cache_hit_skips_the_work(tmp_path):
    calls = []

    def expensive(x):
        calls.append(x)
        return x * 2

    def cached(cache, x):
        hit = cache.get_json("perceive", "model-a", {"x": x})
        if hit is not None:
            return hit
        value = expensive(x)
        cache.put_json("perceive", "model-a", {"x": x}, value)
        return value

    cache = ContentCache(tmp_path / "c.sqlite")
    assert cached(cache, 3) == 6
    assert cached(cache, 3) == 6
    assert calls == [3]
    assert cache.hits["perceive"] == 1 and cache.misses["perceive"] == 1
    cache.close()
    reopened = ContentCache(tmp_path / "c.sqlite")
    assert cached(reopened, 3) == 6 and calls == [3], "cache must persist across processes"


def test_cache_key_depends_on_stage_fingerprint_and_inputs(tmp_path):
    cache = ContentCache(tmp_path / "c.sqlite")
    cache.put("generate", "fp1", {"prompt": "a", "seed": 1}, b"img")
    assert cache.get("generate", "fp1", {"seed": 1, "prompt": "a"}) == b"img"  # key order does not matter
    assert cache.get("generate", "fp2", {"prompt": "a", "seed": 1}) is None
    assert cache.get("perceive", "fp1", {"prompt": "a", "seed": 1}) is None
    assert cache.get("generate", "fp1", {"prompt": "a", "seed": 2}) is None


def test_a_damaged_cache_value_reads_as_a_miss_and_is_computed_again(tmp_path):
    """A value that no longer matches its CRC-32 (a damaged disk, a hand edit) would fail the stage decoding it
    (a PNG, JSON, an embedding) with a traceback; it is removed and counts as a miss instead."""
    import sqlite3

    cache = ContentCache(tmp_path / "c.sqlite")
    cache.put_json("perceive", "fp", {"image": 1}, {"gender": "a woman"})
    cache.put_many("embed", "fp", [({"image": 1}, b"\x00" * 8), ({"image": 2}, b"\x01" * 8)])
    cache.close()
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        db.execute("UPDATE cache SET value = x'00ff7b' WHERE stage = 'perceive'")
        db.execute("UPDATE cache SET value = x'0000' WHERE value = x'0000000000000000'")
    cache = ContentCache(tmp_path / "c.sqlite")
    assert cache.contains("perceive", "fp", {"image": 1}) is False  # priced as work, and no stage skips its model
    assert cache.get_json("perceive", "fp", {"image": 1}) is None
    assert cache.get("embed", "fp", {"image": 1}) is None and cache.get("embed", "fp", {"image": 2}) == b"\x01" * 8
    assert (cache.damaged, cache.misses, cache.hits) == ({"perceive": 1, "embed": 1}, {"perceive": 1, "embed": 1},
                                                         {"embed": 1})  # fmt: skip
    assert cache.entries() == 1  # the damaged ones are gone
    cache.put_json("perceive", "fp", {"image": 1}, {"gender": "a man"})
    assert cache.get_json("perceive", "fp", {"image": 1}) == {"gender": "a man"}
    cache.close()


def test_a_cache_from_before_value_checksums_keeps_its_entries(tmp_path):
    import sqlite3

    with sqlite3.connect(tmp_path / "old.sqlite") as db:
        db.execute("CREATE TABLE cache (key TEXT PRIMARY KEY, stage TEXT, value BLOB)")
        db.execute("INSERT INTO cache VALUES (?, 'generate', x'89504e47')", (cache_key("generate", "fp", {"seed": 1}),))
    cache = ContentCache(tmp_path / "old.sqlite")
    assert cache.get("generate", "fp", {"seed": 1}) == b"\x89PNG"  # no checksum to check: trusted as before
    cache.put("generate", "fp", {"seed": 2}, b"new")
    assert cache.get("generate", "fp", {"seed": 2}) == b"new" and cache.damaged == {}
    cache.close()


def test_a_damaged_or_busy_cache_file_is_one_line_saying_what_to_do(tmp_path, monkeypatch):
    """The CRC covers values, not SQLite's own pages: a damaged page, or another process holding the file, is a
    CacheError (one line), not a sqlite3 traceback."""
    import sqlite3

    from auditor.core import cache as cache_module
    from auditor.core.errors import CacheError

    path = tmp_path / "c.sqlite"
    cache = ContentCache(path)
    cache.put_many("generate", "fp", [({"seed": i}, bytes([i % 256]) * 3000) for i in range(40)])
    cache.close()
    with path.open("r+b") as file:  # a damaged page in the middle of the table
        file.seek(4096)  # page 2: the table's root
        file.write(b"\xff" * 4096)
    with pytest.raises(CacheError, match=r"c\.sqlite failed \(database disk image is malformed\): the file is damaged"):
        damaged = ContentCache(path)
        for i in range(40):
            damaged.get("generate", "fp", {"seed": i})

    monkeypatch.setattr(cache_module, "BUSY_SECONDS", 0.2)
    shared = ContentCache(tmp_path / "shared.sqlite")
    holder = sqlite3.connect(tmp_path / "shared.sqlite", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process writing, for longer than the busy timeout
    with pytest.raises(CacheError, match="another process held it"):
        shared.put("generate", "fp", {"seed": 1}, b"png")
    holder.execute("ROLLBACK")
    holder.close()

    class CommitFails:  # the connection as another process's lock makes a COMMIT fail
        def __init__(self, db):
            self.db = db

        def execute(self, statement, *args):
            if statement == "COMMIT":
                raise sqlite3.OperationalError("database is locked")
            return self.db.execute(statement, *args)

        def __getattr__(self, name):
            return getattr(self.db, name)

    real = shared._db
    shared._db = CommitFails(real)
    with pytest.raises(CacheError, match="another process held it"):
        shared.put_many("generate", "fp", [({"seed": 1}, b"png")])
    assert not real.in_transaction  # rolled back: the next batch can begin its own
    shared._db = real
    shared.put_many("generate", "fp", [({"seed": 1}, b"png")])
    assert shared.get("generate", "fp", {"seed": 1}) == b"png"
    shared.close()


def test_written_files_get_the_usual_permissions(tmp_path):
    """Not mkstemp's owner-only 0600: a run folder is meant to be shared as it is."""
    path = tmp_path / "report.html"
    umask = os.umask(0o022)
    try:
        atomic_write_text(path, "<html></html>")
    finally:
        os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o644


def test_list_records_is_newest_first_by_creation_time(tmp_path):
    from datetime import datetime, timedelta, timezone

    store = RunStore(tmp_path)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for name, hours in (("b-old", 0), ("a-new", 2), ("c-middle", 1)):
        record = make_record(name).model_copy(update={"created_at": start + timedelta(hours=hours)})
        write_model(store.create(name) / "record.json", record)
    assert [folder.name for folder, _, _ in store.list_records()] == ["a-new", "c-middle", "b-old"]


@pytest.mark.parametrize("config", ['"x"', "null", "[1]"])
def test_a_malformed_old_record_is_listed_as_unreadable_and_loading_it_is_one_line(tmp_path, config):
    from auditor.records import load_any_record

    store = RunStore(tmp_path)
    write_model(store.create("good") / "record.json", make_record("good"))
    bad = store.create("bad") / "record.json"
    bad.write_text(f'{{"schema_version": "1", "kind": "prompt_audit", "config": {config}}}')
    assert {folder.name: (record is None, why is not None) for folder, record, why in store.list_records()} == {
        "good": (False, False),
        "bad": (True, True),
    }
    with pytest.raises(AuditorError) as info:
        load_any_record(bad)
    assert "\n" not in str(info.value)


def test_a_run_folder_that_cannot_be_read_is_listed_and_named_not_a_traceback(tmp_path, monkeypatch):
    from pathlib import Path

    from auditor.records import load_any_record

    store = RunStore(tmp_path)
    write_model(store.create("good") / "record.json", make_record("good"))
    locked = store.create("locked")
    write_model(locked / "record.json", make_record("locked"))
    is_file, read_text, read_bytes = Path.is_file, Path.read_text, Path.read_bytes

    def denied(method):  # what chmod 000 on the folder does for a user other than root
        def call(path, *args, **kwargs):
            if locked in path.parents:
                raise PermissionError(13, "Permission denied", str(path))
            return method(path, *args, **kwargs)

        return call

    monkeypatch.setattr(Path, "is_file", denied(is_file))
    monkeypatch.setattr(Path, "read_text", denied(read_text))
    monkeypatch.setattr(Path, "read_bytes", denied(read_bytes))
    assert {folder.name: record is None for folder, record, _ in store.list_records()} == {"good": False, "locked": True}
    assert store.resolve("locked") == locked
    with pytest.raises(AuditorError, match="Permission denied") as info:
        load_any_record(locked / "record.json")
    assert "\n" not in str(info.value)


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path, monkeypatch):
    import auditor.core.store as store_module

    monkeypatch.setattr(store_module, "new_run_id", lambda subject: f"20260101-120000-{subject}")
    store = RunStore(tmp_path)
    folders = [store.create_run(None, "nurse") for _ in range(3)]
    assert [f.name for f in folders] == ["20260101-120000-nurse", "20260101-120000-nurse-2", "20260101-120000-nurse-3"]
    mine = store.create_run("mine", "nurse")
    assert mine.name == "mine"
    # --resume needs a record: a folder without one (a run starting now, or one left behind) is not offered it
    with pytest.raises(AuditorError, match="'mine' already exists .* but holds no record yet .*; give another --name"):
        store.create_run("mine", "nurse")
    (mine / "record.json").write_text("{}")
    with pytest.raises(AuditorError, match="'mine' already exists .*; use --resume mine or another --name"):
        store.create_run("mine", "nurse")
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(AuditorError, match="a-file is a file, not a run: move it away, or give another --name"):
        store.create_run("a-file", "nurse")
    elsewhere = RunStore(tmp_path.parent / f"{tmp_path.name}-moved")  # looked up as a run id, not beside the cwd
    elsewhere.root.mkdir()
    (elsewhere.root / "b-file").write_text("x")
    with pytest.raises(AuditorError, match=f"^{elsewhere.root / 'b-file'} is a file, not a run$"):  # not "no such"
        elsewhere.resolve("b-file")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")  # a link to nothing is neither a file nor a folder
    with pytest.raises(AuditorError, match=r"gone is a broken link \(to .*nowhere\), not a run: move it away, or give"):
        store.create_run("gone", "nurse")
    (elsewhere.root / "c-gone").symlink_to("nowhere")
    with pytest.raises(AuditorError, match=r"c-gone is a broken link \(to nowhere\), not a run$"):
        elsewhere.resolve("c-gone")
    with pytest.raises(AuditorError, match=r"c-gone is a broken link \(to nowhere\), not a run: give the run's"):
        elsewhere.resolve(elsewhere.root / "c-gone")


def test_a_write_problem_names_what_stands_where_a_folder_must_be(tmp_path, monkeypatch):
    from auditor.core.store import write_problem

    (tmp_path / "a-file").write_text("x")
    (tmp_path / "broken").symlink_to(tmp_path / "nowhere")
    exists = FileExistsError(17, "File exists")
    assert write_problem(tmp_path / "a-file" / "sub" / "x.json", exists) == f"{tmp_path / 'a-file'} is not a folder"
    assert write_problem(tmp_path / "broken" / "x.json", exists) == f"{tmp_path / 'broken'} is not a folder"
    denied = PermissionError(13, "Permission denied")
    assert write_problem(tmp_path / "x.json", denied) == "Permission denied"  # the folder is there: the OS's words

    def locked(_path):  # a folder this user may not look into (root may look into any, so it is simulated)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("auditor.core.store.os.path.lexists", locked)
    assert write_problem(tmp_path / "locked" / "sub" / "x.json", denied) == "Permission denied"
