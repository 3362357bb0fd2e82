"""Keep credentials out of everything auditor writes or prints.

A server may echo the API key back (in an error, or even in a reply), and exception
messages end up in records, transcripts and on the terminal. Every such text passes
through :func:`redact` first.

Which values are secret is decided by the variable's name, not by a list: any variable
whose name ends in ``_KEY``, ``_TOKEN``, ``_SECRET`` or ``_PASSWORD`` (any case), so the
key of a provider we have never heard of (a langchain backend, a private gateway) is
covered too. Values shorter than :data:`MIN_SECRET_LENGTH` are left alone: a variable
such as ``USE_TOKEN=1`` would otherwise blank every "1" in a report, and so short a value
protects nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: Credential variables of the backends auditor knows; ``auditor doctor`` lists them, set or not.
SECRET_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
)
#: A variable whose name ends with one of these holds a secret.
SECRET_NAME_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
#: Shorter values are not redacted (see the module docstring).
MIN_SECRET_LENGTH = 8


def is_secret_name(name: str) -> bool:
    """Whether a variable called ``name`` holds a credential, judged by its name's ending."""
    return name.upper().endswith(SECRET_NAME_SUFFIXES)


def _secrets(environ: Mapping[str, str]) -> dict[str, str]:
    return {
        name: value for name, value in environ.items() if is_secret_name(name) and len(value) >= MIN_SECRET_LENGTH
    }


def secret_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """Names of the set variables whose values :func:`redact` blanks, sorted (``os.environ`` by default)."""
    return sorted(_secrets(os.environ if environ is None else environ))


def redact(text: str) -> str:
    """``text`` with the value of every set credential variable (see :func:`secret_variables`) replaced by ``***``."""
    # Longest first, so a secret that contains another is blanked whole.
    for secret in sorted(set(_secrets(os.environ).values()), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
