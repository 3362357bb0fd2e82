"""benchmarks/detached.py: a command that outlasts the one that started it, collected by later ones."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

DETACHED = Path(__file__).resolve().parent.parent / "benchmarks" / "detached.py"
#: Waits for the file ``go`` beside the results, then writes the results: the test decides when it ends.
GATED = (
    "import pathlib, sys, time\n"
    "results = pathlib.Path(sys.argv[1])\n"
    "while not (results.parent / 'go').exists(): time.sleep(0.05)\n"
    "results.write_text('{}'); print('done')\n"
)


def detached(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(DETACHED), *args], capture_output=True, text=True, timeout=60)


def test_a_started_command_runs_on_and_is_collected_with_its_files(tmp_path):
    state, out = tmp_path / "state", tmp_path / "out"
    started = detached("start", "--state", str(state), "--", sys.executable, "-c", GATED, str(state / "r.json"))
    assert started.returncode == 0 and "collect with" in started.stdout
    again = detached("start", "--state", str(state), "--", "true")
    assert again.returncode == 2 and "has not ended" in again.stderr

    early = detached("collect", "--state", str(state), "--into", str(out))
    assert early.returncode == 75 and "still running" in early.stdout
    assert (out / "log.txt").exists() and not (out / "exit-status").exists() and not (out / "r.json").exists()

    (state / "go").touch()
    done = detached("collect", "--state", str(state), "--wait", "30", "--into", str(out))
    assert done.returncode == 0 and "ended with exit status 0" in done.stdout
    assert (out / "r.json").read_text() == "{}" and (out / "log.txt").read_text() == "done\n"
    assert not (out / "pid").exists()


def test_a_failed_command_is_collected_with_its_status_and_not_with_an_earlier_runs_files(tmp_path):
    state, out = tmp_path / "state", tmp_path / "out"
    state.mkdir()
    (state / "r.json").write_text('{"run": "earlier"}')
    os.utime(state / "r.json", (time.time() - 60, time.time() - 60))
    fails = "import sys; print('no GPU', file=sys.stderr); sys.exit(3)"
    assert detached("start", "--state", str(state), "--", sys.executable, "-c", fails).returncode == 0
    collected = detached("collect", "--state", str(state), "--wait", "30", "--into", str(out))
    assert collected.returncode == 3 and (out / "log.txt").read_text() == "no GPU\n"
    assert not (out / "r.json").exists()  # left by an earlier run: not this one's results
    assert detached("start", "--state", str(state), "--", "true").returncode == 0  # the failed one has ended
    assert detached("collect", "--state", str(state), "--wait", "30", "--into", str(out)).returncode == 0
    assert (out / "log.txt").read_text() == ""  # the new command's log, not the old one's


def test_a_command_killed_before_its_status_is_written_is_reported_as_ended(tmp_path):
    state, out = tmp_path / "state", tmp_path / "out"
    assert detached("start", "--state", str(state), "--", "sleep", "60").returncode == 0
    os.killpg(int((state / "pid").read_text().split()[0]), 9)  # its whole session, as a machine given back would
    collected = detached("collect", "--state", str(state), "--wait", "30", "--into", str(out))
    assert collected.returncode == 1 and "without an exit status" in collected.stdout
    assert detached("start", "--state", str(state), "--", "true").returncode == 0  # and a new one may start


def test_collect_without_a_start_and_start_without_a_command_are_one_line_errors(tmp_path):
    nothing = detached("collect", "--state", str(tmp_path / "none"), "--into", str(tmp_path / "out"))
    assert nothing.returncode == 2 and "nothing was started" in nothing.stderr
    empty = detached("start", "--state", str(tmp_path / "state"), "--")
    assert empty.returncode == 2 and "name the command" in empty.stderr
