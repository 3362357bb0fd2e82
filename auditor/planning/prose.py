"""Axes from replies written as prose with headed lists (chat models without JSON mode).

Without JSON mode, open-weight chat models answer in prose: an introductory sentence,
section headers (a markdown bold line, a "###" heading, "Gender bias:" on its own line,
"1. **Gender**: why ..."), labelled lines under each ("Counterfactual 1: ...", "- ...",
"1. ..."), explanations after a dash or in deeper bullets, a closing sentence. A header
starts an axis and its first list sets the item level; deeper bullets are notes. A
header that reads as a sentence ("Here are the counterfactuals:") or a note ("**Note:**",
"Important considerations:") is no axis, and the lines under it are dropped; lines that
are neither header nor item (introductions, closings, explanations) are never read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from auditor.planning.proposals import ProposedAxis

_BULLETS = "-*+\u2022\u00b7\u00ab\u00bb\u25e6\u25aa."
_MARKER = re.compile(rf"^(?:(?P<bullet>[{re.escape(_BULLETS)}])|(?P<number>\d+[.)]))\s+(?=\S)")
_COUNTERFACTUAL = re.compile(r"^(?:counterfactual|cf)\s*\d*\s*[:.)-]\s*(?P<text>.+)$", re.IGNORECASE)
_AXIS_HEADING = re.compile(r"^axis\s*\d*\s*[:.)-]\s*(?P<name>.+)$", re.IGNORECASE)
_BOLD = re.compile(r"^(\*\*|__)(?P<label>[^*_]+?)\1\s*(?P<rest>.*)$")
_LABEL = re.compile(r"^(?P<label>[^:\"'\u201c]{1,40}):\s+(?P<rest>\S.*)$")
_RULE = re.compile(r"^[-*_=\u2013\u2014\s]{3,}$")
_NUMBERING = re.compile(r"^\d+[.)]\s*")
_NAME_PREFIX = re.compile(r"^counterfactual(?:\s+prompt)?s?\s+(?:for|on|along)\s+(?:the\s+)?", re.IGNORECASE)
_BARD_REWRITE = re.compile(r"generate an? (?:image|picture|photo) of (?P<text>.+)$", re.IGNORECASE)
_EXPLANATION = re.compile(r"\s+[-\u2013\u2014]\s+")
_MAX_HEADER = 61
_MAX_LABEL_WORDS = 4
_MAX_NAME_WORDS = 8
#: First words of introductions, closings and notes ("Here are ...", "To examine ...", "Note: ...").
_OPENERS = frozenset(
    "here below sure certainly okay ok great absolutely of these this those that let let's i i'll i've i'd we "
    "we'll you to for based now next finally in as by when if please hope remember note potential possible key "
    "important additional general overall final".split()
)
#: Words that make a line a clause rather than the name of an axis.
_CLAUSE_WORDS = frozenset(
    "am are is was were be been can could will would shall should may might must do does did have has had "
    "help helps here below following".split()
)
#: Words that name a part of the answer rather than an axis.
_META_WORDS = frozenset(
    "note notes consideration considerations explanation explanations rationale reasoning summary conclusion "
    "example examples tip tips caveat caveats disclaimer takeaway takeaways output json answer response "
    "counterfactual counterfactuals prompt prompts axes".split()
)


LineKind = Literal["header", "item", "labelled", "other"]
Marker = Literal["bullet", "number", "counterfactual"]


@dataclass
class _Line:
    """One non-blank line of a prose reply, classified.

    ``kind``: "header" (``name`` starts an axis), "item" (``text`` is a counterfactual),
    "labelled" (a list line that starts with a label, "1. **Gender**: why ..." or
    "- **Male:** a photo ...": a header when a deeper or different list follows it,
    else an item whose ``text`` is what follows the label) or "other".
    """

    indent: int
    kind: LineKind
    marker: Marker | None = None
    name: str = ""
    text: str = ""


def axes_from_prose(text: str) -> list[ProposedAxis]:
    """Axes from headed lists (TIBET Figures 13, 14 and 17, and the prose replies of open-weight models)."""
    lines = [line for line in (_classify(raw) for raw in text.splitlines()) if line is not None]
    axes: list[ProposedAxis] = []
    current: ProposedAxis | None = None
    level: int | None = None  # indent of the current axis's items; deeper ones are notes
    for line, following in zip(lines, lines[1:] + [None]):
        kind = line.kind
        if kind == "labelled":
            kind = "header" if _opens_list(line, following) else "item"
        if kind == "header":
            current = ProposedAxis(line.name) if _is_axis_name(line.name) else None
            axes += [current] if current else []
            level = None
            continue
        if kind != "item" or current is None or (level is not None and line.indent > level):
            continue
        level = line.indent
        counterfactual = _item_text(line.text)
        if counterfactual:
            current.counterfactuals.append(counterfactual)
    return [axis for axis in axes if axis.counterfactuals]


def _classify(raw: str) -> _Line | None:
    """``raw`` as a :class:`_Line`; None for blank lines and horizontal rules."""
    expanded = raw.expandtabs(4)
    line = expanded.strip()
    if not line or _RULE.match(line):
        return None
    indent = len(expanded) - len(expanded.lstrip())
    found = _MARKER.match(line)
    rest = line[found.end() :] if found else line
    marker: Marker | None = None if found is None else "bullet" if found.group("bullet") else "number"
    counterfactual = _COUNTERFACTUAL.match(rest.replace("**", "").replace("__", "").strip())
    if counterfactual:
        return _Line(indent, "item", "counterfactual", text=counterfactual.group("text"))
    if marker is None and line.startswith("#"):
        return _Line(indent, "header", name=_clean_name(line.lstrip("#")))
    axis = _AXIS_HEADING.match(rest.replace("**", ""))
    if axis:
        return _Line(indent, "header", name=_clean_name(axis.group("name")))
    bold = _BOLD.match(rest)
    if bold:
        after = bold.group("rest").lstrip(":").strip()
        name = _clean_name(bold.group("label"))
        if marker is None:  # "**Gender Bias**", "**Gender:** why ...", "**1. Gender:**"
            return _Line(indent, "header", name=name)
        return _Line(indent, "labelled", marker, name=name, text=after or bold.group("label"))
    if rest.endswith(":") and ":" not in rest[:-1] and len(rest) <= _MAX_HEADER:  # "Gender bias:", "1. Nationality:"
        return _Line(indent, "header", name=_clean_name(rest))
    if marker is None:
        return _Line(indent, "other")
    label = _LABEL.match(rest)
    if label and len(label.group("label").split()) <= _MAX_LABEL_WORDS:  # "1. Gender: why ...", "- Male: a photo ..."
        return _Line(indent, "labelled", marker, name=_clean_name(label.group("label")), text=label.group("rest"))
    return _Line(indent, "item", marker, text=rest)


def _opens_list(line: _Line, following: _Line | None) -> bool:
    """Whether a labelled list line heads the list after it: that list is deeper or of another kind."""
    if following is None or following.kind not in ("item", "labelled"):
        return False
    return following.indent > line.indent or following.marker != line.marker


def _clean_name(text: str) -> str:
    """A header's axis name: no markup, numbering, "Counterfactuals for" prefix, trailing colon or quotes."""
    name = text.replace("**", "").replace("__", "").strip()
    name = _NUMBERING.sub("", name)
    name = _NAME_PREFIX.sub("", name)
    return name.strip().rstrip(":").strip().strip("\"'`").strip()


def _is_axis_name(name: str) -> bool:
    """Whether a header names an axis: a short noun phrase, not a sentence ("Here are ...") or a note."""
    words = re.findall(r"[a-z']+", name.lower().replace("\u2019", "'"))
    if not words or len(words) > _MAX_NAME_WORDS or len(name) > _MAX_HEADER or re.search(r"[.!?]\s", name):
        return False
    return words[0] not in _OPENERS and not (_CLAUSE_WORDS | _META_WORDS).intersection(words)


def _item_text(text: str) -> str:
    """An item's counterfactual: Bard's "Instead of X, generate an image of Y" read as Y, no explanation, no quotes."""
    rewrite = _BARD_REWRITE.search(text)
    if rewrite:
        text = rewrite.group("text")
    text = _EXPLANATION.split(text, maxsplit=1)[0]
    return text.strip().strip("\"'`\u201c\u201d").strip()
