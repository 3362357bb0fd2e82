"""A fake OpenAI-compatible HTTP server on 127.0.0.1, for tests that drive the real openai
SDK (and langchain-openai) over real HTTP. Standard library only, except Pillow for the
vision chat mode.

Script the replies, then point the client at ``server.base_url``::

    def test_something(fake_openai):            # the fixture also sets OPENAI_API_KEY/OPENAI_BASE_URL
        fake_openai.chat_replies("first reply", http_error(429, retry_after_ms=5), '{"gender": [...]}')
        fake_openai.image_replies(png_base64(), http_error(500))
        ...
        assert fake_openai.chat_requests()[0].json["messages"][0]["content"] == "..."

Endpoints:

- ``POST /v1/chat/completions``: each request takes the next scripted chat item: a
  ``str`` (the assistant's content) or an error ``(status, json_body)`` /
  ``(status, json_body, headers)`` (see :func:`http_error`). After
  :meth:`FakeOpenAI.answer_from_images`, a request that finds no scripted item is
  answered from the image it carries: the ``image_url`` data URL is decoded and a rule
  turns the image's mean colour and the question into the reply (by default the colour's
  name, :func:`colour_name`), so a test sees that the image reached the server and the
  answer came back for the right (image, question). Scripted items still go first, so
  errors can be queued in front.
  After :meth:`FakeOpenAI.answer_text_with`, a request without an image and without a
  scripted item is answered by that rule from its body instead (e.g. an LLM proposer whose
  replies depend on what it was asked), so text and vision requests can share the server.
- ``POST /v1/images/generations``: each request takes the next scripted image item: a
  base64 PNG ``str`` (returned ``n`` times, ``n`` from the request), a ``list`` of base64
  PNGs (returned as given), or an error tuple as above. After
  :meth:`FakeOpenAI.images_from_prompts`, a request that finds no scripted item gets a
  16 x 16 image whose colour a rule picks from the prompt (and how many images of that
  prompt came before), so a test can plant a bias that depends on the prompt; its first
  pixel marks the request, so no two such images are the same file.

When a queue is empty the server answers 500 with ``x-should-retry: false`` and says so,
so a test that sends more requests than it scripted fails loudly. Every request is
logged in ``requests`` (method, path, headers, parsed JSON body, monotonic time), so
tests can check what was sent, in which order and how far apart (backoff);
``max_in_flight`` is the most requests the server was handling at once.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import struct
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

import pytest

#: The API key the fixture exports; tests check it never leaks into records or output.
FAKE_API_KEY = "sk-fake-test-key-0123456789abcdef"

ErrorReply = tuple  # (status, json_body) or (status, json_body, headers); a bytes body is sent raw
ChatItem = Union[str, ErrorReply, "Trickle"]
ImageItem = Union[str, list, ErrorReply]
#: (mean RGB of the request's image, the question's text, the request body) -> the assistant's reply.
ImageRule = Callable[[tuple[float, float, float], str, dict], str]
#: (the request's prompt, how many images were made for that prompt before) -> the image's RGB colour.
PromptRule = Callable[[str, int], tuple[int, int, int]]
#: (a chat request body without an image) -> the assistant's reply.
TextRule = Callable[[dict], str]
#: Where the image of a vision chat request is: the data URL's prefix.
PNG_DATA_URL = "data:image/png;base64,"


@dataclass(frozen=True)
class Trickle:
    """A scripted reply that sends its headers, then a byte every ``interval`` seconds for ``seconds`` (a stuck
    proxy): each read of it returns in time, the whole never does."""

    interval: float = 0.05
    seconds: float = 10.0


def http_error(
    status: int, message: str | None = None, *, retry_after_ms: float | None = None, error_type: str | None = None
) -> tuple[int, dict, dict]:
    """A scripted error reply in OpenAI's error format; ``retry_after_ms`` sets the header the SDK
    honours instead of its own (0.5 s and up) backoff, to keep tests fast."""
    body = {
        "error": {
            "message": message or f"fake server error {status}",
            "type": error_type or ("rate_limit_exceeded" if status == 429 else "server_error"),
            "param": None,
            "code": None,
        }
    }
    headers = {"retry-after-ms": str(retry_after_ms)} if retry_after_ms is not None else {}
    return status, body, headers


def png_base64(
    width: int = 8, height: int = 8, rgb: tuple[int, int, int] = (200, 30, 30), mark: int | None = None
) -> str:
    """A solid-colour RGB PNG, base64-encoded, written with zlib (no imaging library needed).

    ``mark`` (0 to 16,777,215) is written into the first pixel, so images of one colour differ
    in their bytes (and so in the content cache) while their mean colour hardly moves.
    """

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgb) * width
    first = row if mark is None else b"\x00" + mark.to_bytes(3, "big") + bytes(rgb) * (width - 1)
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(first + row * (height - 1)))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(png).decode("ascii")


def colour_name(rgb: tuple[float, float, float]) -> str:
    """"red", "green" or "blue": the strongest channel of a mean colour."""
    return ("red", "green", "blue")[max(range(3), key=lambda channel: rgb[channel])]


def _colour_reply(rgb: tuple[float, float, float], question: str, body: dict) -> str:
    return colour_name(rgb)


def read_vision_request(body: dict) -> tuple[tuple[float, float, float], str]:
    """The mean RGB of the one PNG data-URL image in a chat request's user turn, and its question text.

    Raises ValueError saying what is missing or broken, which the server returns as a 400.
    """
    from PIL import Image, ImageStat

    user = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    parts = user[-1]["content"] if user and isinstance(user[-1].get("content"), list) else []
    urls = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
    texts = [p["text"] for p in parts if p.get("type") == "text"]
    if len(urls) != 1 or len(texts) != 1:
        raise ValueError(f"expected one image_url part and one text part, got {len(urls)} and {len(texts)}")
    if not urls[0].startswith(PNG_DATA_URL):
        raise ValueError(f"the image is not a base64 PNG data URL: {urls[0][:40]!r}")
    try:
        with Image.open(io.BytesIO(base64.b64decode(urls[0][len(PNG_DATA_URL) :], validate=True))) as image:
            if image.format != "PNG":
                raise ValueError(f"the data URL holds a {image.format} image, not a PNG")
            mean = ImageStat.Stat(image.convert("RGB")).mean
    except (binascii.Error, OSError) as exc:
        raise ValueError(f"the data URL is not a readable image: {exc}") from None
    return (mean[0], mean[1], mean[2]), texts[0]


def _has_image(body: dict) -> bool:
    """Whether a chat request's messages carry an ``image_url`` part."""
    return any(
        isinstance(part, dict) and part.get("type") == "image_url"
        for message in body.get("messages") or []
        if isinstance(message.get("content"), list)
        for part in message["content"]
    )


@dataclass
class ReceivedRequest:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    json: Any
    time: float = field(default_factory=time.monotonic)


class FakeOpenAI:
    """The server: scripted reply queues, a request log, and its base URL."""

    def __init__(self) -> None:
        self._chat: deque[ChatItem] = deque()
        self._images: deque[ImageItem] = deque()
        self._lock = threading.Lock()
        self.requests: list[ReceivedRequest] = []
        self._image_rule: ImageRule | None = None
        self._text_rule: TextRule | None = None
        self._prompt_rule: PromptRule | None = None
        #: Images made from ``images_from_prompts`` per prompt.
        self.images_per_prompt: dict[str, int] = {}
        self._delay = 0.0
        self._in_flight = 0
        #: The most requests the server was handling at the same time.
        self.max_in_flight = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def env(self, api_key: str = FAKE_API_KEY) -> dict[str, str]:
        """Environment variables that point the openai SDK at this server."""
        return {"OPENAI_API_KEY": api_key, "OPENAI_BASE_URL": self.base_url}

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def chat_replies(self, *items: ChatItem) -> None:
        """Queue replies for POST /v1/chat/completions, one per request, in order."""
        with self._lock:
            self._chat.extend(items)

    def image_replies(self, *items: ImageItem) -> None:
        """Queue replies for POST /v1/images/generations, one per request, in order."""
        with self._lock:
            self._images.extend(items)

    def answer_from_images(self, rule: ImageRule = _colour_reply, delay: float = 0.0) -> None:
        """Answer chat requests with no scripted reply from their image (see the module docstring).

        ``delay`` seconds pass before each reply, so concurrent clients overlap measurably.
        """
        with self._lock:
            self._image_rule, self._delay = rule, delay

    def answer_text_with(self, rule: TextRule) -> None:
        """Answer chat requests that carry no image and find no scripted reply with ``rule(body)``."""
        with self._lock:
            self._text_rule = rule

    def images_from_prompts(self, rule: PromptRule) -> None:
        """Answer image requests with no scripted reply by a solid image of ``rule(prompt, made before)``'s colour."""
        with self._lock:
            self._prompt_rule = rule

    def _image_for(self, payload: dict) -> str:
        """A 16 x 16 image of the rule's colour, its first pixel marking the request (every image differs)."""
        prompt = str(payload.get("prompt", ""))
        with self._lock:
            made = self.images_per_prompt.get(prompt, 0)
            self.images_per_prompt[prompt] = made + 1
            mark = len(self.requests)
            rule = self._prompt_rule
        return png_base64(16, 16, rgb=rule(prompt, made), mark=mark)

    def chat_requests(self) -> list[ReceivedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def image_requests(self) -> list[ReceivedRequest]:
        return [r for r in self.requests if r.path.endswith("/images/generations")]

    @property
    def pending_chat(self) -> int:
        """Scripted chat replies not used yet."""
        return len(self._chat)

    def _next(self, queue: deque) -> Any:
        with self._lock:
            return queue.popleft() if queue else None


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # TCP_NODELAY: the headers and the body go out as two small writes, and with Nagle's algorithm the body
        # waited for the client's delayed ACK, 40 ms a request (44 ms -> 2.6 ms per VQA call, measured side by side).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                payload = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                payload = None
            headers = {name.lower(): value for name, value in self.headers.items()}
            with fake._lock:
                fake.requests.append(ReceivedRequest("POST", self.path, headers, payload))
                fake._in_flight += 1
                fake.max_in_flight = max(fake.max_in_flight, fake._in_flight)
            try:
                self._route(payload)
            finally:
                with fake._lock:
                    fake._in_flight -= 1

        def _route(self, payload: Any) -> None:
            if self.path.endswith("/chat/completions"):
                item = fake._next(fake._chat)
                if item is None and fake._text_rule is not None and not _has_image(payload or {}):
                    item = fake._text_rule(payload or {})
                if item is None and fake._image_rule is not None:
                    item = self._from_image(payload or {})
                self._answer(item, payload, self._chat_body)
            elif self.path.endswith("/images/generations"):
                item = fake._next(fake._images)
                if item is None and fake._prompt_rule is not None:
                    item = fake._image_for(payload or {})
                self._answer(item, payload, self._images_body)
            else:
                self._send(404, {"error": {"message": f"fake server: no route {self.path}", "type": "not_found"}})

        @staticmethod
        def _from_image(payload: dict) -> ChatItem:
            """The image rule's reply to this request, or a 400 saying why its image could not be read."""
            time.sleep(fake._delay)
            try:
                rgb, question = read_vision_request(payload)
            except ValueError as exc:
                return 400, {"error": {"message": f"fake server: {exc}", "type": "invalid_request_error"}}
            return fake._image_rule(rgb, question, payload)

        def _answer(self, item: Any, payload: Any, body_for: Any) -> None:
            if isinstance(item, Trickle):
                self._trickle(item)
            elif item is None:
                message = f"fake server: no scripted reply left for {self.path}"
                self._send(500, {"error": {"message": message, "type": "server_error"}}, {"x-should-retry": "false"})
            elif isinstance(item, tuple):
                status, body, *rest = item
                self._send(status, body, rest[0] if rest else {})
            else:
                self._send(200, body_for(item, payload or {}))

        @staticmethod
        def _chat_body(content: str, payload: dict) -> dict:
            return {
                "id": f"chatcmpl-fake-{len(fake.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": payload.get("model", "fake-model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }

        @staticmethod
        def _images_body(item: str | list, payload: dict) -> dict:
            images = item if isinstance(item, list) else [item] * int(payload.get("n") or 1)
            return {"created": int(time.time()), "data": [{"b64_json": image} for image in images]}

        def _trickle(self, item: Trickle) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(1 + int(item.seconds / item.interval)))
            self.end_headers()
            try:
                for _ in range(int(item.seconds / item.interval)):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(item.interval)
            except OSError:  # the client gave up
                return

        def _send(self, status: int, body: dict | bytes, headers: dict | None = None) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")  # bytes: sent as they are
            self.send_response(status)
            if "content-type" not in {name.lower() for name in headers or {}}:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


@pytest.fixture
def fake_openai(monkeypatch) -> FakeOpenAI:
    """A running fake server; OPENAI_API_KEY and OPENAI_BASE_URL point at it for the test."""
    import auditor.planning.llm

    server = FakeOpenAI().start()
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    # a new server: nothing this process learnt of an earlier one on the same port applies
    monkeypatch.setattr(auditor.planning.llm, "_WITHOUT_JSON_MODE", set())
    yield server
    server.stop()
