"""Turn an LLM's reply into proposed axes, however the JSON is wrapped, shaped or bent.

Real replies (TIBET Appendix 12.4, Figures 12-17) put the JSON in prose or code fences,
nest it under keys such as "axes", "Counterfactual Prompts", "biases" or
"prompt_biases", group it by "societal"/"incidental", give lists of objects instead of
strings, or break JSON (trailing commas, single quotes, Python literals, a cut-off end).
Models that ignore "Only return json" (or run without JSON mode) answer in prose with
headed lists; those are read too: a section header (markdown bold line, "###" heading,
"Gender bias:" line) starts an axis, and introductions, closings and notes are skipped.
What cannot be read raises :class:`PlanProblem`, whose message is written to be sent
back to the LLM in a repair turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["societal", "incidental"]


class PlanProblem(ValueError):
    """Why a reply gives no valid plan; the message is sent back to the LLM, so it says what to fix."""


@dataclass
class ProposedAxis:
    """An axis as the reply gave it, before names are normalised and the plan is validated."""

    name: str
    counterfactuals: list[str] = field(default_factory=list)
    kind: Kind | None = None


def snake_case(text: str) -> str:
    """``'Socioeconomic Status'`` -> ``'socioeconomic_status'``; ``'Race/Ethnicity'`` -> ``'race_ethnicity'``."""
    return re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_")


# Field and key names are compared after snake_case.
_WRAPPER_KEYS = frozenset(
    "axes bias_axes axes_of_bias biases bias prompt_biases potential_biases counterfactuals counterfactual_prompts "
    "plan result results output data response answer json".split()
)
_WRAPPER_SUFFIXES = ("_axes", "_biases", "_counterfactuals", "_prompts")
_NAME_FIELDS = ("axis", "name", "axis_name", "bias_axis", "bias", "bias_name", "dimension", "category", "title")
_KIND_FIELDS = ("kind", "type", "bias_type", "axis_type", "category")
_LIST_FIELDS = (
    "counterfactuals counterfactual_prompts prompts examples alternatives variations values options items".split()
)
_TEXT_FIELDS = ("prompt", "counterfactual", "counterfactual_prompt", "text", "value", "content")


def extract_axes(reply: str) -> list[ProposedAxis]:
    """The axes in ``reply``: the first JSON value that reads as axes, else headed bullet lists."""
    problems: list[tuple[int, str]] = []
    for source, value, error in _json_candidates(reply):
        if error is not None:
            problems.append((len(source), error))
            continue
        try:
            axes = _interpret(value, None)
        except PlanProblem as problem:
            problems.append((len(source), str(problem)))
            continue
        if axes:
            return axes
    prose = _axes_from_prose(reply)
    if prose:
        return prose
    if problems:  # the largest JSON-looking part is the one the LLM meant
        raise PlanProblem(max(problems, key=lambda item: item[0])[1])
    raise PlanProblem("no JSON object was found in the reply")


# --------------------------------------------------------------------------- finding JSON


def _json_candidates(text: str) -> Iterator[tuple[str, Any, str | None]]:
    """``(source, value, error)`` for fenced blocks, then every outermost bracketed span, in order."""
    seen: set[str] = set()
    sources = [m.group(1) for m in re.finditer(r"```[^\n`]*\n(.*?)(?:```|\Z)", text, re.DOTALL)]
    sources += list(_bracketed_spans(text))
    for source in sources:
        source = source.strip()
        if not source or source in seen or source[0] not in "{[":
            continue
        seen.add(source)
        try:
            yield source, json.loads(source, strict=False), None
            continue
        except json.JSONDecodeError as exc:
            first_error = f"the JSON is malformed ({exc.msg} at line {exc.lineno} column {exc.colno})"
        try:
            yield source, json.loads(loosen_json(source), strict=False), None
        except json.JSONDecodeError:
            yield source, None, first_error


def _bracketed_spans(text: str) -> Iterator[str]:
    """Outermost ``{...}``/``[...]`` spans, matched outside strings; an unclosed one runs to the end."""
    i = 0
    while i < len(text):
        if text[i] not in "{[":
            i += 1
            continue
        end = _matching_close(text, i)
        yield text[i : end + 1]
        i = end + 1


def _matching_close(text: str, start: int) -> int:
    depth, quote, i = 0, None, start
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = None
        elif char == '"':
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text) - 1


_SMART_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2018": "'", "\u2019": "'"})
_LITERALS = {"true": "true", "false": "false", "null": "null", "True": "true", "False": "false", "None": "null"}


def loosen_json(text: str) -> str:
    """Rewrite almost-JSON into JSON: single/smart quotes, trailing or missing commas, Python
    literals, unquoted keys, ``//`` comments, and brackets or strings left open at a cut-off end."""
    text = text.translate(_SMART_QUOTES)
    out: list[str] = []
    stack: list[str] = []
    after_value = False  # the last token ended a value, so a new value needs a comma first
    i, n = 0, len(text)

    def begin_value() -> None:
        if after_value:
            out.append(",")

    while i < n:
        char = text[i]
        if char in "\"'":
            begin_value()
            content, i = _read_string(text, i)
            out.append(json.dumps(content))
            after_value = True
            continue
        if char in "{[":
            begin_value()
            stack.append("}" if char == "{" else "]")
            out.append(char)
            after_value = False
        elif char in "}]":
            while out and out[-1] == ",":
                out.pop()
            if stack:
                stack.pop()
            out.append(char)
            after_value = True
        elif char in ",:":
            out.append(char)
            after_value = False
        elif text.startswith("//", i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline
            continue
        elif char.isalpha() or char == "_":
            match = re.match(r"[A-Za-z_][A-Za-z0-9_-]*", text[i:])
            word = match.group(0)
            begin_value()
            rest = text[i + len(word) :].lstrip()
            out.append(_LITERALS.get(word) or (json.dumps(word) if rest.startswith(":") else word))
            after_value = True
            i += len(word)
            continue
        elif char in "-+0123456789":
            match = re.match(r"[-+]?[0-9][0-9.eE+-]*", text[i:])
            if match:
                begin_value()
                out.append(match.group(0))
                after_value = True
                i += len(match.group(0))
                continue
            out.append(char)
        else:
            out.append(char)
        i += 1
    while out and out[-1].strip() in (",", ""):
        out.pop()
    return "".join(out) + "".join(reversed(stack))


def _read_string(text: str, start: int) -> tuple[str, int]:
    """Read a quoted string at ``start``; returns its content and the index after it.

    A quote of the opening kind ends the string only when what follows it can follow a
    string (``, : } ]``, a line end, the next string or the text's end), so apostrophes
    ("doctor's") and unescaped inner quotes survive.
    """
    quote = text[start]
    chars: list[str] = []
    i = start + 1
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            following = text[i + 1]
            chars.append({"n": "\n", "t": "\t", '"': '"', "'": "'", "\\": "\\"}.get(following, "\\" + following))
            i += 2
            continue
        if char == quote:
            rest = text[i + 1 :]
            stripped = rest.lstrip(" \t\r")
            if not stripped or stripped[0] in ",:}]\n" + quote:
                return "".join(chars), i + 1
        chars.append(char)
        i += 1
    return "".join(chars), i


# --------------------------------------------------------------------------- reading shapes


def _kind_word(text: Any) -> Kind | None:
    """'societal'/'incidental' when a label says so ("Societal biases", "incidental_correlation")."""
    if not isinstance(text, str):
        return None
    name = snake_case(text)
    if "incidental" in name:
        return "incidental"
    if "societal" in name or name in ("social", "social_bias", "social_biases"):
        return "societal"
    return None


def _is_wrapper(key: str) -> bool:
    name = snake_case(key)
    return name in _WRAPPER_KEYS or name.endswith(_WRAPPER_SUFFIXES)


def _is_axis_object(value: Any) -> bool:
    """An object describing one axis: it has a list of counterfactuals (or one counterfactual) under a known field."""
    if not isinstance(value, dict):
        return False
    fields = {snake_case(k): v for k, v in value.items()}
    has_list = any(isinstance(fields.get(f), list) for f in _LIST_FIELDS)
    has_text = any(isinstance(fields.get(f), str) for f in _TEXT_FIELDS) and any(
        isinstance(fields.get(f), str) for f in _NAME_FIELDS
    )
    return has_list or has_text


def _is_axis_collection(value: Any) -> bool:
    """Several axes: an object whose values are lists/objects (not itself one axis), or a list of objects."""
    if isinstance(value, dict):
        return not _is_axis_object(value) and any(isinstance(v, (dict, list)) for v in value.values())
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def _interpret(value: Any, kind: Kind | None) -> list[ProposedAxis]:
    if isinstance(value, dict):
        return _from_mapping(value, kind)
    if isinstance(value, list):
        return _from_list(value, kind)
    raise PlanProblem(f"expected a JSON object with the axes as keys, got {type(value).__name__}")


def _from_mapping(mapping: dict, kind: Kind | None) -> list[ProposedAxis]:
    if _is_axis_object(mapping):
        return [_axis_from_object(mapping, kind, None)]
    entries = [(str(key), value) for key, value in mapping.items() if isinstance(value, (dict, list))]
    if not entries:
        raise PlanProblem("the JSON object has no axis with a list of counterfactuals")
    if len(entries) == 1 and isinstance(entries[0][1], dict) and _is_axis_collection(entries[0][1]):
        return _interpret(entries[0][1], kind)  # an unknown wrapper, e.g. the prompt itself as the key
    axes: list[ProposedAxis] = []
    for key, value in entries:
        group_kind = _kind_word(key)
        if group_kind and _is_axis_collection(value):
            axes += _interpret(value, group_kind)
        elif _is_wrapper(key) and _is_axis_collection(value):
            axes += _interpret(value, kind)
        else:
            axes.append(_axis_from_value(key, value, kind))
    return axes


def _from_list(items: list, kind: Kind | None) -> list[ProposedAxis]:
    if items and all(not isinstance(item, (dict, list)) for item in items):
        raise PlanProblem("the JSON is a list of prompts without axis names; use the axes as keys")
    axes: list[ProposedAxis] = []
    for item in items:
        if _is_axis_object(item):
            axes.append(_axis_from_object(item, kind, None))
        elif isinstance(item, dict):
            axes += _from_mapping(item, kind)
        elif isinstance(item, list):
            axes += _from_list(item, kind)
    return axes


def _axis_from_value(name: str, value: Any, kind: Kind | None) -> ProposedAxis:
    if isinstance(value, list):
        return ProposedAxis(name, _texts(value), kind)
    if _is_axis_object(value):
        return _axis_from_object(value, kind, name)
    # {"male": "a photo of a male ...", "female": [...]}: the values are the counterfactuals
    return ProposedAxis(name, _texts(list(value.values())), kind)


def _axis_from_object(obj: dict, kind: Kind | None, key_name: str | None) -> ProposedAxis:
    fields = {snake_case(k): v for k, v in obj.items()}
    for name in _KIND_FIELDS:
        kind = _kind_word(fields.get(name)) or kind
    name = key_name or next(
        (fields[f] for f in _NAME_FIELDS if isinstance(fields.get(f), str) and not _kind_word(fields[f])), None
    )
    if not name:
        raise PlanProblem("an axis object has no name; give every axis a name")
    listed = next((fields[f] for f in _LIST_FIELDS if isinstance(fields.get(f), list)), None)
    if listed is not None:
        return ProposedAxis(name, _texts(listed), kind)
    return ProposedAxis(name, [next(fields[f] for f in _TEXT_FIELDS if isinstance(fields.get(f), str))], kind)


def _texts(items: list) -> list[str]:
    """Counterfactual strings from a list of strings, objects with a prompt field, or nested lists."""
    texts: list[str] = []
    for item in items:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, list):
            texts += _texts(item)
        elif isinstance(item, dict):
            fields = {snake_case(k): v for k, v in item.items()}
            named = [fields[f] for f in _TEXT_FIELDS if isinstance(fields.get(f), str)]
            strings = [v for v in item.values() if isinstance(v, str)]
            if named or len(strings) == 1:
                texts.append((named or strings)[0])
    return texts


# --------------------------------------------------------------------------- prose lists
#
# Without JSON mode, open-weight chat models answer in prose: an introductory sentence,
# section headers (a markdown bold line, a "###" heading, "Gender bias:" on its own line,
# "1. **Gender**: why ..."), labelled lines under each ("Counterfactual 1: ...", "- ...",
# "1. ..."), explanations after a dash or in deeper bullets, a closing sentence. A header
# starts an axis and its first list sets the item level; deeper bullets are notes. A
# header that reads as a sentence ("Here are the counterfactuals:") or a note ("**Note:**",
# "Important considerations:") is no axis, and the lines under it are dropped; lines that
# are neither header nor item (introductions, closings, explanations) are never read.

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


def _axes_from_prose(text: str) -> list[ProposedAxis]:
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
