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


class RunBusyError(AuditorError):
    """Another process is running this run folder: nothing was changed, and a resume now would be refused too."""

    exit_code = 1
