"""Run the real ``auditor`` entry point in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_auditor(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 300):
    """``auditor ARGS`` through ``python -m auditor``; returns the CompletedProcess (text mode)."""
    return subprocess.run(
        [sys.executable, "-m", "auditor", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=timeout,
    )
