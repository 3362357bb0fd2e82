"""Where command output goes: rich for people, plain JSON for programs."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

#: Human-readable output. Width follows the terminal; pipes get 100 columns, never colour codes. Strings print
#: literally (no rich markup): they carry prompts, paths and model answers, where "[/x]" is text, not a tag.
out = Console(highlight=False, soft_wrap=False, markup=False)
#: Notices and errors, kept off stdout so ``--json`` output stays parseable; literal like ``out``.
err = Console(stderr=True, highlight=False, markup=False)


def print_json(data: Any) -> None:
    """One JSON document on stdout, no colour codes, for ``--json``."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def print_run_folder(path: Any) -> None:
    """The run folder alone on stdout, for ``--quiet``: a script reads it back, so it is never wrapped."""
    sys.stdout.write(f"{path}\n")
    sys.stdout.flush()


def notice(message: str) -> None:
    """A short note for the person running the command (stderr); ``message`` is shown literally, never as markup."""
    from rich.markup import escape

    err.print(f"[yellow]note:[/yellow] {escape(message)}", markup=True)
