"""A run's command line, kept in its record so that the same command with ``--resume`` added continues the run.

A person whose run stopped presses the up arrow and adds ``--resume``: the command line then restates every
setting the run was started with. The run keeps its own settings whatever is typed, so an option typed again is
harmless where its value is the run's own, and a mistake where it is not (the person expects a change that will
not happen). The command that starts a run records its options (:func:`keep`); a resume lets the restated ones
through when each is the run's own, and otherwise names each one that differs beside the run's value
(:func:`check_restated`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Collection, Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    from pydantic import JsonValue
    from typer.core import TyperArgument, TyperOption

    from auditor.records.base import StudyRecord
    from auditor.studies.run import StudyRun


def keep(study: StudyRun, ctx: typer.Context, resumable: Collection[str]) -> None:
    """Record the options the command started ``study`` with, all but the ``resumable`` ones (those its resume may
    change: where the models are, how progress shows), and save the record."""
    study.record.command_options = {
        param: as_json(value) for param, value in ctx.params.items() if param not in resumable
    }
    study.save()


def as_json(value: object) -> JsonValue:
    """An option's value as the record keeps it: a choice by its value, a path absolute (``prompts.txt`` and
    ``./prompts.txt`` typed in the same folder are one file, the same name typed elsewhere another), a text with any
    credential in it blanked (as everything auditor writes)."""
    from auditor.core.redaction import redact

    if isinstance(value, Enum):
        return as_json(value.value)
    if isinstance(value, Path):
        return redact(os.path.abspath(value))
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list | tuple):
        return [as_json(item) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    raise TypeError(f"an option of type {type(value).__name__} has no JSON form")  # a new option type: say so


def check_restated(
    ctx: typer.Context, restated: list[str], resumable: Collection[str], record_type: type[StudyRecord]
) -> None:
    """For ``--resume``: refuse the ``restated`` options (typed, though not ``resumable``) unless each is the run's
    own, with one line naming every one that differs beside the run's value. A run of another kind than
    ``record_type`` is left to the resume, which says which command continues it."""
    from auditor.commands.common import run_store
    from auditor.core.store import RECORD_FILE
    from auditor.records.loading import load_record_summary

    run_dir = run_store(ctx.params.get("runs_dir")).resolve(ctx.params["resume"])
    record = load_record_summary(run_dir / RECORD_FILE)
    if not isinstance(record, record_type):
        return
    recorded = record.command_options
    flags = {param.name: param for param in ctx.command.params}
    taken = ", ".join(sorted(_flag(flags[param]) for param in set(resumable) & set(flags) - {"resume"}))
    if recorded is None:  # started from Python, by a batch, or before runs recorded their options
        named = ", ".join(_flag(flags[param]) for param in restated)
        raise AuditorError(
            f"--resume continues a run with its own settings; {named} cannot change them (only {taken} may be given: "
            "the run kept no record of the options it was started with)"
        )
    changed = [param for param in restated if _differs(ctx.params[param], recorded, param)]
    if not changed:
        return
    named = ", ".join(
        f"{_typed(flags[param], ctx.params[param])} ({_the_runs(recorded, param)})" for param in changed
    )
    raise AuditorError(
        f"--resume continues a run with its own settings; {named} cannot change them (only {taken} may change; "
        "any other option may be given with the run's own value)"
    )


def _differs(value: object, recorded: Mapping[str, JsonValue], param: str) -> bool:
    return param not in recorded or as_json(value) != recorded[param]


def _flag(param: TyperArgument | TyperOption) -> str:
    """An option by its flag, an argument as ``--help`` names it (PROMPT, not the parameter's name)."""
    return param.opts[0] if param.param_type_name == "option" else (param.metavar or str(param.name).upper())


def _typed(param: TyperArgument | TyperOption, value: object) -> str:
    """The option as the command line gave it: a flag alone, anything else with its value."""
    return _flag(param) if isinstance(value, bool) else f"{_flag(param)} {_shown(as_json(value))}"


def _the_runs(recorded: Mapping[str, JsonValue], param: str) -> str:
    if param not in recorded:
        return "the run recorded no such option"
    if recorded[param] in (None, []):
        return "not given when the run started"
    return f"the run's: {_shown(recorded[param])}"


def _shown(value: JsonValue) -> str:
    """A value as a shell command line would give it (a text with spaces quoted), a flag's as on or off."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return " ".join(_shown(item) for item in value)
    return shlex.quote(str(value))
