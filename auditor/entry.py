"""The ``auditor`` script and ``python -m auditor``: the command line, loaded so that Ctrl-C while it loads ends as
Ctrl-C later does.

Loading the command line (typer, rich, the command modules) takes most of a second; a Ctrl-C then lands in some
library's import and Python would print a traceback of it. Nothing has started yet, so the command just ends with
the one line and the exit code of an interruption (:func:`auditor.cli.main` handles every later one).
"""

from __future__ import annotations

import sys

#: The exit code of an interrupted command (128 + SIGINT).
INTERRUPTED = 130


def main() -> None:
    try:
        from auditor.cli import main as run_command_line
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(INTERRUPTED)
    run_command_line()
