"""LLM backends behind one small protocol, chosen by an ``--llm`` spec.

- ``openai:<model>``: the openai SDK; honours ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``,
  so any OpenAI-compatible server (vLLM, Ollama, llama.cpp server) works.
- ``langchain:<provider>:<model>``: any chat model langchain's ``init_chat_model`` knows.
- ``offline``: the deterministic WordNet planner (:mod:`auditor.planning.offline`).

HTTP 408/409/429/5xx and connection errors are retried a bounded number of times with
exponential backoff (the SDKs' own retry loop, which also honours the server's
``Retry-After``); then one clear error. The JSON request is sent in JSON mode where the
backend has one. The SDKs are imported inside the backends, never at CLI start-up.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Protocol

from auditor.core.errors import AuditorError, BackendError
from auditor.core.openai_api import (
    HTTP_RETRIES,
    REQUEST_TIMEOUT,
    client_base_url,
    configured_base_url,
    describe_openai_error,
    one_line,
    openai_client,
    reply_not_json,
    reply_text,
)
from auditor.core.registry import Spec
from auditor.records import ChatMessage

MISSING_KEY = "OPENAI_API_KEY is not set: export it, or use --llm offline"


class ChatModel(Protocol):
    """A chat LLM: one reply to a conversation."""

    spec: str
    temperature: float | None
    seed: int | None

    def complete(self, messages: Sequence[ChatMessage], *, json_mode: bool) -> str:
        """The assistant's reply to ``messages``; ``json_mode`` asks for a JSON object where supported.

        Raises BackendError (one line) when the service fails after the bounded retries.
        """
        ...


def _mentions_response_format(exc: Exception) -> bool:
    text = str(exc).lower()
    return "response_format" in text or "json_object" in text or "json mode" in text


class _SdkChat:
    """What both SDK-backed chat models keep: the spec, the sampling settings and the retry budget.

    Subclasses make their SDK client in :meth:`_connect`, which runs once these are set.
    """

    def __init__(
        self,
        spec: Spec,
        *,
        temperature: float | None = None,
        seed: int | None = None,
        max_retries: int = HTTP_RETRIES,
        timeout: float = REQUEST_TIMEOUT,
    ):
        self.spec = str(spec)
        self.temperature = temperature
        self.seed = seed
        #: Tries per request: the first plus the SDK's retries (error lines say how many were made).
        self.tries = max_retries + 1
        self._connect(spec, max_retries, timeout)

    def _connect(self, spec: Spec, max_retries: int, timeout: float) -> None:
        """Make the SDK client; a missing key or unusable spec raises :class:`AuditorError` (one line)."""
        raise NotImplementedError

    def _sampling(self) -> dict[str, Any]:
        """Temperature and seed, only those that were set (the service's defaults apply otherwise)."""
        options: dict[str, Any] = {}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.seed is not None:
            options["seed"] = self.seed
        return options


#: Base URLs of servers that refused JSON mode (``response_format``): asked in plain text for the rest of the
#: process, so each plan does not spend a request to learn it again.
_WITHOUT_JSON_MODE: set[str] = set()


class OpenAIChat(_SdkChat):
    """``openai:<model>`` through the official SDK (chat completions)."""

    def _connect(self, spec: Spec, max_retries: int, timeout: float) -> None:
        self.model = spec.target
        self._client = openai_client(MISSING_KEY, max_retries=max_retries, timeout=timeout)

    @property
    def base_url(self) -> str:
        return client_base_url(self._client)

    def complete(self, messages: Sequence[ChatMessage], *, json_mode: bool) -> str:
        import openai

        options = self._sampling()
        wants_json = json_mode and self.base_url not in _WITHOUT_JSON_MODE
        if wants_json:
            options["response_format"] = {"type": "json_object"}
        try:
            response = self._client.chat.completions.create(
                model=self.model, messages=[m.model_dump() for m in messages], **options
            )
        except openai.BadRequestError as exc:
            if wants_json and _mentions_response_format(exc):
                _WITHOUT_JSON_MODE.add(self.base_url)  # an OpenAI-compatible server without it: ask in plain text
                return self.complete(messages, json_mode=json_mode)
            raise BackendError(describe_openai_error(self.spec, exc, self.base_url, 1)) from None
        except openai.OpenAIError as exc:
            raise BackendError(describe_openai_error(self.spec, exc, self.base_url, self.tries)) from None
        except json.JSONDecodeError:
            raise reply_not_json(self.spec, self.base_url) from None
        return reply_text(response, self.spec, self.base_url)


class LangChainChat(_SdkChat):
    """``langchain:<provider>:<model>`` through ``init_chat_model``; JSON mode via ``with_structured_output``."""

    def _connect(self, spec: Spec, max_retries: int, timeout: float) -> None:
        provider, _, model = spec.target.partition(":")
        if provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
            raise AuditorError(MISSING_KEY)
        from langchain.chat_models import init_chat_model

        self.provider = provider
        options: dict[str, Any] = {"max_retries": max_retries, "timeout": timeout, **self._sampling()}
        try:
            self._model = init_chat_model(model, model_provider=provider, **options)
        except ImportError as exc:
            message = f"--llm {spec}: langchain has no {provider!r} package installed: {one_line(exc)}"
            raise AuditorError(message) from None
        except Exception as exc:  # each provider raises its own types for bad names and settings
            raise AuditorError(f"--llm {spec}: langchain could not create the model: {one_line(exc)}") from None
        self._json_model = self._structured()

    def _structured(self) -> Any | None:
        """The model in JSON mode with the raw reply kept (our extractor reads it), or None where unsupported."""
        try:
            return self._model.with_structured_output(None, method="json_mode", include_raw=True)
        except (NotImplementedError, ValueError, TypeError):
            return None

    def complete(self, messages: Sequence[ChatMessage], *, json_mode: bool) -> str:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
        converted = [kinds[m.role](content=m.content) for m in messages]
        runnable = self._json_model if json_mode and self._json_model is not None else self._model
        try:
            result = runnable.invoke(converted)
        except Exception as exc:  # provider SDK errors of any type become one line
            raise BackendError(self._describe(exc)) from None
        message = result["raw"] if isinstance(result, dict) else result
        return message.text if isinstance(message, AIMessage) else str(message)

    def _describe(self, exc: Exception) -> str:
        import openai

        if isinstance(exc, openai.OpenAIError):
            return describe_openai_error(self.spec, exc, configured_base_url(), self.tries)
        return one_line(f"{self.spec}: {type(exc).__name__}: {exc}")
