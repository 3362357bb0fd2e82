"""The TIBET authors' result-file format, so runs of their code can be rescored here.

A result file is one JSON object::

    {"prompt": "...", "id": ...,                       # optional
     "result": {axis: [counterfactual prompt, ...]},    # distinct within an axis
     "questions": [VQA question, ...],                  # at least one
     "concepts_initial": [per image: [answer per question]],
     "concepts_cf": {axis: [per counterfactual: [per image: [answer per question]]]}}

Every image has exactly one answer per question, and every answer counts in its image
set's concepts, as in the authors' metric code. Questions need not be one per axis: the
authors' ``generate_questions`` writes, for each axis of ``result`` in order, one question
per word of its name (split at "_", "bias"/"biases" left out) that has a fixed question in
their table, or one generic question when none has, so ``gender_age_bias`` gets two; and
users append questions of their own. :func:`question_axes` ties questions to axes that
way, for the axis-aligned concepts; a question tied to no axis still counts overall.

Validation stops at the first problem and names where it is inside the file, e.g.
``concepts_cf.gender[1][3]: expected 2 answers (one per question), got 3``.
Unknown extra keys are ignored: the authors' files may carry more than we read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.core.errors import AuditorError
from auditor.core.store import load_json
from auditor.core.text import first_few, single_spaced
from auditor.records import INITIAL_PROMPT_ID, counterfactual_id

#: Keys whose presence marks a JSON object as a TIBET result file.
TIBET_KEYS = ("result", "questions", "concepts_initial", "concepts_cf")
#: Axis-name words with a fixed question in the authors' ``generate_questions`` (tibet/gen_questions.py
#: of TIBET-AI/TIBET). Kept apart from our own table (prompts/vqa_questions.yaml) on purpose: this
#: describes files their code wrote and must not move when our planner's questions do.
AUTHORS_QUESTION_WORDS = frozenset(
    {
        "age", "ethnicity", "socioeconomic", "gender", "race", "racial", "nationality", "style", "setting",
        "color", "emotion", "occupation", "culture", "fashion", "clothing", "appearance", "background",
    }
)  # fmt: skip
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: Answers of one image set: per image, one answer per question.
ImageSetAnswers = list[list[str]]


class TibetFormatError(AuditorError):
    """A TIBET result file that does not have the expected shape; the message starts with the JSON path."""


@dataclass(frozen=True)
class TibetAxis:
    """One axis of a TIBET result: the questions tied to it, counterfactual prompts and their answers."""

    name: str
    questions: list[str]
    counterfactuals: list[str]
    answers: list[ImageSetAnswers]


@dataclass(frozen=True)
class TibetResult:
    """A validated TIBET result file."""

    prompt: str | None
    id: str | None
    axes: list[TibetAxis]
    initial: ImageSetAnswers
    questions: list[str]
    #: Per question, the axis it is tied to (see :func:`question_axes`); None: no axis.
    question_axes: list[str | None]
    #: What the reader of the scores should know about the questions (untied ones).
    warnings: list[str]

    def image_sets(self) -> dict[str, ImageSetAnswers]:
        """Prompt id (``'initial'``, ``'<axis>/<k>'``) -> per image, its answer to every question."""
        found = {INITIAL_PROMPT_ID: self.initial}
        for axis in self.axes:
            for k, images in enumerate(axis.answers):
                found[counterfactual_id(axis.name, k)] = images
        return found


def authors_question_count(axis: str) -> int:
    """Questions the authors' ``generate_questions`` writes for ``axis``.

    One per word of the name (split at "_", case kept) in :data:`AUTHORS_QUESTION_WORDS`,
    repeats included, and one generic question when none is. (They drop "bias"/"biases"
    first, which changes no count: neither word has a question.)
    """
    return max(1, sum(word in AUTHORS_QUESTION_WORDS for word in axis.split("_")))


def question_axes(axes: Sequence[str], n_questions: int) -> list[str | None]:
    """The axis each of ``n_questions`` questions is tied to (None: no axis), in question order.

    1. When the file has at least as many questions as the authors' ``generate_questions``
       writes for these axes, the first ones are theirs, axis by axis in ``result`` order
       (:func:`authors_question_count` each); the rest were added by a user.
    2. Otherwise, with exactly one question per axis, question j is axis j's (the paper's
       format, written by other code).
    3. Otherwise nothing says which question probes which axis: none is tied.
    """
    counts = [authors_question_count(axis) for axis in axes]
    if sum(counts) <= n_questions:
        tied: list[str | None] = [axis for axis, count in zip(axes, counts) for _ in range(count)]
        return tied + [None] * (n_questions - len(tied))
    if n_questions == len(axes):
        return list(axes)
    return [None] * n_questions


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
        _check_distinct(prompts, _at("result", name))

    questions = _strings(data["questions"], "questions", "question")
    if not questions:
        raise TibetFormatError("questions: no questions (a TIBET result file asks at least one)")
    n_questions = len(questions)
    initial = _image_set(data["concepts_initial"], "concepts_initial", n_questions)

    concepts_cf = _expect(data["concepts_cf"], dict, "concepts_cf", "an object mapping each axis to its image sets")
    for name in concepts_cf:
        if name not in result:
            raise TibetFormatError(f"{_at('concepts_cf', name)}: axis not in result")
    tied = question_axes(list(counterfactuals), n_questions)
    axes = []
    for name, prompts in counterfactuals.items():
        where = _at("concepts_cf", name)
        if name not in concepts_cf:
            raise TibetFormatError(f"{where}: missing (result has this axis)")
        sets = _expect(concepts_cf[name], list, where, "a list of image sets, one per counterfactual")
        if len(sets) != len(prompts):
            raise TibetFormatError(
                f"{where}: expected {len(prompts)} image sets (one per counterfactual in result), got {len(sets)}"
            )
        answers = [_image_set(images, f"{where}[{k}]", n_questions) for k, images in enumerate(sets)]
        asked = [question for question, axis in zip(questions, tied) if axis == name]
        axes.append(TibetAxis(name=name, questions=asked, counterfactuals=prompts, answers=answers))
    parsed = TibetResult(
        prompt=prompt,
        id=None if run_id is None else str(run_id),
        axes=axes,
        initial=initial,
        questions=questions,
        question_axes=tied,
        warnings=_question_warnings(questions, tied, list(counterfactuals)),
    )
    parsed.warnings.extend(_size_warnings(parsed))
    return parsed


def _check_distinct(prompts: list[str], where: str) -> None:
    """An axis's counterfactuals must differ (case and spacing aside), as a plan's must: one listed twice would count
    twice in the axis's BAV, the variance over its counterfactuals, as if the axis had one more value."""
    first: dict[str, int] = {}
    for k, prompt in enumerate(prompts):
        j = first.setdefault(single_spaced(prompt).casefold(), k)
        if j != k:
            raise TibetFormatError(
                f"{where}[{k}]: the counterfactual prompt {prompt!r} repeats {prompts[j]!r} of {where}[{j}] (case and "
                "spacing are ignored when comparing)"
            )


def _size_warnings(result: TibetResult) -> list[str]:
    """A file whose image sets differ in size: image i of every set is taken as seed i, so a short set lacks the
    last seeds, and the bootstrap's numbers exist only in resamples that draw one of its images."""
    sizes = {prompt_id: len(images) for prompt_id, images in result.image_sets().items()}
    longest = max(sizes.values())
    short = [f"{prompt_id} has {size}" for prompt_id, size in sizes.items() if size < longest]
    if not short:
        return []
    listed = first_few(short, 4)
    return [
        f"the image sets differ in size ({longest} images at most; {listed}): image i of each set is taken as seed "
        "i, so a shorter set lacks the last seeds, and its intervals hold over the resamples that draw one of its images"
    ]


def _question_warnings(questions: list[str], tied: list[str | None], axes: list[str]) -> list[str]:
    if all(axis is None for axis in tied):
        expected = sum(authors_question_count(axis) for axis in axes)
        return [
            f"questions: {_count(len(questions), 'question')} for {_count(len(axes), 'axis', 'axes')}, neither "
            f"one per axis nor the TIBET authors' pairing ({_count(expected, 'question')}, one per axis-name word "
            "with a fixed question): every answer counts in the overall concepts, the axis-aligned concepts are empty"
        ]
    return [
        f"questions[{j}] ({question!r}) is tied to no axis: its answers count in the overall concepts only"
        for j, (question, axis) in enumerate(zip(questions, tied))
        if axis is None
    ]


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def _image_set(value: Any, where: str, n_questions: int) -> ImageSetAnswers:
    images = _expect(value, list, where, "a list of images, each a list of answers")
    rows = []
    for i, row in enumerate(images):
        answers = _strings(row, f"{where}[{i}]", "answer")
        if len(answers) != n_questions:
            raise TibetFormatError(
                f"{where}[{i}]: expected {_count(n_questions, 'answer')} (one per question), got {len(answers)}"
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
