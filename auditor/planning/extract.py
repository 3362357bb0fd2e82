"""Turn an LLM's reply into proposed axes, however the JSON is wrapped, shaped or bent.

Real replies (TIBET Appendix 12.4, Figures 12-17) put the JSON in prose or code fences,
nest it under keys such as "axes", "Counterfactual Prompts", "biases" or
"prompt_biases", group it by "societal"/"incidental", give lists of objects instead of
strings, or break JSON (trailing commas, single quotes, Python literals, a cut-off end).
Models that ignore "Only return json" (or run without JSON mode) answer in prose with
headed lists; :mod:`auditor.planning.prose` reads those: a section header (markdown bold line, "###" heading,
"Gender bias:" line) starts an axis, and introductions, closings and notes are skipped.
What cannot be read raises :class:`PlanProblem`, whose message is written to be sent
back to the LLM in a repair turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from auditor.planning.proposals import Kind, PlanProblem, ProposedAxis, snake_case
from auditor.planning.prose import axes_from_prose

__all__ = ["PlanProblem", "ProposedAxis", "extract_axes", "json_values", "loosen_json", "snake_case"]


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
    prose = axes_from_prose(reply)
    if prose:
        return prose
    if problems:  # the largest JSON-looking part is the one the LLM meant
        raise PlanProblem(max(problems, key=lambda item: item[0])[1])
    raise PlanProblem("no JSON object was found in the reply")


# --------------------------------------------------------------------------- finding JSON


def json_values(text: str) -> Iterator[Any]:
    """Every JSON value in ``text`` that parses (after loosening), fenced blocks first, then bracketed spans."""
    for _source, value, error in _json_candidates(text):
        if error is None:
            yield value


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
