"""Occupation lists, shared by the studies that prompt per occupation (T2IAT's occupation study, bias amplification).

A list is a text file with one occupation per line, ``#`` starting a comment, or names
given on the command line. Each occupation names its prompt sets by its slug, so two
occupations with the same slug ("Nurse", "nurse!") are one occupation and refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from auditor.core.errors import AuditorError
from auditor.core.store import read_text_file, slugify
from auditor.core.text import single_spaced

#: Longest slug of an occupation in prompt set ids.
SLUG_LENGTH = 80


def occupation_slug(occupation: str) -> str:
    """The occupation as it appears in prompt set ids and image paths."""
    return slugify(occupation, max_length=SLUG_LENGTH)


def read_occupations(text: str, where: str) -> list[str]:
    """Occupations from a text file's contents: one per line, ``#`` comments and blank lines ignored."""
    occupations = [single_spaced(line.split("#", 1)[0]) for line in text.splitlines()]
    occupations = [o for o in occupations if o]
    if not occupations:
        raise AuditorError(f"{where} lists no occupations (one per line, '#' starts a comment)")
    return check_occupations(occupations, where)


def check_occupations(occupations: Sequence[str], where: str) -> list[str]:
    """The occupations, single-spaced (one cache key however typed); a one-line error for an empty list, an empty
    name, one without a word (nothing to search captions for) or two with one slug."""
    cleaned = [single_spaced(o) for o in occupations]
    if not cleaned:
        raise AuditorError(f"{where}: no occupations given")
    if not all(cleaned):
        raise AuditorError(f"{where}: an occupation cannot be empty")
    for occupation in cleaned:
        if not any(character.isalnum() for character in occupation):
            raise AuditorError(f"{where}: the occupation {occupation!r} has no word in it")
    slugs: dict[str, str] = {}
    for occupation in cleaned:
        slug = occupation_slug(occupation)
        if slug in slugs:
            raise AuditorError(f"{where}: {slugs[slug]!r} and {occupation!r} are the same occupation")
        slugs[slug] = occupation
    return cleaned


def read_occupations_file(path: Path) -> list[str]:
    """Occupations from a file (see :func:`read_occupations`); a missing or unreadable file is one line."""
    return read_occupations(read_text_file(path), str(path))


def builtin_occupations(name: str) -> list[str]:
    """A built-in list, ``prompts/<name>``."""
    from auditor.core.resources import read_prompt_text

    return read_occupations(read_prompt_text(name), f"prompts/{name}")
