"""`make setup` installs the system packages auditor needs, so `make test` works on a fresh machine.

The install script is run with stand-ins for ``dpkg``, ``id`` and ``apt-get`` on PATH, so
the test sees what it would install (or tell the user to run) without touching the system.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "system-packages.sh"


def _fake_bin(folder: Path, *, uid: int, installed: set[str]) -> Path:
    """``dpkg -s`` that knows ``installed``, ``id -u`` printing ``uid``, an ``apt-get`` that logs its arguments."""
    folder.mkdir()
    tools = {
        "dpkg": f'[ "$1" = -s ] && case "$2" in {"|".join(installed) or "none-installed"}) exit 0;; esac; exit 1',
        "id": f"echo {uid}",
        "apt-get": f'echo "$@" >> {folder / "apt.log"}',
    }
    for name, body in tools.items():
        path = folder / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return folder


def _run(fake: Path, *packages: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    return subprocess.run(["bash", str(SCRIPT), *packages], capture_output=True, text=True, env=env, timeout=30)


def test_root_installs_only_the_missing_packages(tmp_path):
    fake = _fake_bin(tmp_path / "bin", uid=0, installed={"wordnet-base"})
    result = _run(fake, "wordnet-base", "wordnet-sense-index")
    assert result.returncode == 0, result.stderr
    calls = (fake / "apt.log").read_text().splitlines()
    assert calls[0] == "update -qq"
    assert calls[1].split()[-1] == "wordnet-sense-index" and "wordnet-base" not in calls[1]


def test_a_normal_user_gets_one_line_saying_what_to_run(tmp_path):
    fake = _fake_bin(tmp_path / "bin", uid=1000, installed=set())
    result = _run(fake, "wordnet-base", "wordnet-sense-index")
    assert result.returncode == 0
    assert not (fake / "apt.log").exists()
    assert result.stderr.strip() == (
        "missing system packages: run `sudo apt-get install wordnet-base wordnet-sense-index`, then `make` again"
    )


def test_nothing_happens_when_everything_is_installed(tmp_path):
    fake = _fake_bin(tmp_path / "bin", uid=0, installed={"wordnet-base", "wordnet-sense-index"})
    result = _run(fake, "wordnet-base", "wordnet-sense-index")
    assert result.returncode == 0 and result.stdout == result.stderr == ""
    assert not (fake / "apt.log").exists()


def test_make_setup_installs_wordnet_before_auditor_setup_and_ci_only_adds_chromium():
    plan = subprocess.run(
        ["make", "-n", "-B", "setup"], cwd=ROOT, capture_output=True, text=True, timeout=60
    ).stdout.splitlines()
    install = next(i for i, line in enumerate(plan) if "system-packages.sh" in line)
    assert "wordnet-base" in plan[install] and "wordnet-sense-index" in plan[install]
    assert install < next(i for i, line in enumerate(plan) if line.endswith("auditor setup"))
    ci = (ROOT / ".ci" / "run").read_text()
    assert "wordnet" not in ci and "system-packages.sh chromium" in ci and ci.rstrip().endswith("make test")
