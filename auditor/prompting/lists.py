"""Prompt lists for ``auditor batch``: text, CSV, TSV or JSONL files, and templates filled from a values file.

* ``.txt`` (or any other suffix but the values' ``.json`` and ``.yaml``, refused as a slip): one
  prompt per line; blank lines and lines starting with ``#`` are skipped.
* ``.csv`` (or ``.tsv``, tab-separated): a header row with one ``prompt`` column (any case); other
  columns are ignored.
* ``.jsonl`` / ``.ndjson``: one JSON object per line with a ``prompt`` string.

A prompt with ``{name}`` placeholders is a template, filled from ``--values``: a ``.txt``
file (one value per line, for a template with one placeholder), a ``.csv``/``.tsv`` file (a header
naming the placeholders, one combination per row), or a ``.json``/``.yaml`` mapping of each
placeholder to its values (every combination, in order); a name no template uses is an
error. "a"/"an" before a filled placeholder is made to fit the value ("an engineer"). The
list is small, so the standard library reads it; a bad file is one error line naming the place.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from auditor.core.errors import AuditorError
from auditor.core.store import read_text_file
from auditor.core.text import control_character, has_visible_text, single_spaced
from auditor.prompting.articles import filled_template


def read_prompt_list(path: Path, values: Path | None = None) -> list[str]:
    """The prompts of ``path`` in order, templates filled from ``values``; duplicates and empties are errors."""
    raw = _read_lines(path)
    placeholders = {i: _placeholders(prompt, f"{path}: prompt {i + 1}") for i, prompt in enumerate(raw)}
    templated = [i for i, names in placeholders.items() if names]
    if templated and values is None:
        first = raw[templated[0]]
        raise AuditorError(f"{path}: {first!r} is a template; give its values with --values FILE")
    if values is not None and not templated:
        raise AuditorError(f"--values {values} was given but no prompt of {path} has a {{placeholder}}")
    table = _read_values(values) if values is not None else None
    _check_all_used(table, {name for names in placeholders.values() for name in names}, values, path)
    prompts: list[tuple[str, bool]] = []  # each with whether a template filled from the values made it
    for i, prompt in enumerate(raw):
        # every line reads as a template: {{ and }} are literal braces on a line without placeholders too
        if placeholders[i]:
            prompts += [(filled, True) for filled in _fill(prompt, placeholders[i], table, values)]
        else:
            prompts.append((filled_template(prompt, {}), False))
    if not prompts:
        raise AuditorError(f"{path} lists no prompts")
    seen: dict[str, tuple[int, bool]] = {}
    for number, (prompt, filled) in enumerate(prompts, 1):
        if control := control_character(prompt):
            raise AuditorError(
                f"{_source(path, values, filled)}: prompt {number} holds the control character {control} (a UTF-16 "
                "or damaged file? save it as UTF-8 text)"
            )
        if prompt.casefold() in seen:
            first, first_filled = seen[prompt.casefold()]
            source = _source(path, values, filled or first_filled)
            raise AuditorError(f"{source}: the prompt {prompt!r} appears twice (prompts {first} and {number})")
        seen[prompt.casefold()] = number, filled
    return [prompt for prompt, _ in prompts]


def _source(path: Path, values: Path | None, filled: bool) -> str:
    """Where a prompt of the list came from, for an error about it: the file, or the file filled from the values."""
    return f"{path} filled from --values {values}" if filled else str(path)


#: Suffixes of a ``--values`` mapping: given as the prompts file, each of its lines would become a prompt.
VALUES_ONLY = (".json", ".yaml", ".yml")


def _read_lines(path: Path) -> list[str]:
    suffix = Path(path).suffix.lower()
    if suffix in VALUES_ONLY:
        raise AuditorError(
            f"{path}: a {suffix} file is not a prompts list; give .txt (one prompt per line), .csv, .tsv or .jsonl "
            f"with a 'prompt' column ({suffix} files give a template's --values)"
        )
    text = read_text_file(path)
    if suffix in DIALECTS:
        return [_column(row, "prompt", path, number) for number, row in _csv_rows(text, path, read="prompt")]
    if suffix in (".jsonl", ".ndjson"):
        prompts = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise AuditorError(f"{path}:{number}: not JSON ({exc.msg})") from None
            prompt = item.get("prompt") if isinstance(item, dict) else None
            if not isinstance(prompt, str) or not has_visible_text(prompt):
                raise AuditorError(f'{path}:{number}: expected an object with a non-empty "prompt" string')
            prompts.append(single_spaced(prompt))
        return prompts
    return _text_lines(text)


def _text_lines(text: str) -> list[str]:
    """A text file's lines, single-spaced; blank lines (invisible characters alone, a zero-width space, read as
    blank) and ``#`` comment lines skipped."""
    return [
        single_spaced(line)
        for line in text.splitlines()
        if has_visible_text(line) and not line.lstrip().startswith("#")
    ]


#: How each table suffix is read: a CSV file quotes cells with ``"``, a TSV file (tab-separated) takes them as
#: written, quotes included (a cell there cannot hold a tab or a line break).
#: CSV is read strictly: a quote never closed, or text after a closing quote, is an error, not a cell that runs on
#: to the end of the file.
DIALECTS = {".csv": {"delimiter": ",", "strict": True}, ".tsv": {"delimiter": "\t", "quoting": csv.QUOTE_NONE}}


def _csv_rows(text: str, path: Path, read: str | None = None) -> list[tuple[int, dict[str, str]]]:
    """The rows with a value, each with the file line it starts on (a quoted cell may span lines). A row with more
    cells than the header has columns is refused (an unquoted comma in a prompt would cut it short without a word),
    and so is a column read (``read``, or every one) that the header names twice: the reader would keep one of them
    unsaid."""
    kind = Path(path).suffix[1:].upper()
    taken: list[tuple[int, str]] = []  # every line the reader has read, numbered

    def numbered_lines() -> Iterator[str]:
        for number, line in enumerate(io.StringIO(text), 1):
            taken.append((number, line))
            yield line

    reader = csv.DictReader(numbered_lines(), **DIALECTS[Path(path).suffix.lower()])
    read_so_far = 0
    try:
        if not reader.fieldnames:
            raise AuditorError(f"{path}: the {kind} file has no header row")
        names = [name.strip().lower() for name in reader.fieldnames if name]
        if twice := sorted({name for name in names if names.count(name) > 1 and read in (None, name)}):
            raise AuditorError(f"{path}: the header names the column {twice[0]!r} twice; which one is meant?")
        rows, read_so_far = [], len(taken)
        for row in reader:
            lines, read_so_far = taken[read_so_far:], len(taken)  # the row's, after any blank lines the reader skipped
            start = next((number for number, line in lines if line.strip()), lines[0][0])
            extra = row.get(None) or []
            if any(cell.strip() for cell in extra):  # empty cells past the header (a trailing comma) cut nothing
                cells, columns = len(reader.fieldnames) + len(extra), len(reader.fieldnames)
                raise AuditorError(
                    f"{path}:{start}: {cells} cells, but the header has {columns} column{'s' * (columns != 1)} "
                    + ("(a cell cannot hold a tab)" if kind == "TSV" else '(quote a cell that holds a comma: "a, b")')
                )
            if any(isinstance(value, str) and value.strip() for key, value in row.items() if key is not None):
                rows.append((start, row))
        return rows
    except csv.Error as exc:  # a quote never closed, or a cell over the csv module's field size limit
        start = next((number for number, line in taken[read_so_far:] if line.strip()), len(taken))
        why = 'a quote (") opened here is never closed' if str(exc) == "unexpected end of data" else str(exc)
        raise AuditorError(f"{path}:{start}: not a {kind} file auditor can read ({why})") from None


def _column(row: dict[str, str], name: str, path: Path, number: int) -> str:
    key = next((k for k in row if k is not None and k.strip().lower() == name), None)
    if key is None:
        kind, columns = Path(path).suffix[1:].upper(), ", ".join(k for k in row if k)
        raise AuditorError(f"{path}: the {kind} file has no {name!r} column (columns: {columns})")
    value = single_spaced(row[key] or "")
    if not has_visible_text(value):
        raise AuditorError(f"{path}:{number}: the {name!r} cell is empty")
    return value


def _placeholders(prompt: str, where: str) -> list[str]:
    """Placeholder names of a template, in order; conversions, format specs and positional fields are refused."""
    names: list[str] = []
    try:
        for _, field, spec, conversion in string.Formatter().parse(prompt):
            if field is None:
                continue
            if not field.isidentifier() or spec or conversion:
                written = field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
                raise AuditorError(f"{where}: use plain {{name}} placeholders, not {{{written}}}")
            if field not in names:
                names.append(field)
    except ValueError as exc:
        raise AuditorError(f"{where}: {exc} (write a literal brace as {{{{ or }}}})") from None
    return names


def _read_values(path: Path) -> dict[str, list[str]] | list[dict[str, str]] | list[str]:
    """A mapping name -> values (json/yaml), rows of combinations (csv), or values for one placeholder (txt)."""
    text, suffix = read_text_file(path), Path(path).suffix.lower()
    if suffix in DIALECTS:
        return [
            {k.strip(): single_spaced(v or "") for k, v in row.items() if k} for _, row in _csv_rows(text, path)
        ]
    if suffix in (".json", ".yaml", ".yml"):
        data = _values_mapping(text, path, suffix)
        if not isinstance(data, dict) or not all(isinstance(v, list) and v for v in data.values()):
            raise AuditorError(f"{path} must map each placeholder to a non-empty list of values")
        for name, values in data.items():
            for value in values:  # a null or a nested mapping would read "a photo of a None"
                if not isinstance(value, str) or value.strip() in YAML_NULLS:
                    raise AuditorError(f"{path}: {name!r} has the value {value!r}; values are words or numbers")
        return {str(k): [single_spaced(str(v)) for v in values] for k, values in data.items()}
    return _text_lines(text)


#: How YAML writes "no value" (its core schema), which a values file's scalars, read as strings, may hold.
YAML_NULLS = frozenset({"~", "null", "Null", "NULL"})


def _values_mapping(text: str, path: Path, suffix: str) -> Any:
    """A values file's mapping with every value as written: YAML's own typing would turn ``1.10`` into 1.1 and
    ``NO`` (Norway) into False, so YAML scalars stay strings, and JSON numbers keep their text."""
    try:
        if suffix == ".json":
            return json.loads(text, parse_float=str, parse_int=str)
        return yaml.load(text, Loader=yaml.BaseLoader)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise AuditorError(f"{path} is not valid {suffix[1:].upper()}: {exc}") from None


def _check_all_used(table: Any, used: set[str], values: Path | None, path: Path) -> None:
    """Every placeholder a values file names must be one a template uses: a name no template has (a typo, or a
    column meant to vary the prompts) would otherwise be dropped without a word, and the batch audit other
    prompts than the person listed."""
    named = table if isinstance(table, dict) else table[0] if table and isinstance(table[0], dict) else {}
    unused = [name for name in named if name not in used]
    if unused:
        raise AuditorError(
            f"{values} names {', '.join(unused)}, which no template of {path} uses (they use {', '.join(sorted(used))})"
        )


def _fill(template: str, names: list[str], table, values: Path | None) -> list[str]:
    if isinstance(table, dict):
        missing = [name for name in names if name not in table]
        if missing:
            raise AuditorError(f"{values} has no values for {', '.join(missing)} (template {template!r})")
        combinations = [
            dict(zip(names, combo, strict=True)) for combo in itertools.product(*(table[name] for name in names))
        ]
    elif table and isinstance(table[0], dict):
        missing = [name for name in names if name not in table[0]]
        if missing:
            raise AuditorError(f"{values} has no column for {', '.join(missing)} (template {template!r})")
        combinations = [{name: row[name] for name in names} for row in table]
    else:
        if len(names) != 1:
            raise AuditorError(
                f"{values} is one value per line, but {template!r} has {len(names)} placeholders: "
                "use a CSV, JSON or YAML values file"
            )
        combinations = [{names[0]: value} for value in table or []]
    if not combinations:
        raise AuditorError(f"{values} gives no values for {template!r}")
    empty = next((name for combination in combinations for name, value in combination.items() if not value), None)
    if empty is not None:
        raise AuditorError(f"{values} has an empty value for {empty} (template {template!r})")
    return [filled_template(template, combination) for combination in combinations]
