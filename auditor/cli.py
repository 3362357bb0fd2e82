"""The ``auditor`` command line.

This module only wires commands together. Each command lives in ``auditor.commands``
and imports heavy libraries inside its function body, so ``auditor --help`` never
imports torch. User errors (:class:`~auditor.errors.AuditorError`) end in one line on
stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import sys

import typer

from auditor.commands import compare, doctor, plan, prompt, report, runs, schemas, score, selftest, setup, t2iat
from auditor.errors import AuditorError

app = typer.Typer(
    name="auditor",
    help="Audit text-to-image models for bias: TIBET concept scores (CAS, BAV) and T2IAT association tests.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

for command_module in (prompt, plan, doctor, report, compare, runs, schemas, score, setup, selftest, t2iat):
    command_module.register(app)


def main() -> None:
    """Entry point of the ``auditor`` script."""
    try:
        app()
    except AuditorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
