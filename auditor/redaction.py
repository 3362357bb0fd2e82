"""Keep credentials out of everything auditor writes or prints.

A server may echo the API key back (in an error, or even in a reply), and exception
messages end up in records, transcripts and on the terminal. Every such text passes
through :func:`redact` first.
"""

from __future__ import annotations

import os

#: Environment variables whose values are secrets.
SECRET_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
)


def redact(text: str) -> str:
    """``text`` with the value of every credential variable that is set replaced by ``***``."""
    for name in SECRET_VARIABLES:
        secret = os.environ.get(name)
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text
