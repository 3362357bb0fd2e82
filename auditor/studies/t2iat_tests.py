"""T2IAT test definitions: the paper's eight built in, and custom YAML files of the same shape.

A definition (:class:`~auditor.records.T2IATTestDefinition`) names concepts X, Y and
attributes A, B with their verbal stimuli, a neutral template (``{concept}``) and an
attribute-guided template (``{concept}`` and ``{attribute}``). The built-in ones live in
``prompts/t2iat/<name>.yaml``; ``auditor t2iat run my-test.yaml`` reads a custom one.

Prompts of each group (Wang et al. 2023, §3.2 and §4.1):

- G(X): one neutral prompt per stimulus of X;
- G(X^A): ``max(|X|, |A|)`` prompts; prompt ``t`` joins stimulus ``t mod |X|`` of X with
  word ``t mod |A|`` of A, so every stimulus and every attribute word appears at least
  once without the ``|X| * |A|`` cross product (625 prompts for flowers x pleasant).
  Attribute prompt ``t < |X|`` is neutral prompt ``t`` with the attribute added, and
  image i of every prompt shares seed i, so each such pair differs by the attribute only.

Likewise G(Y), G(X^B), G(Y^A), G(Y^B). An "a"/"an" before a placeholder is made to fit the word it gets
(:mod:`auditor.prompting.articles`); the built-in tests' prompts have none that changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from auditor.core.errors import AuditorError
from auditor.core.resources import prompt_file
from auditor.core.store import describe_validation_error, read_text_file
from auditor.prompting.articles import filled_template
from auditor.records import T2IAT_GROUPS, T2IATGroup, T2IATStimuli, T2IATTestDefinition

#: Folder of the built-in definitions under ``prompts/``.
BUILTIN_FOLDER = "t2iat"
_YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class T2IATPrompt:
    """One prompt of a test: its group, its prompt-set id (``'<group>/<k>'``) and its text."""

    group: T2IATGroup
    prompt_id: str
    prompt: str


# --------------------------------------------------------------------------- loading


def builtin_names() -> list[str]:
    """Names of the built-in tests, sorted."""
    folder = prompt_file(BUILTIN_FOLDER)
    return sorted(entry.name.rsplit(".", 1)[0] for entry in folder.iterdir() if entry.name.endswith(_YAML_SUFFIXES))


def parse_definition(data: Any, where: str) -> T2IATTestDefinition:
    """Validate parsed YAML as a test definition; ``where`` names the source in the one-line error."""
    if not isinstance(data, dict):
        raise AuditorError(
            f"{where}: a T2IAT test must be a YAML mapping with name, prompt, attribute_prompt, x, y, a, b"
        )
    try:
        test = T2IATTestDefinition.model_validate(data)
    except ValidationError as exc:
        raise AuditorError(f"{where}: invalid T2IAT test: {describe_validation_error(exc)}") from None
    _refuse_shared_stimuli(test, where)
    return test


def _refuse_shared_stimuli(test: T2IATTestDefinition, where: str) -> None:
    """Refuse concepts (or attributes) that share a stimulus.

    The test contrasts X with Y and A with B; a word in both sides puts the same prompts in
    both groups, so the association it measures is partly the test against itself.
    Checked when a definition is read, not on the record, so recorded runs always load.
    """
    for first, second in ((test.x, test.y), (test.a, test.b)):
        shared = sorted({word.casefold() for word in first.stimuli} & {word.casefold() for word in second.stimuli})
        if shared:
            raise AuditorError(
                f"{where}: {first.name} and {second.name} share stimuli ({', '.join(shared)}); "
                "each word must belong to one side only"
            )


def _parse_yaml(text: str, where: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise AuditorError(f"{where} is not valid YAML: {problem}{line}") from None


def load_builtin(name: str) -> T2IATTestDefinition:
    """The built-in test ``name`` (e.g. ``'science-arts'``)."""
    if name not in builtin_names():
        raise AuditorError(f"no built-in T2IAT test {name!r}: use one of {', '.join(builtin_names())} or a YAML file")
    where = f"prompts/{BUILTIN_FOLDER}/{name}.yaml"
    return parse_definition(_parse_yaml(prompt_file(f"{BUILTIN_FOLDER}/{name}.yaml").read_text("utf-8"), where), where)


def load_file(path: Path) -> T2IATTestDefinition:
    """A custom test from a YAML file."""
    return parse_definition(_parse_yaml(read_text_file(path), str(path)), str(path))


def resolve_test(name_or_path: str) -> tuple[T2IATTestDefinition, str]:
    """``(definition, source)``: a built-in name, or a path to a ``.yaml``/``.yml`` file."""
    path = Path(name_or_path)
    if name_or_path.endswith(_YAML_SUFFIXES) or path.is_file():
        return load_file(path), name_or_path
    if name_or_path in builtin_names():  # a built-in, even beside a folder of its name
        return load_builtin(name_or_path), "built-in"
    if path.is_dir():
        raise AuditorError(f"{name_or_path} is a folder: name a test's YAML file, or a built-in test")
    if name_or_path.endswith(".json") or "/" in name_or_path:  # a path that names no file: not a built-in's name
        raise AuditorError(f"no such file: {name_or_path}")
    return load_builtin(name_or_path), "built-in"  # no such built-in: it says which there are


# --------------------------------------------------------------------------- prompts


def _concept(test: T2IATTestDefinition, group: T2IATGroup) -> T2IATStimuli:
    return test.x if group[0] == "X" else test.y


def _attribute(test: T2IATTestDefinition, group: T2IATGroup) -> T2IATStimuli | None:
    return {"A": test.a, "B": test.b}.get(group[1:])


def group_texts(test: T2IATTestDefinition, group: T2IATGroup) -> list[str]:
    """The prompts of one group, in order (see the module docstring for the pairing)."""
    concepts = _concept(test, group).stimuli
    attribute = _attribute(test, group)
    if attribute is None:
        return [filled_template(test.prompt, {"concept": concept}) for concept in concepts]
    words = attribute.stimuli
    return [
        filled_template(
            test.attribute_prompt, {"concept": concepts[t % len(concepts)], "attribute": words[t % len(words)]}
        )
        for t in range(max(len(concepts), len(words)))
    ]


def all_prompts(test: T2IATTestDefinition) -> list[T2IATPrompt]:
    """Every prompt of the test: groups X, Y, XA, XB, YA, YB in that order."""
    return [
        T2IATPrompt(group=group, prompt_id=f"{group}/{k}", prompt=text)
        for group in T2IAT_GROUPS
        for k, text in enumerate(group_texts(test, group))
    ]
