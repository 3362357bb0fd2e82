"""``openai:<model>``: VQA through an OpenAI-compatible vision chat API.

GPT-4o-class models, or a local vLLM / Ollama / LM Studio server with Qwen2.5-VL or
LLaVA (``OPENAI_BASE_URL``), answer the audit's questions. Each (image, question) pair
is one chat request: a system message with the short-answer instructions (the caption
question gets its own, and the longer caption budget), then the image as a base64 PNG
data URL and the question. Temperature 0, so answers are as repeatable as the service
allows; ``max_tokens`` (the field every compatible server knows) bounds each answer, and
only its first line is kept, as for the local models.

Up to ``concurrency`` requests are in flight at once. The SDK retries 408/409/429/5xx and
connection errors a bounded number of times (honouring the server's ``Retry-After``);
after that the first failure stops the call with one line and the requests not yet sent
are dropped; the answers that came back before it (or before a Ctrl-C) travel with the
failure, for the stage to cache. Answers are cached by the perception stage like every backend's, keyed by
:meth:`OpenAIVqa.cache_fingerprint` (service, model, instructions, budgets, temperature).
No torch anywhere on this path.
"""

from __future__ import annotations

import base64
import io
import json
import threading
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from auditor.core.errors import AuditorError
from auditor.core.fingerprint import settings_fingerprint
from auditor.core.openai_api import (
    HTTP_RETRIES,
    REQUEST_TIMEOUT,
    api_key,
    client_base_url,
    openai_client,
    public_url,
    reply_not_json,
    reply_text,
    request_failed,
)
from auditor.core.registry import Spec
from auditor.core.weights import LoadOptions
from auditor.perception.base import first_line, note_answered
from auditor.records import ModelRef, PerceptionSettings

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

MISSING_KEY = (
    "OPENAI_API_KEY is not set: export it to use --vqa openai:<model> (any value for a local server "
    "that needs none), or use a local model such as --vqa blip2:Salesforce/blip2-opt-2.7b"
)
#: Short-answer instructions: TIBET's concepts come from the words of the answers, so no prose around them.
INSTRUCTIONS = (
    "You answer questions about an image. Reply with only the answer, in a few words on one line, "
    "with no explanation and no full sentence."
)
#: Caption instructions: one sentence, like the captions of the paper's VQA model.
CAPTION_INSTRUCTIONS = "You describe images. Reply with one short sentence on one line."


class OpenAIVqa:
    """A vision chat model behind an OpenAI-compatible API; one request per (image, question)."""

    def __init__(self, spec: Spec, settings: PerceptionSettings, client: Any):
        self.model = spec.target
        self._client = client
        self.settings = settings.model_copy(
            update={
                "instructions": settings.instructions or INSTRUCTIONS,
                "caption_instructions": settings.caption_instructions or CAPTION_INSTRUCTIONS,
            }
        )
        service = public_url(self.base_url)
        self.ref = ModelRef(
            spec=str(spec),
            backend=spec.prefix,
            model_id=self.model,
            service=service,
            fingerprint=settings_fingerprint(None, service=service, model=self.model),
        )

    @property
    def base_url(self) -> str:
        return client_base_url(self._client)

    def cache_fingerprint(self) -> str:
        """Service and model, plus every setting that changes an answer (not the concurrency)."""
        settings = self.settings
        return settings_fingerprint(
            self.ref.fingerprint,
            backend=self.ref.backend,
            instructions=settings.instructions,
            caption_instructions=settings.caption_instructions,
            max_new_tokens=settings.max_new_tokens,
            caption_max_new_tokens=settings.caption_max_new_tokens,
            temperature=settings.temperature,
        )

    def answer(
        self,
        images: Sequence[Image.Image],
        questions: Sequence[str],
        caption_question: str | None = None,
        wanted: Sequence[Sequence[int]] | None = None,
    ) -> list[list[str | None]]:
        """``result[i][j]`` answers ``questions[j]`` about ``images[i]``, for the questions ``wanted[i]`` names
        (default all; the others are None: each pair is a paid request); each image is encoded once."""
        if not images or not questions:
            return [[] for _ in images]
        urls = [_data_url(image) for image in images]
        everything = range(len(questions))
        places = [(i, j) for i in range(len(images)) for j in (everything if wanted is None else wanted[i])]
        stop = threading.Event()  # set by the first failure: requests not yet sent are skipped

        def ask(url: str, question: str) -> str | None:
            if stop.is_set():
                return None
            try:
                return self._ask(url, question, question == caption_question)
            except BaseException:
                stop.set()
                raise

        if not places:
            return [[None] * len(questions) for _ in images]
        workers = min(self.settings.concurrency, len(places))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-vqa")
        futures: list[Future] = []
        try:
            futures.extend(pool.submit(ask, urls[i], questions[j]) for i, j in places)
            wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((future for future in futures if future.done() and future.exception()), None)
            if failed is not None:
                raise failed.exception()
        except BaseException as exc:
            stop.set()  # after a failure or Ctrl-C, send nothing more; the requests in flight finish
            pool.shutdown(wait=True, cancel_futures=True)
            answered = zip(places, _replies_so_far(futures))
            note_answered(exc, {place: reply for place, reply in answered if reply is not None})
            raise
        pool.shutdown(wait=True)
        result: list[list[str | None]] = [[None] * len(questions) for _ in images]
        for (i, j), future in zip(places, futures, strict=True):
            result[i][j] = future.result()
        return result

    def _ask(self, url: str, question: str, is_caption: bool) -> str:
        """One chat request; its reply's first line."""
        import openai

        settings = self.settings
        instructions = settings.caption_instructions if is_caption else settings.instructions
        messages = [
            {"role": "system", "content": instructions},
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": question}],
            },
        ]
        try:
            response = self._client.chat.completions.create(
                model=self.model,
                messages=messages,
                temperature=settings.temperature,
                max_tokens=settings.caption_max_new_tokens if is_caption else settings.max_new_tokens,
            )
        except openai.OpenAIError as exc:
            raise request_failed(self.ref.spec, exc, self._client) from None
        except json.JSONDecodeError:
            raise reply_not_json(self.ref.spec, self.base_url) from None
        return first_line(reply_text(response, self.ref.spec, self.base_url))


def _replies_so_far(futures: Sequence[Future]) -> list[str | None]:
    """Each request's answer where it came back, else None (failed, cancelled or never sent)."""
    return [
        future.result() if future.done() and not future.cancelled() and future.exception() is None else None
        for future in futures
    ]


def _data_url(image: Image.Image) -> str:
    """The image as a ``data:image/png;base64,...`` URL (lossless, so the model sees the pixels the run saved)."""
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def preflight(spec: Spec) -> None:
    """What :func:`load` needs, checked before a run generates anything: a model name and an API key."""
    if not spec.target:
        raise AuditorError("the openai VQA backend needs a model: --vqa openai:<model>, e.g. openai:gpt-4o-mini")
    api_key(MISSING_KEY)


def load(
    spec: Spec,
    settings: PerceptionSettings,
    options: LoadOptions | None = None,
    *,
    max_retries: int = HTTP_RETRIES,
    timeout: float = REQUEST_TIMEOUT,
) -> OpenAIVqa:
    """A client for ``spec.target`` (load ``options`` do not apply to a hosted model)."""
    preflight(spec)
    return OpenAIVqa(spec, settings, openai_client(MISSING_KEY, max_retries=max_retries, timeout=timeout))
