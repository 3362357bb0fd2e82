"""Run the real ``auditor`` entry point as a user would: its arguments, environment, output and exit code.

By default the command runs in the test's own process, through :func:`auditor.cli.main` (what ``python -m
auditor`` and the ``auditor`` script call), with its own ``sys.argv``, environment, working folder and
captured stdout and stderr. That saves each call a fresh interpreter's imports (torch, diffusers, NLTK and
WordNet: seconds per command, minutes over the suite). A test whose claim depends on a separate process
asks for one (``process=True``): what a fresh process imports or records, what it prints whatever stream a library's
logger holds (every check that something is *absent* from the output, or that it is one line), signals and
locks between processes. So does a call whose environment changes a variable that libraries read once, at
import (``HF_HUB_OFFLINE``, ``COLUMNS`` and the like), which this process has already read.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import traceback
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

#: Prefixes of variables read when a module is imported, not when a command runs: the libraries' (huggingface_hub,
#: transformers, torch, OpenMP, NLTK, Ray) and the terminal size rich reads when auditor's consoles are made.
#: Changing one needs a fresh process.
IMPORT_TIME_VARIABLES = ("HF_", "TRANSFORMERS_", "DIFFUSERS_", "TORCH", "PYTORCH_", "OMP_", "MKL_", "CUDA_", "NLTK_",
                         "RAY_", "TOKENIZERS_", "COLUMNS", "LINES")


def run_auditor(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``auditor ARGS`` with ``env`` added to the environment; its exit code and output as a CompletedProcess.

    ``process=True`` (or an ``env`` that changes an import-time variable) runs ``python -m auditor`` in a
    subprocess, killed after ``timeout`` seconds.
    """
    env = env or {}
    changes_imports = any(
        name.startswith(IMPORT_TIME_VARIABLES) and os.environ.get(name) != value for name, value in env.items()
    )
    if process or changes_imports:
        return subprocess.run(
            [sys.executable, "-m", "auditor", *args],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            cwd=cwd,
            timeout=timeout,
        )
    return _run_in_this_process(list(args), env, cwd)


def _run_in_this_process(args: list[str], env: dict[str, str], cwd: Path | None) -> subprocess.CompletedProcess[str]:
    """The entry point called here, as the interpreter would run it: an uncaught exception prints its traceback
    and exits 1, ``SystemExit`` gives its code; the environment, ``sys.argv`` and folder are restored after."""
    from auditor.cli import main

    saved_environ, saved_argv, saved_folder = dict(os.environ), sys.argv, os.getcwd()
    stdout, stderr = io.StringIO(), io.StringIO()
    code = 0
    os.environ.update(env)
    sys.argv = ["auditor", *args]
    try:
        if cwd is not None:
            os.chdir(cwd)
        with redirect_stdout(stdout), redirect_stderr(stderr), warnings.catch_warnings():
            _interpreter_warning_filters()
            try:
                main()
            except SystemExit as exc:
                code = _exit_code(exc, stderr)
            except Exception:  # what the interpreter does with an uncaught exception
                traceback.print_exc(file=stderr)
                code = 1
    finally:
        os.chdir(saved_folder)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_environ)
    return subprocess.CompletedProcess(["auditor", *args], code, stdout.getvalue(), stderr.getvalue())


def _interpreter_warning_filters() -> None:
    """Warnings as a fresh ``python -m auditor`` shows them: printed on its stderr (not collected by pytest),
    once per place, with the interpreter's default filters (deprecations shown only from ``__main__``)."""
    warnings.showwarning = _print_warning
    warnings.resetwarnings()
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.simplefilter("ignore", category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
    warnings.simplefilter("default", append=True)


def _print_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    """Python's own warning line, written to the ``sys.stderr`` of the moment (the command's captured one)."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _exit_code(exc: SystemExit, stderr: io.StringIO) -> int:
    """The exit status ``sys.exit(value)`` gives: None is 0, an int itself, anything else printed and 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=stderr)
    return 1
