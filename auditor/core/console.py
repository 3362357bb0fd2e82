"""Where command output goes: rich for people, plain JSON for programs."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.segment import Segment
from rich.text import Text

#: C0 and C1 control characters but line breaks and tabs: in text, a terminal runs them as commands (ESC starts a
#: sequence that can clear the screen, set the window title or hide what follows). Also the bidirectional
#: embeddings, overrides and isolates: in an answer, a right-to-left override reverses the rest of its line on a
#: terminal that implements them, numbers beside it included.
BIDI_CONTROLS = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
CONTROL_CHARACTERS = {
    code: None for code in [*range(0x20), *range(0x7F, 0xA0), *BIDI_CONTROLS] if chr(code) not in "\n\t"
}


class TextOnlyConsole(Console):
    """A rich console that writes the characters of its text but no control characters.

    Prompts, LLM replies, VQA answers and file names reach the terminal, and any of them may
    carry an escape sequence: a counterfactual written by an LLM, a caption file, a model's
    answer. They are dropped where text becomes output, after every renderable (tables,
    panels) was laid out, so no printing site can forget it. Rich's own styling is added
    after this, and its control segments (a live display's cursor moves) pass as they are.
    """

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(segment.text.translate(CONTROL_CHARACTERS), segment.style)
            for segment in buffer
        )


#: Human-readable output. Width follows the terminal; pipes get 100 columns, never colour codes. Strings print
#: literally (no rich markup): they carry prompts, paths and model answers, where "[/x]" is text, not a tag.
out = TextOnlyConsole(highlight=False, soft_wrap=False, markup=False)
#: Notices and errors, kept off stdout so ``--json`` output stays parseable; literal like ``out``.
err = TextOnlyConsole(stderr=True, highlight=False, markup=False)


def say(console: Console, text: str | Text) -> None:
    """Prose, printed literally (no markup) and wrapped at the console's width; a line that carries a path or a
    command goes through :func:`say_whole` instead."""
    console.print(text if isinstance(text, Text) else Text(text), soft_wrap=False)


def say_whole(console: Console, text: str | Text) -> None:
    """Plain text that carries a path or a command, printed without rich's word wrapping: rich breaks a word longer
    than the width with a newline, so a long run folder would copy back broken; the terminal folds it instead."""
    console.print(text if isinstance(text, Text) else Text(text), soft_wrap=True)


def print_json(data: Any) -> None:
    """One JSON document on stdout, no colour codes, for ``--json``."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def print_run_folder(path: Path | str) -> None:
    """The run folder alone on stdout, for ``--quiet``: a script reads it back, so it is never wrapped."""
    sys.stdout.write(f"{path}\n")
    sys.stdout.flush()


def notice(message: str) -> None:
    """A short note for the person running the command (stderr); ``message`` is shown literally, never as markup."""
    from rich.markup import escape

    err.print(f"[yellow]note:[/yellow] {escape(message)}", markup=True, soft_wrap=True)  # a path in it stays whole
