"""Run a command that outlasts one device command, and collect what it wrote in later ones.

A lent GPU machine runs one command for at most 10 minutes, ends whatever that command
left running unless it started a session of its own, and stays warm for only 30 s after
each command. A paper-size benchmark takes longer than one command. So ``start``
launches it in its own session and returns at once, and each later command (sent within
the warm window) runs ``collect``: it waits up to ``--wait`` seconds, copies the state
folder's files (the log, the exit status, whatever the command wrote there) into
``--into`` (``$OUT``, which comes back; only the files changed since the start), and
exits 0 once the command has ended with 0, with the command's own status if it failed,
or with 75 while it still runs::

    python3 benchmarks/detached.py start --state /tmp/bench -- \\
        benchmarks/on-device.sh --t2i sd15 --models .bench-models --out /tmp/bench/results.json
    python3 benchmarks/detached.py collect --state /tmp/bench --wait 560 --into $OUT
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

LOG = "log.txt"
#: Written (atomically) when the command ends: its exit status.
EXIT_STATUS = "exit-status"
PID = "pid"
#: ``collect``'s exit status while the command still runs (EX_TEMPFAIL: try again).
STILL_RUNNING = 75
#: Seconds between looks at the state folder while ``collect`` waits.
POLL_S = 2.0
#: File times come from a coarse kernel clock (a few ms behind ``time.time()``): a file written just after the
#: start may carry a time just before it.
MTIME_SLACK_S = 1.0


def start(state: Path, command: list[str]) -> int:
    """Launch ``command`` in a session of its own, its output in ``state/log.txt``; refuse while one still runs."""
    if not command:
        print("detached.py start: name the command after --", file=sys.stderr)
        return 2
    state.mkdir(parents=True, exist_ok=True)
    if _running(state):
        print(f"detached.py start: the command started in {state} has not ended; collect it first", file=sys.stderr)
        return 2
    for name in (LOG, EXIT_STATUS, PID):
        (state / name).unlink(missing_ok=True)
    started = time.time()
    status = state / EXIT_STATUS
    # The shell records the status under a temporary name, then renames it: collect never reads half a number.
    wrapper = ["sh", "-c", '"$@"; echo $? > "$0.tmp" && mv "$0.tmp" "$0"', str(status), *command]
    with (state / LOG).open("wb") as log:
        process = subprocess.Popen(wrapper, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)  # fmt: skip
    (state / PID).write_text(f"{process.pid} {started!r}\n")
    print(f"started {' '.join(command)} (pid {process.pid}); collect with: detached.py collect --state {state}")
    return 0


def collect(state: Path, wait_s: float, into: Path) -> int:
    """Wait up to ``wait_s`` for the started command to end; copy the files of the state folder it wrote (those
    changed since it started: a file an earlier run left there is not this run's) into ``into``."""
    if not (state / PID).exists():
        print(f"detached.py collect: nothing was started in {state}", file=sys.stderr)
        return 2
    started = float((state / PID).read_text().split()[1])
    deadline = time.monotonic() + wait_s
    while _running(state) and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(POLL_S, left))
    # Looked at once, before copying (so what is copied is what is reported), running first: a command that ends
    # between the two looks has its exit status by the second.
    running = _running(state)
    ended = (state / EXIT_STATUS).exists()
    into.mkdir(parents=True, exist_ok=True)
    for path in sorted(state.iterdir()):
        if path.is_file() and path.name != PID and not path.name.endswith(".tmp"):
            if path.stat().st_mtime >= started - MTIME_SLACK_S:  # written by this run
                shutil.copyfile(path, into / path.name)
    if running and not ended:
        print(f"still running after {wait_s:g} s; its log so far is in {into / LOG}")
        return STILL_RUNNING
    if not ended:
        print(f"ended without an exit status (killed?); its log is in {into / LOG}")
        return 1
    code = int((state / EXIT_STATUS).read_text())
    print(f"ended with exit status {code}; its files are in {into}")
    return code


def _running(state: Path) -> bool:
    """Whether the command started in ``state`` still runs: started, no exit status yet, its process alive."""
    if not (state / PID).exists() or (state / EXIT_STATUS).exists():
        return False
    pid = int((state / PID).read_text().split()[0])
    try:  # a process that ended but was not reaped (no init in a container) is a zombie: not running
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    starting = verbs.add_parser("start", help="Launch a command that outlives this one.")
    starting.add_argument("--state", type=Path, required=True, help="Folder for its log, pid and exit status.")
    starting.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command.")
    collecting = verbs.add_parser("collect", help="Wait for it, then copy what it wrote.")
    collecting.add_argument("--state", type=Path, required=True)
    collecting.add_argument("--wait", type=float, default=0.0, help="Seconds to wait for it to end (default 0).")
    collecting.add_argument("--into", type=Path, required=True, help="Where its files go (e.g. $OUT).")
    args = parser.parse_args(argv)
    if args.verb == "start":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        return start(args.state, command)
    return collect(args.state, args.wait, args.into)


if __name__ == "__main__":
    sys.exit(main())
