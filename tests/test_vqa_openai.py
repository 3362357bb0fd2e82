"""``--vqa openai:<model>``: VQA through an OpenAI-compatible vision chat API, against the fake server.

The fake server answers from the image each request carries (its mean colour), so these
tests see the PNG reach the server and each answer come back to its (image, question).
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageStat

from auditor.core.errors import AuditorError, BackendError
from auditor.core.openai_api import HTTP_RETRIES, public_url
from auditor.perception.openai_vqa import (
    CAPTION_INSTRUCTIONS,
    INSTRUCTIONS,
    MISSING_KEY,
)
from auditor.perception.registry import VQA_BACKENDS
from auditor.records import PerceptionSettings, load_record
from tests.clitools import run_auditor
from tests.fake_openai import (
    FAKE_API_KEY,
    PNG_DATA_URL,
    colour_name,
    http_error,
    png_base64,
    read_vision_request,
)

GENDER = "What is the gender (male, female, other) of the person in the image?"
SETTING = "What is the setting of the image?"
CAPTION = "Describe the image."
QUESTIONS = [GENDER, SETTING, CAPTION]
TAGS = {GENDER: "gender", SETTING: "setting", CAPTION: "caption"}
COLOURS = {"red": (210, 20, 30), "green": (15, 190, 40), "blue": (20, 30, 220)}
SETTINGS = PerceptionSettings(max_new_tokens=5, caption_max_new_tokens=30, concurrency=4)
PROMPT = "a photo of a pharmacist"


def colour_and_question(rgb, question: str, body: dict) -> str:
    """A reply naming the image's colour and which question was asked, with an explanation below it."""
    return f"  {colour_name(rgb)} {TAGS[question]}\nThe image is mostly {colour_name(rgb)}."


def solid(name: str, size: tuple[int, int] = (12, 10)) -> Image.Image:
    return Image.new("RGB", size, COLOURS[name])


def load(settings: PerceptionSettings = SETTINGS, spec: str = "openai:gpt-4o-mini"):
    return VQA_BACKENDS.load(spec, settings=settings)


def decoded_image(request) -> Image.Image:
    url = request.json["messages"][1]["content"][0]["image_url"]["url"]
    assert url.startswith(PNG_DATA_URL)
    with Image.open(io.BytesIO(base64.b64decode(url[len(PNG_DATA_URL) :]))) as image:
        assert image.format == "PNG"
        return image.convert("RGB")


def test_each_image_and_question_is_one_request_answered_from_its_image(fake_openai):
    fake_openai.answer_from_images(colour_and_question)
    names = ["red", "blue", "green"]
    vqa = load()
    answers = vqa.answer([solid(name) for name in names], QUESTIONS, caption_question=CAPTION)

    assert answers == [[f"{name} {TAGS[q]}" for q in QUESTIONS] for name in names]  # first line, trimmed
    requests = fake_openai.chat_requests()
    assert len(requests) == len(names) * len(QUESTIONS)
    seen = sorted((colour_name(read_vision_request(r.json)[0]), read_vision_request(r.json)[1]) for r in requests)
    assert seen == sorted((name, q) for name in names for q in QUESTIONS)
    for request in requests:
        body = request.json
        assert body["model"] == "gpt-4o-mini" and body["temperature"] == 0
        assert request.headers["authorization"] == f"Bearer {FAKE_API_KEY}"
        assert decoded_image(request).getpixel((0, 0)) == COLOURS[colour_name(read_vision_request(body)[0])]
        assert decoded_image(request).size == (12, 10)  # the pixels themselves, not a thumbnail


def test_short_answer_and_caption_instructions_and_budgets(fake_openai):
    fake_openai.answer_from_images(colour_and_question)
    vqa = load()
    vqa.answer([solid("red")], QUESTIONS, caption_question=CAPTION)
    by_question = {read_vision_request(r.json)[1]: r.json for r in fake_openai.chat_requests()}
    for question in (GENDER, SETTING):
        assert by_question[question]["messages"][0] == {"role": "system", "content": INSTRUCTIONS}
        assert by_question[question]["max_tokens"] == 5
    assert by_question[CAPTION]["messages"][0] == {"role": "system", "content": CAPTION_INSTRUCTIONS}
    assert by_question[CAPTION]["max_tokens"] == 30
    user = by_question[GENDER]["messages"][1]
    assert user["role"] == "user" and user["content"][1] == {"type": "text", "text": GENDER}

    # Without a caption question every question gets the short-answer budget.
    fake_openai.requests.clear()
    vqa.answer([solid("red")], [CAPTION])
    assert fake_openai.chat_requests()[0].json["max_tokens"] == 5


def test_settings_are_recorded_with_defaults_filled_in(fake_openai):
    vqa = load()
    assert vqa.settings.instructions == INSTRUCTIONS and vqa.settings.caption_instructions == CAPTION_INSTRUCTIONS
    assert (vqa.settings.temperature, vqa.settings.concurrency, vqa.settings.max_new_tokens) == (0.0, 4, 5)
    ref = vqa.ref
    assert (ref.spec, ref.backend, ref.model_id, ref.service) == (
        "openai:gpt-4o-mini", "openai", "gpt-4o-mini", fake_openai.base_url
    )  # fmt: skip
    assert ref.dtype is None and ref.device is None and ref.fingerprint
    own = load(SETTINGS.model_copy(update={"instructions": "Answer in one word."}))
    assert own.settings.instructions == "Answer in one word."
    assert own.settings.caption_instructions == CAPTION_INSTRUCTIONS


@pytest.mark.parametrize(
    "url, public",
    [
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("http://localhost:8000/v1/", "http://localhost:8000/v1"),
        (f"https://user:{FAKE_API_KEY}@proxy.example:8443/v1?api-key={FAKE_API_KEY}#x", "https://proxy.example:8443/v1"),
        ("http://[::1]:11434/v1", "http://[::1]:11434/v1"),
    ],
)
def test_the_recorded_server_url_keeps_no_credentials(url, public):
    assert public_url(url) == public


def test_fingerprint_follows_what_changes_answers_and_not_the_concurrency(fake_openai, monkeypatch):
    base = load().cache_fingerprint()
    assert load().cache_fingerprint() == base
    assert load(SETTINGS.model_copy(update={"concurrency": 1, "batch_size": 2})).cache_fingerprint() == base
    for change in (
        {"instructions": "Answer in one word."},
        {"caption_instructions": "Describe it."},
        {"max_new_tokens": 6},
        {"caption_max_new_tokens": 31},
        {"temperature": 0.5},
    ):
        assert load(SETTINGS.model_copy(update=change)).cache_fingerprint() != base, change
    assert load(spec="openai:gpt-4o").cache_fingerprint() != base
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert load().cache_fingerprint() != base


def test_requests_run_concurrently_up_to_the_limit(fake_openai):
    fake_openai.answer_from_images(delay=0.2)
    names = ["red", "green", "blue"] * 2
    answers = load().answer([solid(name) for name in names], [GENDER, SETTING])
    assert answers == [[name, name] for name in names]
    assert 2 <= fake_openai.max_in_flight <= 4

    fake_openai.max_in_flight = 0
    fake_openai.answer_from_images(delay=0.02)
    load(SETTINGS.model_copy(update={"concurrency": 1})).answer([solid("red"), solid("blue")], [GENDER, SETTING])
    assert fake_openai.max_in_flight == 1


def test_429_and_500_are_retried_then_answered(fake_openai):
    fake_openai.chat_replies(http_error(429, retry_after_ms=5), http_error(500, retry_after_ms=5))
    fake_openai.answer_from_images()
    vqa = load(SETTINGS.model_copy(update={"concurrency": 1}))
    assert vqa.answer([solid("blue")], [GENDER]) == [["blue"]]
    assert len(fake_openai.chat_requests()) == 3


def test_persistent_failure_is_bounded_one_line_and_sends_nothing_more(fake_openai):
    fake_openai.chat_replies(*[http_error(503, "overloaded", retry_after_ms=5)] * (HTTP_RETRIES + 1))
    fake_openai.answer_from_images()
    vqa = load(SETTINGS.model_copy(update={"concurrency": 1}))
    with pytest.raises(BackendError) as caught:
        vqa.answer([solid("red"), solid("blue")], QUESTIONS, caption_question=CAPTION)
    message = str(caught.value)
    assert message == f"openai:gpt-4o-mini: HTTP 503 from {fake_openai.base_url} after {HTTP_RETRIES + 1} tries: overloaded"
    # The failing pair's tries only: the five pairs still queued were never sent.
    assert len(fake_openai.chat_requests()) == HTTP_RETRIES + 1
    assert FAKE_API_KEY not in message


def test_bad_request_is_not_retried(fake_openai):
    fake_openai.chat_replies(http_error(400, "image_url is not supported by this model", error_type="invalid_request_error"))
    with pytest.raises(BackendError, match="HTTP 400 .* image_url is not supported"):
        load().answer([solid("red")], [GENDER])
    assert len(fake_openai.chat_requests()) == 1


def test_a_reply_echoing_the_api_key_is_redacted(fake_openai):
    fake_openai.chat_replies(f"echo: Bearer {FAKE_API_KEY}")
    (answer,) = load().answer([solid("red")], [GENDER])[0]
    assert FAKE_API_KEY not in answer and answer.startswith("echo: Bearer ")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"choices": "nope"}, "has no choices"),
        ({"choices": []}, "has no choices"),
        ({"id": "x"}, "has no choices"),
        ({"choices": [{"index": 0}]}, "is not a chat completion"),
        ({"choices": [{"message": {"content": ["a", "list"]}}]}, "is not a chat completion"),
    ],
)
def test_a_malformed_reply_is_one_line_naming_the_server(fake_openai, body, message):
    fake_openai.chat_replies((200, body))
    with pytest.raises(BackendError) as caught:
        load().answer([solid("red")], [GENDER])
    assert str(caught.value) == f"openai:gpt-4o-mini: the reply from {fake_openai.base_url} {message}" + (
        " (no message text)" if "chat completion" in message else ""
    )


def test_missing_key_or_model_is_one_line(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(AuditorError) as caught:
        load()
    assert str(caught.value) == MISSING_KEY and "\n" not in MISSING_KEY
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with pytest.raises(AuditorError, match="needs a model: --vqa openai:<model>"):
        load(spec="openai")


# ---------------------------------------------------------------------- auditor prompt


def openai_audit_args(images: int = 2) -> list[str]:
    return [
        "--llm", "offline",
        "--t2i", "openai:dall-e-3",
        "--vqa", "openai:gpt-4o-mini",
        "--embedder", "none",
        "--images", str(images),
        "--max-axes", "1",
        "--max-counterfactuals", "2",
    ]  # fmt: skip


def script_images(fake, count: int) -> None:
    """``count`` different solid images, cycling through red, green and blue (identical ones would be asked once)."""
    rgb = list(COLOURS.values())
    fake.image_replies(*[png_base64(rgb=tuple(c + i for c in rgb[i % 3])) for i in range(count)])


def test_prompt_audit_with_an_openai_vqa_records_answers_from_the_images(fake_openai, tmp_path):
    script_images(fake_openai, 6)  # the prompt and two counterfactuals, two images each
    fake_openai.answer_from_images()
    code = (
        "import sys\n"
        "from auditor.cli import main\n"
        f"sys.argv = ['auditor', 'prompt', {PROMPT!r}, *{openai_audit_args()!r}, '--vqa-concurrency', '3', "
        "'--quiet', '--name', 'api']\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "print('TORCH', 'torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "TORCH False" in result.stdout  # an openai: VQA (and Images API) audit never imports torch

    run_dir = tmp_path / "runs" / "api"
    record = load_record(run_dir / "record.json")
    assert record.status == "completed" and record.scores is not None
    axis = record.plan.axes[0]
    questions = {axis.question, record.plan.caption_question}
    assert len(fake_openai.chat_requests()) == 6 * len(questions)
    for prompt_set in record.prompt_sets:
        for image, answers in zip(prompt_set.images, record.answers[prompt_set.prompt_id], strict=True):
            with Image.open(run_dir / image.file) as picture:
                colour = colour_name(picture.convert("RGB").getpixel((0, 0)))
            assert answers.image_index == image.index
            assert answers.answers == {axis.name: colour}
            assert answers.caption == colour
    vqa = record.config.vqa
    assert (vqa.spec, vqa.backend, vqa.model_id, vqa.service) == (
        "openai:gpt-4o-mini", "openai", "gpt-4o-mini", fake_openai.base_url
    )  # fmt: skip
    perception = record.config.perception
    assert (perception.concurrency, perception.temperature) == (3, 0.0)
    assert (perception.instructions, perception.caption_instructions) == (INSTRUCTIONS, CAPTION_INSTRUCTIONS)
    for path in run_dir.rglob("*"):
        if path.is_file() and path.suffix in {".json", ".html"}:
            assert FAKE_API_KEY not in path.read_text(encoding="utf-8"), f"API key leaked into {path.name}"

    # The same audit again: every image and answer comes from the cache, nothing is asked.
    fake_openai.requests.clear()
    again = run_auditor("prompt", PROMPT, *openai_audit_args(), "--quiet", "--name", "again")
    assert again.returncode == 0, again.stderr
    assert fake_openai.requests == []
    timings = {t.stage: t for t in load_record(tmp_path / "runs" / "again" / "record.json").timings}
    assert (timings["perceive"].computed, timings["perceive"].cached) == (0, 6)

    # --seed asks for what an Images API cannot do: said once, and the images are the same ones (by position).
    unused = "--seed is not used: openai:dall-e-3 takes no seed, so image i of each prompt set is its i-th draw"
    seeded = run_auditor("prompt", PROMPT, *openai_audit_args(), "--seed", "5", "--name", "seeded")
    assert seeded.returncode == 0, seeded.stderr
    assert " ".join(seeded.stderr.split()).count(unused) == 1 and fake_openai.requests == []
    default = run_auditor("prompt", PROMPT, *openai_audit_args(), "--name", "default")
    assert default.returncode == 0 and "--seed is not used" not in default.stderr


def test_prompt_audit_with_tiny_diffusion_images_and_an_openai_vqa(tiny_models, fake_openai, tmp_path):
    fake_openai.answer_from_images()
    args = openai_audit_args(images=1)
    args[args.index("--t2i") + 1] = f"diffusers:{tiny_models.t2i}"
    result = run_auditor("prompt", PROMPT, *args, "--steps", "2", "--json", "--name", "tiny")
    assert result.returncode == 0, result.stderr
    run_dir = Path(json.loads(result.stdout)["run_dir"])
    record = load_record(run_dir / "record.json")
    assert len(fake_openai.chat_requests()) == len(record.prompt_sets) * 2  # one axis question and the caption
    sent = {decoded_image(request).tobytes() for request in fake_openai.chat_requests()}
    for prompt_set in record.prompt_sets:
        (image,) = prompt_set.images
        with Image.open(run_dir / image.file) as picture:
            pixels = picture.convert("RGB")
        assert pixels.tobytes() in sent  # the saved image itself went to the server
        colour = colour_name(ImageStat.Stat(pixels).mean)
        (answers,) = record.answers[prompt_set.prompt_id]
        assert list(answers.answers.values()) == [colour] and answers.caption == colour


@pytest.mark.parametrize(
    "args, message",
    [
        (["--vqa", "openai:gpt-4o-mini"], "OPENAI_API_KEY is not set: export it to use --vqa openai:<model>"),
        (["--vqa", "openai"], "needs a model: --vqa openai:<model>"),
        (["--vqa-concurrency", "0"], "--vqa-concurrency"),
    ],
)
def test_bad_openai_vqa_input_is_one_line_before_anything_is_generated(tmp_path, args, message):
    result = run_auditor("prompt", PROMPT, "--llm", "offline", *args, process=True)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "runs").exists()


def test_a_failed_perceive_stage_resumes_with_another_concurrency_and_keeps_the_images(fake_openai, tmp_path):
    script_images(fake_openai, 6)
    fake_openai.chat_replies(*[http_error(503, "overloaded", retry_after_ms=5)] * (HTTP_RETRIES + 1))
    fake_openai.answer_from_images()
    failed = run_auditor(
        "prompt", PROMPT, *openai_audit_args(), "--vqa-concurrency", "1", "--quiet", "--name", "r", process=True
    )
    assert failed.returncode == 1
    assert "HTTP 503" in failed.stderr and "--resume" in failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1 and FAKE_API_KEY not in failed.stderr
    record = load_record(tmp_path / "runs" / "r" / "record.json")
    assert record.status == "failed" and record.errors[-1].stage == "perceive"

    resumed = run_auditor("prompt", "--resume", "r", "--vqa-concurrency", "2", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    record = load_record(tmp_path / "runs" / "r" / "record.json")
    assert record.status == "completed" and record.config.perception.concurrency == 2
    assert len(fake_openai.image_requests()) == 6  # no image was generated again
    timings = {t.stage: t for t in record.timings}
    assert (timings["generate"].computed, timings["generate"].cached) == (0, 6)


def test_only_the_questions_each_image_wants_are_sent(fake_openai):
    fake_openai.answer_from_images()
    replies = load().answer([solid("red"), solid("blue")], [GENDER, SETTING], wanted=[[1], []])
    assert replies == [[None, "red"], [None, None]]  # one request: the blue image wants nothing
    assert len(fake_openai.chat_requests()) == 1


def test_answers_back_before_a_failure_travel_with_it(fake_openai):
    from auditor.perception.base import answered_before

    fake_openai.chat_replies("first", "second", http_error(400, "no more", error_type="invalid_request_error"))
    vqa = load(SETTINGS.model_copy(update={"concurrency": 1}))
    with pytest.raises(BackendError) as caught:
        vqa.answer([solid("red"), solid("blue")], [GENDER, SETTING])
    # (image, question) -> answer, in the order they were asked; the fourth pair was never sent
    assert answered_before(caught.value) == {(0, 0): "first", (0, 1): "second"}
    assert len(fake_openai.chat_requests()) == 3


def test_answers_paid_for_before_a_failed_chunk_are_not_asked_again_on_resume(fake_openai, tmp_path):
    """A VQA call is a chunk of many requests: the answers that came back before one failed are cached, so the
    resumed run sends only the requests that had no answer."""
    script_images(fake_openai, 6)  # 6 images x (1 axis question + the caption) = 12 requests
    fake_openai.chat_replies("one", "two", "three", http_error(400, "no more", error_type="invalid_request_error"))
    fake_openai.answer_from_images()
    args = ["prompt", PROMPT, *openai_audit_args(), "--vqa-concurrency", "1", "--quiet", "--name", "r"]
    failed = run_auditor(*args, process=True)
    assert failed.returncode == 1 and "HTTP 400" in failed.stderr
    assert len(fake_openai.chat_requests()) == 4

    resumed = run_auditor("prompt", "--resume", "r", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert len(fake_openai.chat_requests()) == 4 + 12 - 3  # the three pairs answered are not asked again
    record = load_record(tmp_path / "runs" / "r" / "record.json")
    rows = [row for rows in record.answers.values() for row in rows]
    answered = [text for row in rows for text in [*row.answers.values(), row.caption]]
    assert sorted(text for text in answered if text in {"one", "two", "three"}) == ["one", "three", "two"]
