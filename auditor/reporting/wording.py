"""How prompts are shown: which words a counterfactual changed, short labels, seed ranges."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import AuditPlan, GeneratedImage


@dataclass(frozen=True)
class Segment:
    """A piece of a counterfactual prompt; ``changed`` marks words the initial prompt lacks."""

    text: str
    changed: bool


_WORD = re.compile(r"\S+|\s+")
#: "a" and "an" are one article: "a photo of an elderly pharmacist" adds "elderly", and the article only follows it.
_ARTICLES = {"an": "a"}


def _word_key(token: str, articles: bool = True) -> str:
    """A word as compared: case- and punctuation-insensitively, "an" read as "a" when ``articles``."""
    key = re.sub(r"[^\w-]", "", token.casefold())
    return _ARTICLES.get(key, key) if articles else key


def _changed(initial: str, tokens: list[str], articles: bool) -> set[int]:
    """Indices into ``tokens`` (the counterfactual's words and spaces) of the words the initial prompt lacks."""
    words = [i for i, t in enumerate(tokens) if not t.isspace()]
    base = [_word_key(t, articles) for t in initial.split()]
    keys = [_word_key(tokens[i], articles) for i in words]
    matcher = difflib.SequenceMatcher(a=base, b=keys, autojunk=False)
    changed: set[int] = set()
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            changed.update(words[j1:j2])
    return changed


def prompt_segments(initial: str, counterfactual: str) -> list[Segment]:
    """Split ``counterfactual`` into unchanged and changed pieces relative to ``initial``.

    Words are compared case- and punctuation-insensitively, so "a photo of a *female*
    pharmacist" marks only "female"; "an" matches "a", so "a photo of an *elderly* pharmacist"
    marks only "elderly", unless the article is all that changed. Whitespace is kept so the
    pieces join back exactly.
    """
    tokens = _WORD.findall(counterfactual)
    changed = _changed(initial, tokens, articles=True) or _changed(initial, tokens, articles=False)
    segments: list[Segment] = []
    for i, token in enumerate(tokens):
        flag = i in changed or (token.isspace() and i - 1 in changed and i + 1 in changed)
        if segments and segments[-1].changed == flag:
            segments[-1] = Segment(segments[-1].text + token, flag)
        else:
            segments.append(Segment(token, flag))
    return segments


def prompt_label(initial: str, counterfactual: str) -> str:
    """The words a counterfactual adds or swaps ("female"), or the whole prompt when none do."""
    changed = [s.text.strip() for s in prompt_segments(initial, counterfactual) if s.changed]
    return " … ".join(changed) or counterfactual


def describe_seeds(seeds: list[int]) -> str:
    """``0-47 (48 seeds)`` for a run of consecutive seeds, else the list (shortened past 12)."""
    if not seeds:
        return "none recorded"
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 2:
        return f"{seeds[0]}-{seeds[-1]} ({len(seeds)} seeds)"
    shown = ", ".join(str(s) for s in seeds[:12])
    return shown + (f", … ({len(seeds)} seeds)" if len(seeds) > 12 else "")


def seeds_phrase(seeds: list[int] | None) -> str:
    """How a run's images were seeded (its :meth:`~auditor.records.StudyRecord.image_seeds`), for its report: the
    seeds image i of every prompt set came from, or that its backend (an images API, a folder of images) takes
    none."""
    if seeds is None:
        return "no seeds (the backend takes none: image i of a prompt set is simply its i-th)"
    noun = "seed" if len(seeds) == 1 else "seeds"
    return f"{noun} {describe_seeds(seeds)}, shared by every prompt set (image i from the i-th)"


def resampled(count: int, seeded: bool = True) -> str:
    """What a paired bootstrap resamples, counted: "8 seeds", or "8 image positions" where no seed made the images
    (image i of every set is then only its i-th)."""
    return f"{count} {'seeds' if seeded else 'image positions'}"


def made_by(image: GeneratedImage) -> str:
    """What made an image, for a tooltip or a column: "seed S", or "image i" from a backend that takes no seed."""
    return f"image {image.index}" if image.seed is None else f"seed {image.seed}"


def quote(text: str) -> str:
    return f"'{text}'"


def setting_text(value: Any, *, quoted: bool = False) -> str:
    """A recorded setting as a person reads it, in words rather than Python's: None is the model's own default, a
    flag is yes or no, a list its items (none when empty); text in quotes when ``quoted`` (inside a sentence)."""
    if value is None:
        return "default"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return quote(value) if quoted and isinstance(value, str) else str(value)


def plan_notes(plan: AuditPlan) -> list[str]:
    """What the plan's reader should know, a line each: the planner's own notes on how it read the prompt, then the
    ``--axes`` it left out and why. Said where the person looks, in the notes and as the run goes, since otherwise
    only the planning transcript says it."""
    notes = [note if note.endswith(".") else f"{note}." for note in plan.notes]
    if plan.dropped_axes:
        reasons = "; ".join(f"{name} ({why})" for name, why in plan.dropped_axes.items())
        notes.append(f"--axes dropped for {quote(plan.prompt)}: {reasons}.")
    return notes


def dropped_axes_summary(dropped: list[dict[str, str]], noun: str = "prompt") -> str | None:
    """The ``--axes`` that the plans of many prompts (a batch's) left out, in one line: each axis, how many of the
    prompts dropped it and why (None when none did). One line for the whole run, since each prompt's own report
    names its drops, and a note per prompt would bury the others. ``dropped``: one plan's ``dropped_axes`` per
    prompt, every prompt counted (those that dropped none too)."""
    reasons: dict[str, dict[str, None]] = {}  # axis -> its distinct reasons, in order (a dict keeps it)
    for plan in dropped:
        for name, why in plan.items():
            reasons.setdefault(name, {})[why] = None
    if not reasons:
        return None
    parts = [
        f"{name} for {sum(name in plan for plan in dropped)} of {counted(len(dropped), noun)} ({', or '.join(whys)})"
        for name, whys in reasons.items()
    ]
    return f"--axes dropped: {'; '.join(parts)}."


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless the count is one: '1 round', '3 rounds'."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
