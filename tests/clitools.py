"""Run the real ``auditor`` entry point as a user would: its arguments, environment, output and exit code.

By default the command runs in the test's own process, through :func:`auditor.cli.main` (what ``python -m
auditor`` and the ``auditor`` script call), with its own ``sys.argv``, environment, working folder and
captured ``sys.stdout`` and ``sys.stderr``. That saves each call a fresh interpreter's imports (torch,
diffusers, NLTK and WordNet: seconds per command, minutes over the suite).

What runs in the test's process shares it: a library's logger may hold an older stream, C code and child
processes write to the file descriptors, an import-time warning was shown by an earlier command, and
process-wide state (WordNet loaded, torch imported) is an earlier test's. So a test asks for a fresh
``python -m auditor`` (``process=True``) when its claim is about what a process prints or records: every
check that something is *absent* from the output (a secret, a traceback, colour codes), that an error is
*one line*, or what the run's environment says. So does a call whose environment changes a variable read
once, at import or start-up (:data:`IMPORT_TIME_VARIABLES`), or a test process run with ``-W`` options.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import traceback
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import auditor

#: Prefixes of variables read when the interpreter starts or a module is imported, not when a command runs:
#: Python's own, the libraries' (huggingface_hub, transformers, torch, OpenMP and BLAS, NLTK's ``HOME``, Ray,
#: tqdm, openai's log, LangChain/LangSmith) and the terminal settings rich reads when auditor's consoles are
#: made. Changing one needs a fresh process.
IMPORT_TIME_VARIABLES = (
    "PYTHON", "HF_", "HUGGINGFACE_", "HUGGING_FACE_", "XDG_CACHE_HOME", "TRANSFORMERS_", "DIFFUSERS_", "TORCH",
    "PYTORCH_", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "NUMEXPR_", "VECLIB_", "CUDA_", "NLTK_", "HOME", "RAY_",
    "TOKENIZERS_", "TQDM_", "OPENAI_LOG", "LANGCHAIN_", "LANGSMITH_", "COLUMNS", "LINES", "FORCE_COLOR",
    "NO_COLOR", "TTY_", "JUPYTER_", "TERM",
)  # fmt: skip
#: The folder holding the ``auditor`` package this process imported: a subprocess runs the same code.
SOURCE_ROOT = str(Path(auditor.__file__).resolve().parent.parent)
#: Seconds a command's own threads get to finish after it returns before the test calls them left running.
THREAD_GRACE_SECONDS = 10.0


def run_auditor(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``auditor ARGS`` with ``env`` added to the environment; its exit code and output as a CompletedProcess.

    ``process=True``, an ``env`` that changes an import-time variable, or ``-W`` options given to this
    process run ``python -m auditor`` in a subprocess, killed after ``timeout`` seconds.
    """
    env = {name: str(value) for name, value in (env or {}).items()}
    changes_imports = any(
        name.startswith(IMPORT_TIME_VARIABLES) and os.environ.get(name) != value for name, value in env.items()
    )
    if process or changes_imports or sys.warnoptions:
        path = os.pathsep.join(filter(None, [SOURCE_ROOT, env.get("PYTHONPATH", os.environ.get("PYTHONPATH"))]))
        return subprocess.run(
            [sys.executable, "-m", "auditor", *args],
            capture_output=True,
            text=True,
            env={**os.environ, **env, "PYTHONPATH": path},
            cwd=cwd,
            timeout=timeout,
        )
    return _run_in_this_process(list(args), env, cwd)


def _run_in_this_process(args: list[str], env: dict[str, str], cwd: Path | None) -> subprocess.CompletedProcess[str]:
    """The entry point called here, as the interpreter would run it: an uncaught exception prints its traceback
    and exits 1, ``SystemExit`` gives its code; the environment, ``sys.argv``, folder and signal handlers (a
    command ignores Ctrl-C once its result is shown) are restored after.

    A command that leaves a thread of its own running fails the test: ``python -m auditor`` would not exit.
    """
    from auditor.cli import main

    saved_argv, saved_folder = sys.argv, os.getcwd()
    saved_environ = dict(os.environ)
    saved_handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    threads_before = set(threading.enumerate())
    stdout, stderr = io.StringIO(), io.StringIO()
    code = 0
    try:
        os.environ.update(env)
        sys.argv = ["auditor", *args]
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
        _restore_environment(saved_environ)
        for number, handler in saved_handlers.items():
            if handler is not None:  # None: set outside Python, nothing Python can put back
                signal.signal(number, handler)
    _check_no_thread_left(threads_before, args)
    return subprocess.CompletedProcess(["auditor", *args], code, stdout.getvalue(), stderr.getvalue())


def _restore_environment(saved: dict[str, str]) -> None:
    """Put back what the command and ``env`` changed, key by key (the environment is never empty meanwhile)."""
    for name in [name for name in os.environ if name not in saved]:
        del os.environ[name]
    for name, value in saved.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


def _check_no_thread_left(before: set[threading.Thread], args: list[str]) -> None:
    """Fail when the command left a non-daemon thread running (a real process would wait for it at exit)."""
    left = [thread for thread in threading.enumerate() if thread not in before and not thread.daemon]
    for thread in left:
        thread.join(THREAD_GRACE_SECONDS)
    running = [thread.name for thread in left if thread.is_alive()]
    assert not running, f"auditor {' '.join(args)} left threads running: {', '.join(running)}"


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
    """The exit status ``sys.exit(value)`` gives: None is 0, an int its low byte, anything else printed and 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=stderr)
    return 1


def assert_fits(text: str, width: int, *, whole: tuple[str, ...] = ()) -> None:
    """Every line of ``text`` fits ``width`` terminal cells, but those holding one of ``whole``: a path or command
    printed unwrapped (the terminal folds it; rich would break it mid-word, and a copy of it would not work)."""
    from rich.cells import cell_len

    too_long = [line for line in text.splitlines() if cell_len(line) > width and not any(w in line for w in whole)]
    assert too_long == [], too_long
