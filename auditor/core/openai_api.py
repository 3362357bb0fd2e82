"""What every backend on the openai SDK shares: the client, its retry budget, and one-line errors.

The planner (``--llm openai:``), the Images API (``--t2i openai:``) and the vision chat
VQA (``--vqa openai:``) all read ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` (any
OpenAI-compatible server: vLLM, Ollama, LM Studio, llama.cpp server), retry HTTP
408/409/429/5xx and connection errors a bounded number of times (the SDK's own loop,
which backs off and honours the server's ``Retry-After``), and then fail with one line
that names the status, the server and how often it was tried. The SDK is imported inside
the functions, never at CLI start-up.
"""

from __future__ import annotations

import base64
import os
import re
import threading
from typing import TYPE_CHECKING, Any

from auditor.core.errors import AuditorError, BackendError
from auditor.core.redaction import redact

if TYPE_CHECKING:  # pragma: no cover
    import httpx
    from openai import OpenAI

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Retries after the first try for 408/409/429/5xx and connection errors (so 4 tries in all).
HTTP_RETRIES = 3
#: Seconds one request may take before it counts as failed (and is retried).
REQUEST_TIMEOUT = 120.0
#: Shortest part of a base URL's credentials or query that error lines blank out (:func:`without_url_secrets`).
MIN_SECRET = 4
#: A run of whitespace that breaks a line (a line break or a tab, with the spaces around it).
_BREAK = re.compile(r"\s*[^\S ]\s*")


def one_line(text: str, limit: int | None = 300) -> str:
    """``text`` redacted (keys, and the secrets of ``OPENAI_BASE_URL``), on one line, at most ``limit`` characters
    (None: all of it). Line breaks and tabs, with the spaces around them, are one space; runs of spaces within a
    line are kept, so a value the message quotes reads as written (a prompt that repeats another but for its
    spacing)."""
    line = _BREAK.sub(" ", without_url_secrets(redact(str(text)))).strip()
    return line if limit is None or len(line) <= limit else line[: limit - 1] + "…"


def configured_base_url() -> str:
    """``OPENAI_BASE_URL``, or OpenAI's own API when it is unset or empty."""
    return os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL


def api_key(missing_key: str) -> str:
    """``OPENAI_API_KEY``; when it is unset or empty, :class:`AuditorError` with the caller's ``missing_key`` line."""
    key = os.environ.get("OPENAI_API_KEY")
    if not key:
        raise AuditorError(missing_key)
    return key


def openai_client(missing_key: str, *, max_retries: int = HTTP_RETRIES, timeout: float = REQUEST_TIMEOUT) -> OpenAI:
    """An SDK client for the configured server (see :func:`api_key` for ``missing_key``); each of its requests
    gets ``timeout`` seconds in all (:func:`deadline_transport`), then counts as failed and is retried."""
    key = api_key(missing_key)
    import httpx
    from openai import OpenAI

    http_client = httpx.Client(transport=deadline_transport(timeout), timeout=timeout, follow_redirects=True)
    return OpenAI(
        api_key=key, base_url=configured_base_url(), max_retries=max_retries, timeout=timeout, http_client=http_client
    )


def deadline_transport(seconds: float) -> httpx.BaseTransport:
    """An HTTP transport that gives each request ``seconds`` in all, headers and body.

    The HTTP library's timeouts bound each read, not the request: a server or proxy that sends a
    byte a second is never timed out, and a plan or an audit waits forever. Each request here
    runs in a daemon thread that reads the whole response; past the deadline it counts as a
    read timeout, which the SDK retries a bounded number of times. The abandoned thread ends when
    the server closes the connection, or with the process. Replies are read whole anyway (no
    call streams), so nothing changes for a server that answers. The request goes out as the
    SDK's own client would send it: through the proxy the environment names (``HTTPS_PROXY``,
    ``NO_PROXY``), which an inner client picks per request.
    """
    import httpx

    class DeadlineTransport(httpx.BaseTransport):
        def __init__(self) -> None:
            self._inner = httpx.Client(trust_env=True)  # sends what the outer client built; picks the proxy

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            outcome: dict[str, Any] = {}

            def fetch() -> None:
                try:
                    response = self._inner.send(request, stream=True)
                    try:
                        body = b"".join(response.stream)  # as sent: the client decodes it (gzip) once
                    finally:
                        response.close()
                    outcome["response"] = httpx.Response(
                        response.status_code, headers=response.headers, stream=httpx.ByteStream(body),
                        extensions=response.extensions,
                    )  # fmt: skip
                except BaseException as exc:  # handed to the caller's thread
                    outcome["error"] = exc

            worker = threading.Thread(target=fetch, name="auditor-http", daemon=True)
            worker.start()
            worker.join(seconds)
            if worker.is_alive():
                raise httpx.ReadTimeout(f"no complete response within {seconds:g} s", request=request)
            if "error" in outcome:
                raise outcome["error"]
            return outcome["response"]

        def close(self) -> None:
            self._inner.close()

    return DeadlineTransport()


def client_base_url(client: OpenAI) -> str:
    """The client's base URL as error lines, records and fingerprints show it (:func:`public_url`)."""
    return public_url(str(client.base_url))


def public_url(url: str) -> str:
    """``url`` as a record may keep it: no user name, password, query or fragment (where keys can hide)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return redact(urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", "")))


def without_url_secrets(text: str) -> str:
    """``text`` with the password, query (and each of its values) and fragment of ``OPENAI_BASE_URL`` blanked,
    wherever an error message (the SDK's, or its HTTP library's) repeats them. The user name is no secret and a
    common word ("openai") could be one, so it stays, as do parts shorter than :data:`MIN_SECRET`, which blanking
    would garble the message with (and which keep nothing secret).

    A URL with a password makes the HTTP library send ``Authorization: Basic base64(user:password)``, which a
    server may echo in its error: that encoding is blanked too."""
    from urllib.parse import parse_qsl, unquote, urlsplit

    try:
        parts = urlsplit(configured_base_url())
        secrets = {parts.password or "", parts.query, parts.fragment} | {value for _, value in parse_qsl(parts.query)}
    except ValueError:  # a malformed URL (the client refuses it with its own error): nothing to find in it
        return text
    if parts.password:
        credentials = f"{unquote(parts.username or '')}:{unquote(parts.password)}".encode()
        secrets.add(base64.b64encode(credentials).decode("ascii"))
    for secret in sorted((secret for secret in secrets if len(secret) >= MIN_SECRET), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def reply_text(response: Any, spec: str, base_url: str) -> str:
    """The text of a chat completion's first choice, redacted (a server may echo what it was sent).

    The SDK builds its response objects without validating them, so an OpenAI-compatible
    server's malformed reply only shows when it is read: here, as one line naming the server.
    """
    if isinstance(response, str):  # a page not labelled JSON (a proxy's HTML): the SDK hands back its text
        raise reply_not_json(spec, base_url)
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise BackendError(f"{spec}: the reply from {base_url} has no choices")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if message is None or not (content is None or isinstance(content, str)):
        raise BackendError(f"{spec}: the reply from {base_url} is not a chat completion (no message text)")
    return redact(content or "")


def describe_openai_error(spec: str, exc: Exception, base_url: str, tries: int) -> str:
    """One line for an openai SDK error: status, server message, where (``base_url`` as :func:`public_url` gives
    it: no credentials or query), and how often it was tried."""
    import openai

    base_url = public_url(base_url)

    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        detail = body.get("message") or (body.get("error") or {}).get("message") if body else None
        detail = detail or exc.message
        hint = " (check OPENAI_API_KEY)" if exc.status_code in (401, 403) else ""
        retried = f" after {tries} tries" if exc.status_code in (408, 409, 429) or exc.status_code >= 500 else ""
        return one_line(f"{spec}: HTTP {exc.status_code} from {base_url}{retried}{hint}: {detail}")
    if isinstance(exc, openai.APITimeoutError):
        return one_line(f"{spec}: no answer from {base_url} within {REQUEST_TIMEOUT:.0f} s, {tries} tries")
    if isinstance(exc, openai.APIConnectionError):
        return one_line(f"{spec}: cannot reach {base_url} ({tries} tries): {exc.__cause__ or exc}")
    return one_line(f"{spec}: {type(exc).__name__}: {exc}")


def reply_not_json(spec: str, base_url: str) -> BackendError:
    """The one-line error for a reply the SDK cannot parse (a proxy's HTML page with status 200, say): the SDK
    raises :class:`json.JSONDecodeError`, no error of its own, so callers catch that beside ``OpenAIError``."""
    return BackendError(f"{spec}: the reply from {base_url} is not JSON (is OPENAI_BASE_URL an OpenAI-compatible API?)")


def request_failed(spec: str, exc: Exception, client: OpenAI) -> BackendError:
    """The one-line error for a request ``client`` gave up on (after its retries, where the status allows them)."""
    return BackendError(describe_openai_error(spec, exc, client_base_url(client), client.max_retries + 1))
