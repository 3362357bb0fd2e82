"""Errors the command line turns into one clear line and a non-zero exit code."""


class AuditorError(Exception):
    """A problem the user can fix (bad input, missing weights, unknown spec).

    The CLI prints ``error: <message>`` and exits with ``exit_code``; no traceback,
    because the message already says what to change.
    """

    exit_code = 2


class BackendError(AuditorError):
    """A model or service could not be used (missing weights, refused request)."""

    exit_code = 1


class InvalidPlanError(AuditorError):
    """The LLM's plan stayed invalid after the allowed repair attempts."""

    exit_code = 1


class InvalidEditError(AuditorError):
    """A person's edit of a plan (``--review``) breaks the plan's rules: bad input, so exit 2, where an LLM's plan
    that stays invalid is a service failing (:class:`InvalidPlanError`)."""

    #: The person's last edit, with the error on top, where the review gave up on it (a run keeps it as a draft).
    edited: str = ""


class StartAgainError(AuditorError):
    """The run's own settings cannot take it further: a resume keeps them and would stop the same way, so the
    user starts a new run with other settings (which reuses everything the first one cached)."""


class ImagesMissingError(AuditorError):
    """A ``folder:`` model lacks images the run asks for. Once they are added the run can go on (its images are read
    again from the changed folder); until then a resume stops the same way."""


class RunBusyError(AuditorError):
    """Another process is running this run folder: nothing was changed, and a resume now would be refused too."""

    exit_code = 1


class RunLockError(AuditorError):
    """The run folder cannot be locked (read-only, not ours, a full disk): nothing was changed, and a resume would
    fail alike until that is mended."""

    exit_code = 1


class CacheError(BackendError):
    """The content cache's SQLite file cannot be read or written (damaged, read-only, held by another process):
    what the run computed so far is in it, so the message says how to free or replace it."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's time limit, ``timeout``, ``kill``), raised in the main thread by the command line's
    handler. A kind of interruption, so a run ends as after Ctrl-C: recorded ``interrupted`` with its page, its lock
    let go, and resumable; the exit code is 143 (128 + SIGTERM)."""

    exit_code = 143

    def __str__(self) -> str:
        return "terminated (SIGTERM)"


class ReviewCancelled(AuditorError):
    """The person reviewing a plan (``--review``) cancelled it: a choice, not a fault, so a run records it as
    ``interrupted`` (a resume opens the review again); the exit code is Ctrl-C's."""

    exit_code = 130

    def __init__(self, message: str = "review cancelled: the plan file was left empty") -> None:
        super().__init__(message)


def interruption(exc: KeyboardInterrupt | ReviewCancelled) -> str:
    """How an interruption reads in a record and an error line."""
    return str(exc) if isinstance(exc, (Terminated, ReviewCancelled)) else "interrupted by the user"


def out_of_memory(exc: BaseException) -> str | None:
    """The first line of ``exc`` when it is an allocation failure (Python's, or torch's on the GPU or CPU), else None.

    Smaller batches or images fix it, so the command line says so in one line instead of a traceback.
    """
    message = str(exc).strip()
    first = message.splitlines()[0] if message else type(exc).__name__
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return first
    if isinstance(exc, RuntimeError) and "can't allocate memory" in first:  # torch's CPU allocator
        return first
    return None
