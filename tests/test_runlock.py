"""One process runs a run folder at a time, and a run killed mid-attempt is told apart from a live one."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import nullcontext

import pytest

from auditor.core.cache import ContentCache
from auditor.core.errors import AuditorError, RunLockError
from auditor.core.runlock import RunLock, is_running, lock_folder
from auditor.core.store import write_model
from auditor.studies.progress import QuietProgress
from auditor.studies.run import StudyRun
from tests.clitools import run_auditor
from tests.factories import make_record

HOLD = textwrap.dedent(
    """
    import sys, time
    from auditor.core.runlock import RunLock
    lock = RunLock(sys.argv[1])
    lock.acquire()
    print("held", flush=True)
    time.sleep(600)
    """
)


def hold_lock(run_dir) -> subprocess.Popen:
    """Another process that takes the run's lock and keeps it until it is killed."""
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process


@contextlib.contextmanager
def held_elsewhere(run_dir) -> Iterator[subprocess.Popen]:
    """The run's lock held by another process (:func:`hold_lock`) for the block, which is killed after it."""
    holder = hold_lock(run_dir)
    try:
        yield holder
    finally:
        holder.kill()
        holder.wait()


def test_only_a_batch_locks_the_folders_under_its_audits_folder(tmp_path):
    """An ``audits`` folder inside another kind of run (or a folder with no record) is no batch's: its runs
    lock themselves."""
    audit = tmp_path / "outer" / "audits" / "001-x"
    audit.mkdir(parents=True)
    assert lock_folder(audit) == audit  # no record beside it
    (tmp_path / "outer" / "record.json").write_text(json.dumps({"kind": "prompt_audit"}))
    assert lock_folder(audit) == audit
    (tmp_path / "outer" / "record.json").write_text("{not json")
    assert lock_folder(audit) == audit
    (tmp_path / "outer" / "record.json").write_text(json.dumps({"kind": "batch"}))
    assert lock_folder(audit) == tmp_path / "outer"
    link = tmp_path / "elsewhere"
    link.symlink_to(audit)  # the same audit reached through a link is still the batch's
    assert lock_folder(link) == (tmp_path / "outer").resolve()


def test_a_second_process_is_refused_until_the_holder_is_killed(tmp_path):
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    assert is_running(run_dir) is False  # never run
    holder = hold_lock(run_dir)
    try:
        assert is_running(run_dir) is True
        with pytest.raises(AuditorError, match=f"run r is being run by pid {holder.pid} on "):
            RunLock(run_dir).acquire()
    finally:
        holder.send_signal(signal.SIGKILL)  # kill -9: the kernel lets go of its lock
        holder.wait()
    assert is_running(run_dir) is False
    lock = RunLock(run_dir)
    lock.acquire()
    lock.acquire()  # held already: nothing
    assert (run_dir / ".lock").read_text() == f"pid {os.getpid()} on {os.uname().nodename}\n"
    lock.release()
    RunLock(run_dir).acquire()  # released: free again


def test_a_resume_of_a_run_another_process_runs_is_one_line_and_touches_nothing(tmp_path):
    runs = tmp_path / "runs"
    record = make_record("r").model_copy(update={"status": "running"})
    write_model(runs / "r" / "record.json", record)
    in_flight = runs / "r" / ".record.json.abc.tmp"  # the live attempt's save, half-written
    in_flight.write_text("{")
    before = (runs / "r" / "record.json").read_bytes()
    holder = hold_lock(runs / "r")
    try:
        result = run_auditor("prompt", "--resume", "r", "--runs-dir", str(runs))
        listed = run_auditor("runs", "--json", "--runs-dir", str(runs))
        live_report = run_auditor("report", "r", "--runs-dir", str(runs))
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: run r is being run by pid {holder.pid} on {os.uname().nodename}; wait for it to end or stop it first"
    ]
    assert in_flight.exists() and (runs / "r" / "record.json").read_bytes() == before
    (row,) = json.loads(listed.stdout)
    assert row["alive"] is True and "resume" not in row  # a resume would be refused: none is offered

    stopped = run_auditor("runs", "--runs-dir", str(runs))  # the holder was killed; the record still says running
    assert "r (stopped) continues with: auditor prompt --resume" in stopped.stdout
    assert "stopped: the record says running, but no process runs it" in stopped.stdout
    assert live_report.returncode == 0 and "was stopped" not in live_report.stderr
    report = run_auditor("report", "r", "--json", "--runs-dir", str(runs))  # its report says so too, on stderr
    assert report.returncode == 0 and json.loads(report.stdout)
    assert report.stderr.strip() == (
        "note: run r was stopped: the record says running, but no process runs it (killed, or its machine went "
        f"down); continue it with: auditor prompt --resume {runs / 'r'}"
    )


def test_a_run_folder_that_cannot_be_locked_is_one_line_that_does_not_advise_the_same_resume(tmp_path, monkeypatch):
    """A folder that cannot be locked (here: a folder where the lock file should be) cannot be run; "continue it
    with --resume" would send the user round in a circle. A read-only one is told how to mend it."""
    runs = tmp_path / "runs"
    write_model(runs / "r" / "record.json", make_record("r").model_copy(update={"status": "interrupted"}))
    before = (runs / "r" / "record.json").read_bytes()
    (runs / "r" / ".lock").mkdir()
    result = run_auditor("prompt", "--resume", "r", "--runs-dir", str(runs))
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr == f"error: cannot lock run folder {runs / 'r'}: Is a directory\n"
    assert "--resume" not in result.stderr and (runs / "r" / "record.json").read_bytes() == before

    def read_only(*_args, **_kwargs):  # what a read-only mount answers (root may write anywhere here)
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr("builtins.open", read_only)
    with pytest.raises(RunLockError, match="Read-only file system; make it writable, or copy the run to a folder"):
        RunLock(runs / "r").acquire()


@pytest.mark.parametrize("ending", ["completed", "failed", "interrupted"])
def test_an_attempt_holds_the_lock_from_begin_until_it_ends_however_it_ends(tmp_path, ending):
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    study = StudyRun(run_dir, make_record("r"), ContentCache(tmp_path / "cache.sqlite"), QuietProgress())
    seen = []

    def step() -> None:
        seen.append(is_running(run_dir))  # another open file of this process sees the lock as taken too
        if ending == "failed":
            raise AuditorError("no such model")
        if ending == "interrupted":
            raise KeyboardInterrupt

    with pytest.raises((AuditorError, KeyboardInterrupt)) if ending != "completed" else nullcontext():
        study.execute([("generate", step)])
    assert seen == [True]
    assert study.record.status == ending and is_running(run_dir) is False


def test_an_attempt_whose_first_save_fails_lets_go_of_the_lock(tmp_path, monkeypatch):
    """A full disk at ``begin``'s save: the error propagates, and the same process can try again at once."""
    import auditor.studies.run as run_module

    run_dir = tmp_path / "r"
    run_dir.mkdir()
    study = StudyRun(run_dir, make_record("r"), ContentCache(tmp_path / "cache.sqlite"), QuietProgress())
    real_write = run_module.write_model

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_module, "write_model", full_disk)
    with pytest.raises(OSError, match="No space left"):
        study.execute([("generate", lambda: None)])
    assert is_running(run_dir) is False
    monkeypatch.setattr(run_module, "write_model", real_write)
    study.execute([("generate", lambda: None)])
    assert study.record.status == "completed" and is_running(run_dir) is False


def test_an_audit_of_a_batch_resumed_alone_is_refused_while_its_batch_runs(tmp_path):
    """A batch runs its audits under its own lock; one of them resumed on its own waits for the batch."""
    runs = tmp_path / "runs"
    (runs / "b").mkdir(parents=True)
    (runs / "b" / "record.json").write_text(json.dumps({"kind": "batch"}))  # its kind is all the lock reads
    audit = runs / "b" / "audits" / "001-a-photo-of-a-pharmacist"
    write_model(audit / "record.json", make_record(audit.name).model_copy(update={"status": "interrupted"}))
    holder = hold_lock(runs / "b")
    try:
        result = run_auditor("prompt", "--resume", str(audit))
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: run {audit.name} belongs to run b, which is being run by pid {holder.pid} on ")
    assert not (audit / ".lock").exists()


def test_reports_of_a_running_record_say_whether_a_process_runs_it_and_advise_a_resume_only_when_none_does(tmp_path):
    """A record saying ``running`` is a run going on now (a resume would be refused) or one killed without writing
    how it ended (a resume continues it): the reports tell them apart by the lock, as ``auditor runs`` does."""
    from rich.console import Console

    from auditor.records import RunError
    from auditor.reporting.sentences import unfinished_note
    from auditor.reporting.status import STOPPED_PHRASE
    from auditor.reporting.trace import no_scores, render_trace, write_trace_report
    from tests.test_trace_scoring import IMAGES, _record

    record = _record(IMAGES, [])  # not scored: its reports show what it made so far
    assert record.status == "running"
    run_dir = tmp_path / "t"
    run_dir.mkdir()
    resume = record.resume_command(run_dir)

    def terminal() -> str:
        console = Console(width=80, record=True)
        render_trace(record, run_dir, console)
        return " ".join(console.export_text().split())

    stopped = terminal()
    assert f"run hand {STOPPED_PHRASE}" in stopped and f"{resume} goes on with it" in stopped
    badge = '<span class="badge bad">{}</span>'  # the page's status, as `auditor runs` shows it
    assert badge.format("stopped") in write_trace_report(record, run_dir).read_text(encoding="utf-8")
    write_model(run_dir / "record.json", record)
    machine = run_auditor("report", str(run_dir), "--json")  # the JSON says so too, as `auditor runs --json` does
    assert machine.returncode == 0 and "was stopped" in machine.stderr
    assert (json.loads(machine.stdout)["status"], json.loads(machine.stdout)["alive"]) == ("running", False)
    assert unfinished_note(record, run_dir) == (
        f"this run did not complete (stopped without recording why); {resume} continues it"
    )
    refused = record.model_copy(update={"status": "failed", "errors": [  # its own settings stop it: no resume offered
        RunError(stage="select", type="StartAgainError", message="nothing to trace")
    ]})  # fmt: skip
    assert unfinished_note(refused, run_dir) == (
        "this run did not complete (failed at select: nothing to trace); a resume would stop the same way: start a new "
        "run"
    )
    holder = hold_lock(run_dir)
    try:
        running = terminal()
        assert "run hand is running now" in running and "--resume" not in running
        assert no_scores(record, run_dir).startswith("No scores yet: the run is running now")
        assert unfinished_note(record, run_dir) == "this run is running now: what it has finished so far is shown"
        assert badge.format("running") in write_trace_report(record, run_dir).read_text(encoding="utf-8")
    finally:
        holder.kill()
        holder.wait()


def test_a_prompt_audits_reports_tell_a_running_record_apart_by_the_lock(tmp_path):
    """The prompt audit's headline, notes and page say "running now" or "stopped" as ``auditor runs`` does, not the
    hedge a record alone allows; a caller that does not ask the lock keeps the hedge."""
    from rich.console import Console

    from auditor.reporting import render_terminal, report_json, write_html_report
    from auditor.reporting.status import STATUS_PHRASES, STOPPED_PHRASE

    record = make_record("p")  # planned, not scored
    assert record.status == "running" and record.scores is None
    run_dir = tmp_path / "p"
    write_model(run_dir / "record.json", record)

    def shown() -> tuple[str, dict, str]:
        console = Console(width=100, record=True)
        render_terminal(record, run_dir, console)
        page = write_html_report(record, run_dir).read_text()
        return " ".join(console.export_text().split()), report_json(record, run_dir), page

    terminal, data, page = shown()
    assert data["headline"] == f"This run {STOPPED_PHRASE} and has no scores; below is what it finished."
    assert data["status_phrase"] == STOPPED_PHRASE and (data["status"], data["shown_status"]) == ("running", "stopped")
    assert terminal.count("This run was stopped without recording why") == 1  # the headline says it, no note again
    assert "Run p stopped" in terminal and page.count("This run was stopped without recording why") == 1
    assert '<span class="badge bad">stopped</span>' in page
    # and what goes on from it, as every other kind of run says it
    resume = f"Next: auditor prompt --resume {run_dir} continues it."
    assert data["next_step"] == f"auditor prompt --resume {run_dir} continues it"
    assert resume in terminal and f"<strong>Next:</strong> auditor prompt --resume {run_dir} continues it." in page
    narrow = Console(width=40, record=True)
    render_terminal(record, run_dir, narrow)
    assert resume in narrow.export_text().splitlines()  # whole on its line: the command copies back as it is
    with held_elsewhere(run_dir):
        terminal, data, page = shown()
    assert data["headline"].startswith("This run is running now and has no scores")
    assert data["shown_status"] == "running"
    assert terminal.count("This run is running now") == 1 and page.count("This run is running now") == 1
    assert "Run p running" in terminal and "without recording why" not in terminal + page
    assert data["next_step"] is None and "--resume" not in terminal + page  # a resume would be refused now
    assert report_json(record)["status_phrase"] == STATUS_PHRASES["running"]  # no folder to ask


def test_report_html_writes_a_page_only_while_no_process_runs_the_run(tmp_path):
    """``report --html`` reads the record and writes the page holding the run's lock: a run that ended in between had
    its own page replaced by one of the record as it was. While a process runs it, it is refused (the run writes its
    page when it ends); the lock it holds itself does not make the run read "running now"."""
    record = make_record("p")  # planned, not scored: a run killed without recording how it ended
    run_dir = tmp_path / "p"
    write_model(run_dir / "record.json", record)
    with held_elsewhere(run_dir) as holder:
        refused = run_auditor("report", str(run_dir), "--html")
        shown = run_auditor("report", str(run_dir))  # where it stands now, without a page
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1
    assert refused.stderr.startswith(f"error: run p is being run by pid {holder.pid} on ")
    assert "it writes its report.html when it ends" in refused.stderr and not (run_dir / "report.html").exists()
    assert shown.returncode == 0 and "running now" in " ".join(shown.stdout.split())
    written = run_auditor("report", str(run_dir), "--html")  # nobody runs it now
    assert written.returncode == 0, written.stderr
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert '<span class="badge bad">stopped</span>' in page and "running now" not in page


def test_report_html_where_the_lock_cannot_be_taken_writes_the_page_unguarded_and_claims_nothing(tmp_path, monkeypatch):
    """A lock file this process may not open (another user's, in a shared runs folder; here a folder stands there)
    leaves ``report --html`` unguarded, as a filesystem without ``flock`` does: the page is written, and whether a
    process runs the run stays "cannot be told", never "stopped" on the strength of a lock it does not hold."""
    from auditor.core import runlock

    record = make_record("p")
    run_dir = tmp_path / "p"
    write_model(run_dir / "record.json", record)
    (run_dir / ".lock").mkdir()
    written = run_auditor("report", str(run_dir), "--html")
    assert written.returncode == 0 and (run_dir / "report.html").is_file(), written.stderr
    (run_dir / ".lock").rmdir()

    def no_flock(*_args, **_kwargs):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(runlock.fcntl, "flock", no_flock)
    with runlock.held_while_read(run_dir, "reading it", "why"):
        assert is_running(run_dir) is None


def test_a_live_display_refused_by_the_lock_leaves_no_frame_above_the_refusal():
    """``explore --resume`` of a run another process runs: its round table would be drawn above the one-line
    refusal; an attempt that ended otherwise keeps its last frame."""
    import io

    from rich.console import Console

    from auditor.core.errors import RunBusyError
    from auditor.studies.progress import LiveProgress

    shown = []
    for refusal in (RunBusyError("run r is being run by pid 1"), None):
        console = Console(file=io.StringIO(), width=80)
        with contextlib.suppress(RunBusyError), LiveProgress(console, lambda: "round 2 · arms alive 16 of 16"):
            if refusal is not None:
                raise refusal
        shown.append(console.file.getvalue())
    assert shown[0].strip() == "" and shown[1] == "round 2 · arms alive 16 of 16\n"
