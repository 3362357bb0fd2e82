"""Access to the data in ``prompts/`` (installed as the ``auditor.prompts`` package data)."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import yaml


def prompt_file(name: str) -> Traversable:
    """A file under ``prompts/``, e.g. ``prompt_file("vqa_questions.yaml")``."""
    return resources.files("auditor.prompts").joinpath(name)


def read_prompt_text(name: str) -> str:
    """A text data file from ``prompts/``."""
    return prompt_file(name).read_text(encoding="utf-8")


def read_prompt_yaml(name: str) -> Any:
    """Parse a YAML data file from ``prompts/``."""
    return yaml.safe_load(read_prompt_text(name))
