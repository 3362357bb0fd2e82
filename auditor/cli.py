"""The ``auditor`` command line.

This module only wires commands together. Each command lives in ``auditor.commands``
and imports heavy libraries inside its function body, so ``auditor --help`` never
imports torch. User errors (:class:`~auditor.core.errors.AuditorError`) end in one line on
stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import atexit
import signal
import sys
import threading

import typer

from auditor.commands import (
    amplification,
    batch,
    common,
    compare,
    doctor,
    explore,
    plan,
    prompt,
    report,
    runs,
    schemas,
    score,
    selftest,
    setup,
    t2iat,
    trace,
)
from auditor.core.errors import AuditorError, Terminated
from auditor.entry import INTERRUPTED

app = typer.Typer(
    name="auditor",
    help="Audit text-to-image models for bias: TIBET concept scores (CAS, BAV), T2IAT association tests, bias amplification.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# Registered as the command line loads, before a run registers an exit function (its ``import ray`` does), so it
# runs after all of them.
atexit.register(common.ignored_through_teardown)

for command_module in (
    prompt, batch, explore, plan, doctor, report, compare, runs, schemas, score, setup, selftest, t2iat, amplification,
    trace,
):
    command_module.register(app)


def main() -> None:
    """Entry point of the ``auditor`` script: user errors end in one ``error:`` line, never a traceback.

    SIGTERM (a scheduler's time limit) interrupts a run as Ctrl-C does (:class:`Terminated`), so its record says
    ``interrupted``, not ``running``, and it gets its page."""
    signal.signal(signal.SIGTERM, _terminate)
    try:
        code = app(standalone_mode=False, prog_name="auditor")
        if code == INTERRUPTED:  # outside a command's own handling, typer turns an interruption into 130 and returns it
            raise Terminated() if SIGTERM_RECEIVED.is_set() else KeyboardInterrupt()
    except AuditorError as exc:
        _fail(str(exc), exc.exit_code)
    except typer.TyperException as exc:  # click's usage errors: unknown option or command, bad value
        message = exc.format_message().replace(": Value error, ", ": ")  # typer checks values with pydantic
        if message.lstrip().startswith("Usage:"):  # a command group called without a command: its help
            print(message)
            sys.exit(0)
        context = getattr(exc, "ctx", None)
        hint = f" (see `{context.command_path} --help`)" if context is not None else ""
        _fail(message + hint, exc.exit_code)
    except Terminated as exc:
        _fail(str(exc), exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        _fail("interrupted", INTERRUPTED)
    if isinstance(code, int) and code:
        sys.exit(code)


#: Set once this process gets SIGTERM: typer's exit code alone does not tell it from Ctrl-C.
SIGTERM_RECEIVED = threading.Event()


def _terminate(_signum: int, _frame: object) -> None:
    SIGTERM_RECEIVED.set()
    raise Terminated


def _fail(message: str, code: int) -> None:
    from auditor.core.openai_api import one_line

    print(f"error: {one_line(message, limit=None)}", file=sys.stderr)
    sys.exit(code)
