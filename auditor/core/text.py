"""The one way auditor folds whitespace in text it reads, and tells text that shows nothing.

A prompt typed on the command line, read from a batch file, written by an LLM or asked of
an exploration must give the same cache key and the same record: line breaks, tabs and
runs of spaces all read as one space, with none at either end. Every place that takes
text in folds it with :func:`single_spaced`, so they cannot drift apart.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence


def single_spaced(text: str) -> str:
    """``text`` with every run of whitespace (line breaks and tabs included) as one space, and none at the ends."""
    return " ".join(text.split())


#: Unicode categories that show nothing: controls, formatting marks (zero-width spaces and joiners, direction
#: marks) and separators. A code point this Python's Unicode does not know yet (a newer emoji) counts as shown.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})


def has_visible_text(text: str) -> bool:
    """Whether ``text`` shows anything: a prompt of spaces, control characters or zero-width marks (``\\u200b``) is
    as empty as no prompt, though a program would count its characters."""
    return any(unicodedata.category(char) not in INVISIBLE_CATEGORIES for char in text)


def control_character(text: str) -> str | None:
    """The first control character of ``text`` that is not whitespace (NUL, BEL, ESC...), written ``U+0000``, or
    None. Nobody types one into a prompt: it comes from a damaged or mis-read file (UTF-16 read as UTF-8 has a NUL
    after every letter), and would reach the model, the cache key and the record unseen."""
    found = next((char for char in text if unicodedata.category(char) == "Cc" and not char.isspace()), None)
    return None if found is None else f"U+{ord(found):04X}"


def refuse_control_characters(text: str, what: str) -> None:
    """One line naming ``what`` (e.g. "the prompt") and its first control character (:func:`control_character`),
    for text typed or given on the command line."""
    from auditor.core.errors import AuditorError

    if control := control_character(text):
        raise AuditorError(f"{what} holds the control character {control}: give it as printable text")


def text_key(text: str) -> str:
    """How two texts a person wrote are compared (prompts, counterfactuals, templates): case and runs of whitespace
    aside."""
    return single_spaced(text).casefold()


def elided(text: str, limit: int) -> str:
    """``text``, or where it is longer than ``limit`` characters its start and end with " … " between them: a long
    prompt quoted in a notice still shows how it begins and ends (where a counterfactual's words often are)."""
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half]} … {text[len(text) - half:]}"


def first_few(texts: Sequence[str], shown: int = 3, separator: str = ", ") -> str:
    """The first ``shown`` of ``texts`` and how many more, for a message that must stay one readable line:
    ``a, b, c (and 2 more)``."""
    more = len(texts) - shown
    return separator.join(texts[:shown]) + (f" (and {more} more)" if more > 0 else "")
