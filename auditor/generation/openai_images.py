"""``openai:<model>``: the OpenAI Images API (``dall-e-3``, ``gpt-image-1``, ``dall-e-2``).

One request per image (``n=1``: dall-e-3 accepts nothing else, and it keeps a failure to
one image), up to ``batch_size`` requests in flight at once. The SDK retries 408/409/429/
5xx and connection errors a bounded number of times with backoff (honouring the
server's ``Retry-After``); after that, one clear error line. The API takes no seed, so
the backend is unseeded: image i of a prompt is simply the i-th request for it.

A prompt the service refuses under its content policy yields a black image flagged like
a safety-checker hit, so one refusal is recorded and left out of the concepts instead of
ending the audit. ``OPENAI_BASE_URL`` points the client at any compatible server.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from auditor.core.errors import AuditorError, BackendError, StartAgainError
from auditor.core.fingerprint import settings_fingerprint
from auditor.core.openai_api import (
    HTTP_RETRIES,
    REQUEST_TIMEOUT,
    api_key,
    client_base_url,
    openai_client,
    public_url,
    reply_not_json,
    request_failed,
)
from auditor.core.registry import Spec
from auditor.core.weights import LoadOptions
from auditor.generation.base import GeneratedPicture, GenerationItem
from auditor.records import GenerationSettings, ModelRef

MISSING_KEY = (
    "OPENAI_API_KEY is not set: export it to use --t2i openai:<model>, or audit saved images with --t2i folder:<dir>"
)
#: Error code of a prompt refused by the service's safety system.
CONTENT_POLICY = "content_policy_violation"
#: Side of the black stand-in for a refused image when no size was asked for (the API's default).
DEFAULT_SIDE = 1024
#: Settings a hosted API cannot honour; asking for them is an error rather than silently ignored.
_UNSUPPORTED = ("steps", "guidance_scale", "scheduler", "negative_prompt")


class OpenAIImages:
    """An Images API model; unseeded, one request per image."""

    seeded = False

    def __init__(self, spec: Spec, settings: GenerationSettings, client: Any):
        self.model = spec.target
        self.settings = settings
        self._client = client
        self._size = f"{settings.width}x{settings.height}" if settings.width and settings.height else None
        self.ref = ModelRef(
            spec=str(spec),
            backend=spec.prefix,
            model_id=self.model,
            service=public_url(self.base_url),
            fingerprint=settings_fingerprint(None, service=self.base_url, model=self.model),
        )

    @property
    def base_url(self) -> str:
        return client_base_url(self._client)

    def cache_fingerprint(self) -> str:
        return settings_fingerprint(self.ref.fingerprint, size=self._size)

    def generate(self, items: Sequence[GenerationItem]) -> list[GeneratedPicture]:
        workers = max(1, min(len(items), self.settings.batch_size))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-images") as pool:
            return list(pool.map(self._one, [item.prompt for item in items]))

    def _one(self, prompt: str) -> GeneratedPicture:
        import openai
        from PIL import Image

        options: dict[str, Any] = {"model": self.model, "prompt": prompt, "n": 1}
        if self._size:
            options["size"] = self._size
        if not self.model.startswith("gpt-image"):  # gpt-image models always answer in base64 and reject the option
            options["response_format"] = "b64_json"
        try:
            response = self._client.images.generate(**options)
        except openai.OpenAIError as exc:
            if isinstance(exc, openai.BadRequestError) and exc.code == CONTENT_POLICY:
                return GeneratedPicture(image=self._black(), flagged_nsfw=True)
            raise request_failed(self.ref.spec, exc, self._client) from None
        except json.JSONDecodeError:
            raise reply_not_json(self.ref.spec, self.base_url) from None
        if isinstance(response, str):  # a page not labelled JSON: the SDK hands back its text
            raise reply_not_json(self.ref.spec, self.base_url)
        data = response.data[0].b64_json if response.data else None
        if not data:
            raise BackendError(f"{self.ref.spec}: the reply from {self.base_url} holds no base64 image")
        try:
            with Image.open(io.BytesIO(base64.b64decode(data, validate=True))) as image:
                return GeneratedPicture(image=image.convert("RGB"))
        except (binascii.Error, OSError, ValueError) as exc:
            raise BackendError(f"{self.ref.spec}: the reply from {self.base_url} is not an image ({exc})") from None

    def _black(self) -> Any:
        from PIL import Image

        return Image.new("RGB", (self.settings.width or DEFAULT_SIDE, self.settings.height or DEFAULT_SIDE))


def preflight(spec: Spec) -> None:
    """What :func:`load` needs, checked before a run creates anything: a model name and an API key."""
    if not spec.target:
        raise AuditorError("the openai backend needs a model: --t2i openai:dall-e-3 or openai:gpt-image-1")
    api_key(MISSING_KEY)


def check_settings(spec: Spec, settings: GenerationSettings) -> None:
    """Refuse the settings the Images API cannot take. A run keeps its settings, so a resume would stop the same
    way: a new run without them is the way on."""
    asked = [name for name in _UNSUPPORTED if getattr(settings, name) is not None]
    if asked:
        raise StartAgainError(f"--t2i {spec} takes no {', '.join(asked)}: the Images API has no such settings")
    if (settings.width is None) != (settings.height is None):
        raise StartAgainError(f"--t2i {spec} needs both width and height, or neither (the API's default size)")


def load(
    spec: Spec,
    settings: GenerationSettings,
    options: LoadOptions | None = None,
    *,
    max_retries: int = HTTP_RETRIES,
    timeout: float = REQUEST_TIMEOUT,
) -> OpenAIImages:
    """A client for ``spec.target`` (load ``options`` do not apply to a hosted model)."""
    preflight(spec)
    check_settings(spec, settings)
    return OpenAIImages(spec, settings, openai_client(MISSING_KEY, max_retries=max_retries, timeout=timeout))
