"""The TIBET authors' result-file format, so runs of their code can be rescored here.

A result file is one JSON object::

    {"prompt": "...", "id": ...,                       # optional
     "result": {axis: [counterfactual prompt, ...]},
     "questions": [one VQA question per axis, in the order of "result"],
     "concepts_initial": [per image: [answer per question]],
     "concepts_cf": {axis: [per counterfactual: [per image: [answer per question]]]}}

Answer j of an image answers question j, i.e. belongs to the j-th axis of ``result``.
Validation stops at the first problem and names where it is inside the file, e.g.
``concepts_cf.gender[1][3]: expected 2 answers (one per question), got 3``.
Unknown extra keys are ignored: the authors' files may carry more than we read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.errors import AuditorError
from auditor.records import INITIAL_PROMPT_ID, ImageAnswers, counterfactual_id
from auditor.store import load_json

#: Keys whose presence marks a JSON object as a TIBET result file.
TIBET_KEYS = ("result", "questions", "concepts_initial", "concepts_cf")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: Answers of one image set: per image, one answer per question.
ImageSetAnswers = list[list[str]]


class TibetFormatError(AuditorError):
    """A TIBET result file that does not have the expected shape; the message starts with the JSON path."""


@dataclass(frozen=True)
class TibetAxis:
    """One axis of a TIBET result: its question, counterfactual prompts and their answers."""

    name: str
    question: str
    counterfactuals: list[str]
    answers: list[ImageSetAnswers]


@dataclass(frozen=True)
class TibetResult:
    """A validated TIBET result file."""

    prompt: str | None
    id: str | None
    axes: list[TibetAxis]
    initial: ImageSetAnswers

    def image_answers(self) -> dict[str, list[ImageAnswers]]:
        """Prompt id (``'initial'``, ``'<axis>/<k>'``) -> our per-image answer records (no captions)."""
        names = [axis.name for axis in self.axes]

        def convert(images: ImageSetAnswers) -> list[ImageAnswers]:
            return [ImageAnswers(image_index=i, answers=dict(zip(names, row))) for i, row in enumerate(images)]

        found = {INITIAL_PROMPT_ID: convert(self.initial)}
        for axis in self.axes:
            for k, images in enumerate(axis.answers):
                found[counterfactual_id(axis.name, k)] = convert(images)
        return found


def is_tibet_result(data: Any) -> bool:
    """Whether ``data`` looks like a TIBET result file (any of its four keys present)."""
    return isinstance(data, dict) and any(key in data for key in TIBET_KEYS)


def load_tibet_file(path: Path) -> TibetResult:
    """Read and validate a TIBET result file; problems are one line naming the place in the file."""
    data = load_json(path)
    try:
        return parse_tibet_result(data)
    except TibetFormatError as exc:
        raise TibetFormatError(f"{path}: {exc}") from None


def parse_tibet_result(data: Any) -> TibetResult:
    """Validate the decoded JSON of a TIBET result file."""
    _expect(data, dict, "<root>", "an object")
    for key in TIBET_KEYS:
        if key not in data:
            raise TibetFormatError(f"{key}: missing (a TIBET result file has {', '.join(TIBET_KEYS)})")
    prompt = data.get("prompt")
    if prompt is not None:
        _expect(prompt, str, "prompt", "a string")
    run_id = data.get("id")
    if run_id is not None and (isinstance(run_id, bool) or not isinstance(run_id, (str, int))):
        raise TibetFormatError(f"id: expected a string or an integer, got {_kind(run_id)}")

    result = _expect(data["result"], dict, "result", "an object mapping each axis to its counterfactual prompts")
    if not result:
        raise TibetFormatError("result: no axes")
    counterfactuals = {name: _strings(prompts, _at("result", name), "counterfactual prompt") for name, prompts in result.items()}
    for name, prompts in counterfactuals.items():
        if not prompts:
            raise TibetFormatError(f"{_at('result', name)}: no counterfactual prompts")

    questions = _strings(data["questions"], "questions", "question")
    if len(questions) != len(result):
        raise TibetFormatError(
            f"questions: expected {len(result)} questions (one per axis in result), got {len(questions)}"
        )
    n_questions = len(questions)
    initial = _image_set(data["concepts_initial"], "concepts_initial", n_questions)

    concepts_cf = _expect(data["concepts_cf"], dict, "concepts_cf", "an object mapping each axis to its image sets")
    for name in concepts_cf:
        if name not in result:
            raise TibetFormatError(f"{_at('concepts_cf', name)}: axis not in result")
    axes = []
    for (name, prompts), question in zip(counterfactuals.items(), questions):
        where = _at("concepts_cf", name)
        if name not in concepts_cf:
            raise TibetFormatError(f"{where}: missing (result has this axis)")
        sets = _expect(concepts_cf[name], list, where, "a list of image sets, one per counterfactual")
        if len(sets) != len(prompts):
            raise TibetFormatError(
                f"{where}: expected {len(prompts)} image sets (one per counterfactual in result), got {len(sets)}"
            )
        answers = [_image_set(images, f"{where}[{k}]", n_questions) for k, images in enumerate(sets)]
        axes.append(TibetAxis(name=name, question=question, counterfactuals=prompts, answers=answers))
    return TibetResult(prompt=prompt, id=None if run_id is None else str(run_id), axes=axes, initial=initial)


def _image_set(value: Any, where: str, n_questions: int) -> ImageSetAnswers:
    images = _expect(value, list, where, "a list of images, each a list of answers")
    rows = []
    for i, row in enumerate(images):
        answers = _strings(row, f"{where}[{i}]", "answer")
        if len(answers) != n_questions:
            raise TibetFormatError(
                f"{where}[{i}]: expected {n_questions} answers (one per question), got {len(answers)}"
            )
        rows.append(answers)
    return rows


def _strings(value: Any, where: str, what: str) -> list[str]:
    items = _expect(value, list, where, f"a list of {what}s")
    for i, item in enumerate(items):
        _expect(item, str, f"{where}[{i}]", f"a string {what}")
    return items


def _expect(value: Any, kind: type, where: str, description: str) -> Any:
    if not isinstance(value, kind):
        raise TibetFormatError(f"{where}: expected {description}, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    """JSON's name for the type of a decoded value."""
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def _at(parent: str, key: str) -> str:
    """Path of ``parent[key]`` written as ``parent.key`` when the key is a plain identifier."""
    return f"{parent}.{key}" if _IDENTIFIER.match(key) else f"{parent}[{json.dumps(key)}]"
