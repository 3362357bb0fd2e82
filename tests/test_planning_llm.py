"""The TIBET chain through the real openai SDK and langchain-openai against the fake server.

Reply shapes follow what real LLMs sent in the paper's Figures 12-17: JSON in prose and
code fences, wrapper keys, lists of objects, broken JSON, prose lists.
"""

from __future__ import annotations

import base64
import json

import pytest

from auditor.core.errors import AuditorError, BackendError, InvalidPlanError
from auditor.planning import LLM_BACKENDS, check_llm_spec, make_plan, transcript_of
from auditor.planning.extract import snake_case
from auditor.planning.llm import HTTP_RETRIES
from tests.fake_openai import FAKE_API_KEY, http_error
from tests.test_planning_extract import PROSE_REPLIES

PROMPT = "Two Indian Astronauts having Indian Buffet on Mars"
TURN1_REPLY = (
    'The prompt "Two Indian Astronauts having Indian Buffet on Mars" can introduce biases.\n'
    "1. Nationality Bias: the prompt mentions Indian astronauts.\n2. Gender Bias: the gender is not given."
)
TURN2_REPLY = "Nationality:\n* Two American Astronauts having Indian Buffet on Mars\nGender:\n* Two Female Astronauts ..."
NATIONALITY = ["Two American Astronauts having Indian Buffet on Mars", "Two Chinese Astronauts having Indian Buffet on Mars"]
GENDER = ["Two Female Astronauts having Indian Buffet on Mars", "Two Male Astronauts having Indian Buffet on Mars"]
CLEAN = json.dumps({"Nationality": NATIONALITY, "Gender": GENDER})


def _script(fake, *final_replies) -> None:
    fake.chat_replies(TURN1_REPLY, TURN2_REPLY, *final_replies)


def _axes(plan) -> dict[str, list[str]]:
    return {axis.name: axis.counterfactuals for axis in plan.axes}


def test_clean_reply_is_one_conversation_of_three_turns(fake_openai):
    _script(fake_openai, CLEAN)
    plan = make_plan(PROMPT, "openai:gpt-4o-mini", temperature=0.3, seed=11)

    assert _axes(plan) == {"nationality": NATIONALITY, "gender": GENDER}
    assert plan.axes[1].question == "What is the gender (male, female, other) of the person in the image?"
    assert plan.axes[0].question == "What is the nationality of the person in the image?"
    assert (plan.llm, plan.llm_temperature, plan.llm_seed, plan.attempts) == ("openai:gpt-4o-mini", 0.3, 11, 1)
    assert plan.caption_question == "Describe the image."
    requests = fake_openai.chat_requests()
    assert len(requests) == 3
    first, _, last = (r.json for r in requests)
    assert first["messages"] == [
        {
            "role": "user",
            "content": f"For the image generation prompt, {PROMPT}, what are some of the axes where the prompt "
            "may lead to biases in the image?",
        }
    ]
    # one conversation: the last request carries both earlier turns and replies
    assert [m["role"] for m in last["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert last["messages"][3]["content"] == TURN2_REPLY
    assert last["messages"][4]["content"].startswith("Convert these to a json dictionary")
    assert last["response_format"] == {"type": "json_object"} and "response_format" not in first
    assert all(r.json["temperature"] == 0.3 and r.json["seed"] == 11 and r.json["model"] == "gpt-4o-mini" for r in requests)
    assert requests[0].headers["authorization"] == f"Bearer {FAKE_API_KEY}"
    assert [m.role for m in plan.transcript] == ["user", "assistant"] * 3
    assert plan.transcript[-1].content == CLEAN
    assert FAKE_API_KEY not in plan.model_dump_json()


REPLY_SHAPES = {
    "prose and a json fence": f"Sure! Here is the JSON you asked for:\n```json\n{CLEAN}\n```\nLet me know if you need more.",
    "bare fence and trailing prose": f"```\n{CLEAN}\n```\nThese cover nationality and gender.",
    "axes wrapper": json.dumps({"prompt": PROMPT, "axes": {"Nationality": NATIONALITY, "Gender": GENDER}}),
    "Counterfactual Prompts wrapper": json.dumps({"Counterfactual Prompts": {"Nationality": NATIONALITY, "Gender": GENDER}}),
    "biases wrapper": json.dumps({"biases": {"Nationality Bias": NATIONALITY, "Gender Bias": GENDER}}),
    "prompt_biases list of objects": json.dumps(
        {
            "prompt_biases": [
                {"axis": "Nationality", "counterfactuals": [{"prompt": p} for p in NATIONALITY]},
                {"axis": "Gender", "counterfactuals": [{"prompt": p} for p in GENDER]},
            ]
        }
    ),
    "list of single-key objects": json.dumps([{"Nationality": NATIONALITY}, {"Gender": GENDER}]),
    "one object per counterfactual": json.dumps(
        [{"bias": "nationality", "counterfactual": p} for p in NATIONALITY]
        + [{"bias": "gender", "counterfactual": p} for p in GENDER]
    ),
    "the prompt as the wrapper key": json.dumps({PROMPT: {"Nationality": NATIONALITY, "Gender": GENDER}}),
    "single quotes and trailing commas": "{'Nationality': ['%s', '%s',], 'Gender': ['%s', '%s',],}"
    % (*NATIONALITY, *GENDER),
    "cut off before the end": CLEAN[:-3],
    "headed bullet list instead of JSON": "Nationality:\n* %s\n* %s\nGender:\n* %s\n* %s" % (*NATIONALITY, *GENDER),
}


@pytest.mark.parametrize("shape", list(REPLY_SHAPES))
def test_reply_shapes_give_the_same_plan(fake_openai, shape):
    _script(fake_openai, REPLY_SHAPES[shape])
    plan = make_plan(PROMPT, "openai:gpt-4o-mini")
    axes = _axes(plan)
    assert list(axes) in (["nationality", "gender"], ["nationality_bias", "gender_bias"])
    assert list(axes.values()) == [NATIONALITY, GENDER]
    assert plan.attempts == 1 and fake_openai.pending_chat == 0


def test_kinds_come_from_societal_and_incidental_groups(fake_openai):
    reply = {
        "societal_biases": {"Gender": GENDER},
        "incidental_correlations": [
            {
                "name": "Setting",
                "examples": [
                    "Two Indian Astronauts having Indian Buffet on the Moon",
                    "Two Indian Astronauts having Indian Buffet in a spaceship",
                ],
            }
        ],
        "Nationality": {"type": "societal bias", "counterfactuals": NATIONALITY},
    }
    _script(fake_openai, json.dumps(reply))
    plan = make_plan(PROMPT, "openai:gpt-4o-mini")
    assert [(a.name, a.kind) for a in plan.axes] == [("gender", "societal"), ("setting", "incidental"), ("nationality", "societal")]
    assert plan.axes[1].question == "What is the setting of the image?"


def test_tidying_and_caps_keep_the_llms_order(fake_openai):
    reply = {
        "Socioeconomic Status": [
            "  Two Billionaire Astronauts having Indian Buffet on Mars ",
            PROMPT.upper(),  # the original prompt again: dropped
            "two billionaire   astronauts having indian buffet on mars",  # a repeat: dropped
            "Two Middle-Class Astronauts having Indian Buffet on Mars",
            "Two Student Astronauts having Indian Buffet on Mars",
            "",
        ],
        "Gender": GENDER,
        "Nationality": NATIONALITY,
    }
    _script(fake_openai, json.dumps(reply))
    plan = make_plan(PROMPT, "openai:gpt-4o-mini", max_axes=2, max_counterfactuals=2)
    assert _axes(plan) == {
        "socioeconomic_status": [
            "Two Billionaire Astronauts having Indian Buffet on Mars",
            "Two Middle-Class Astronauts having Indian Buffet on Mars",
        ],
        "gender": GENDER,
    }
    assert plan.axes[0].question == "What is the socioeconomic status of the person in the image?"


def test_invalid_json_is_repaired_in_the_same_conversation(fake_openai):
    broken = '{"Nationality": American astronauts, Chinese astronauts}'
    _script(fake_openai, broken, CLEAN)
    plan = make_plan(PROMPT, "openai:gpt-4o-mini")

    assert _axes(plan) == {"nationality": NATIONALITY, "gender": GENDER}
    assert plan.attempts == 2
    requests = [r.json for r in fake_openai.chat_requests()]
    assert len(requests) == 4
    repair_request = requests[3]
    assert repair_request["messages"][:5] == requests[2]["messages"]  # same conversation, continued
    assert repair_request["messages"][5] == {"role": "assistant", "content": broken}
    repair = repair_request["messages"][6]
    assert repair["role"] == "user" and repair["content"].startswith("That reply could not be used: the JSON is malformed")
    assert PROMPT in repair["content"]
    assert repair_request["response_format"] == {"type": "json_object"}
    assert [m.role for m in plan.transcript] == ["user", "assistant"] * 4


def test_a_plan_that_breaks_the_rules_is_sent_back_with_the_reason(fake_openai):
    _script(fake_openai, json.dumps({"Gender": GENDER[:1], "Nationality": NATIONALITY}), CLEAN)
    plan = make_plan(PROMPT, "openai:gpt-4o-mini")
    assert plan.attempts == 2
    repair = fake_openai.chat_requests()[3].json["messages"][6]["content"]
    assert "axis 'gender' has only 1 counterfactual; every axis needs at least two different ones" in repair


def test_an_llm_that_never_complies_fails_after_bounded_repairs(fake_openai):
    refusal = "I'm sorry, but I can't help with that."
    _script(fake_openai, *[refusal] * 10)
    with pytest.raises(InvalidPlanError) as caught:
        make_plan(PROMPT, "openai:gpt-4o-mini", retries=2)
    message = str(caught.value)
    assert "no valid plan in 3 replies to the JSON request (--llm-retries 2)" in message
    assert "no JSON object was found" in message and "\n" not in message
    assert len(fake_openai.chat_requests()) == 2 + 3  # two questions, the JSON request, two repairs
    transcript = transcript_of(caught.value)
    assert [m.role for m in transcript] == ["user", "assistant"] * 5
    assert transcript[-1].content == refusal


def test_zero_retries_means_a_single_json_request(fake_openai):
    _script(fake_openai, "no json here", CLEAN)
    with pytest.raises(InvalidPlanError, match="in 1 reply"):
        make_plan(PROMPT, "openai:gpt-4o-mini", retries=0)
    assert fake_openai.pending_chat == 1


def test_rate_limits_are_retried_with_backoff_then_succeed(fake_openai):
    fake_openai.chat_replies(*[http_error(429, "Rate limit reached", retry_after_ms=40)] * 2, TURN1_REPLY, TURN2_REPLY, CLEAN)
    plan = make_plan(PROMPT, "openai:gpt-4o-mini")
    assert _axes(plan)["gender"] == GENDER
    times = [r.time for r in fake_openai.chat_requests()]
    assert len(times) == 5
    assert times[1] - times[0] >= 0.035 and times[2] - times[1] >= 0.035  # waited before each retry


@pytest.mark.parametrize("status, text", [(429, "Rate limit reached for gpt-4o-mini"), (500, "The server had an error")])
def test_persistent_http_errors_end_in_one_clear_error(fake_openai, status, text):
    fake_openai.chat_replies(*[http_error(status, text, retry_after_ms=5)] * (HTTP_RETRIES + 3))
    with pytest.raises(BackendError) as caught:
        make_plan(PROMPT, "openai:gpt-4o-mini")
    message = str(caught.value)
    assert message == (
        f"openai:gpt-4o-mini: HTTP {status} from {fake_openai.base_url} after {HTTP_RETRIES + 1} tries: {text}"
    )
    assert len(fake_openai.chat_requests()) == HTTP_RETRIES + 1  # bounded
    assert [m.role for m in transcript_of(caught.value)] == ["user"]  # the conversation so far, for saving


def test_each_reply_is_cached_as_it_arrives_so_a_plan_cut_off_sends_only_the_rest(fake_openai, tmp_path):
    """A plan stopped mid-conversation (here a failed request; a kill alike) keeps its answered turns."""
    from auditor.core.cache import ContentCache
    from auditor.planning.turns import TurnCache

    cache = ContentCache(tmp_path / "cache.sqlite")
    announced: list[int] = []  # requests the server had seen when each new one was announced
    turns = TurnCache(cache, lambda: announced.append(len(fake_openai.chat_requests())))
    echoed = f"{TURN1_REPLY} (sent with {FAKE_API_KEY})"
    fake_openai.chat_replies(echoed, http_error(400, "bad request"))
    with pytest.raises(BackendError):
        make_plan(PROMPT, "openai:gpt-4o-mini", seed=11, turns=turns)
    assert len(fake_openai.chat_requests()) == 2 and announced == [0, 1]  # each announced before it was sent

    fake_openai.chat_replies(TURN2_REPLY, CLEAN)
    plan = make_plan(PROMPT, "openai:gpt-4o-mini", seed=11, turns=turns)
    assert _axes(plan) == {"nationality": NATIONALITY, "gender": GENDER}
    requests = fake_openai.chat_requests()
    assert len(requests) == 4 and announced == [0, 1, 2, 3]  # turn 1 replayed: turns 2 and 3 were sent
    assert requests[2].json["messages"] == requests[1].json["messages"]  # the same conversation goes on
    assert [m.content for m in plan.transcript if m.role == "assistant"][1:] == [TURN2_REPLY, CLEAN]
    cache.close()
    assert FAKE_API_KEY.encode() not in (tmp_path / "cache.sqlite").read_bytes()  # the echoed key was not cached

    cache = ContentCache(tmp_path / "cache.sqlite")
    fewer = make_plan(PROMPT, "openai:gpt-4o-mini", seed=11, max_axes=1, turns=TurnCache(cache))
    assert len(fewer.axes) == 1 and len(fake_openai.chat_requests()) == 4  # other limits, the same conversation

    def spent() -> None:
        raise AuditorError("no request left")

    with pytest.raises(AuditorError, match="no request left"):  # another seed, another conversation: refused
        make_plan(PROMPT, "openai:gpt-4o-mini", seed=12, turns=TurnCache(cache, spent))
    assert len(fake_openai.chat_requests()) == 4  # before it was sent
    cache.close()


def test_the_turns_a_plan_would_replay_are_counted_without_sending_anything(fake_openai, tmp_path):
    """What an exploration's budget check reads: how many requests a plan can still need."""
    from auditor.core.cache import ContentCache
    from auditor.studies.planning_stage import PlanRequest, cached_plan, replayable_turns

    cache = ContentCache(tmp_path / "cache.sqlite")
    request = PlanRequest(prompt=PROMPT, llm="openai:gpt-4o-mini", retries=1, seed=5)
    assert replayable_turns(cache, request) == 0
    fake_openai.chat_replies(TURN1_REPLY, http_error(400, "bad request"))
    with pytest.raises(BackendError):
        cached_plan(cache, request)
    assert replayable_turns(cache, request) == 1  # turn 1 answered, turn 2 lost
    fake_openai.chat_replies(TURN2_REPLY, "no json here", CLEAN)  # one repair turn
    cached_plan(cache, request)
    fewer = PlanRequest(prompt=PROMPT, llm="openai:gpt-4o-mini", retries=1, seed=5, max_axes=1)
    assert replayable_turns(cache, fewer) is None  # another plan of the same conversation: nothing to send
    # without the repair turn the replayed conversation ends invalid: that attempt fails without a request
    assert replayable_turns(cache, PlanRequest(prompt=PROMPT, llm="openai:gpt-4o-mini", retries=0, seed=5)) is None
    assert cache.entries("chat-turn") == 4  # and a count forgets nothing
    assert len(fake_openai.chat_requests()) == 5  # the three counts sent nothing
    cache.close()


def test_a_conversation_that_ends_without_a_valid_plan_is_not_replayed(fake_openai, tmp_path):
    """Its replies were a sample that failed: asking again must reach the LLM, not repeat the failure."""
    from auditor.core.cache import ContentCache
    from auditor.planning.turns import STAGE, TurnCache

    cache = ContentCache(tmp_path / "cache.sqlite")
    _script(fake_openai, "no json here")
    with pytest.raises(InvalidPlanError):
        make_plan(PROMPT, "openai:gpt-4o-mini", retries=0, turns=TurnCache(cache))
    assert cache.entries(STAGE) == 0
    _script(fake_openai, CLEAN)
    plan = make_plan(PROMPT, "openai:gpt-4o-mini", retries=0, turns=TurnCache(cache))
    assert _axes(plan)["gender"] == GENDER and len(fake_openai.chat_requests()) == 6  # all three turns asked again
    assert cache.entries(STAGE) == 3
    cache.close()


def test_a_malformed_reply_is_one_clear_error(fake_openai):
    fake_openai.chat_replies((200, {"choices": "nope"}))
    with pytest.raises(BackendError) as caught:
        make_plan(PROMPT, "openai:gpt-4o-mini")
    assert str(caught.value) == f"openai:gpt-4o-mini: the reply from {fake_openai.base_url} has no choices"
    assert len(fake_openai.chat_requests()) == 1


def test_an_api_key_echoed_by_the_server_is_blanked(fake_openai):
    fake_openai.chat_replies(http_error(401, f"Incorrect API key provided: {FAKE_API_KEY}.", error_type="invalid_request_error"))
    with pytest.raises(BackendError) as caught:
        make_plan(PROMPT, "openai:gpt-4o-mini")
    assert FAKE_API_KEY not in str(caught.value)
    assert "HTTP 401" in str(caught.value) and "check OPENAI_API_KEY" in str(caught.value) and "***" in str(caught.value)
    assert len(fake_openai.chat_requests()) == 1  # 401 is not retried


def test_an_api_key_echoed_in_a_reply_never_reaches_the_plan_or_transcript(fake_openai):
    fake_openai.chat_replies(f"Your key {FAKE_API_KEY} works. " + TURN1_REPLY, TURN2_REPLY, CLEAN)
    plan = make_plan(PROMPT, "openai:gpt-4o-mini")
    assert FAKE_API_KEY not in plan.model_dump_json()
    assert "Your key *** works." in plan.transcript[1].content


def test_a_server_without_json_mode_is_asked_again_in_plain_text(fake_openai):
    unsupported = http_error(
        400, "'response_format' of type 'json_object' is not supported with this model", error_type="invalid_request_error"
    )
    _script(fake_openai, unsupported, CLEAN)
    plan = make_plan(PROMPT, "openai:local-model")
    assert _axes(plan)["nationality"] == NATIONALITY
    final, retried = (r.json for r in fake_openai.chat_requests()[2:])
    assert final["response_format"] == {"type": "json_object"} and "response_format" not in retried
    assert final["messages"] == retried["messages"]
    _script(fake_openai, CLEAN)  # the next plan asks this server in plain text at once: no request to learn it
    assert _axes(make_plan(PROMPT, "openai:local-model"))["nationality"] == NATIONALITY
    assert len(fake_openai.chat_requests()) == 4 + 3 and "response_format" not in fake_openai.chat_requests()[-1].json


@pytest.mark.parametrize("case", PROSE_REPLIES, ids=[case["name"] for case in PROSE_REPLIES])
def test_prose_replies_of_a_server_without_json_mode_give_their_exact_plan(fake_openai, case):
    """An open-weight model behind a server without JSON mode answers the JSON turn in prose: the plan holds
    exactly the reply's axes and counterfactuals, first time, with no repair turn."""
    unsupported = http_error(400, "response_format is not supported by this server", error_type="invalid_request_error")
    fake_openai.chat_replies(TURN1_REPLY, TURN2_REPLY, unsupported, case["reply"])
    plan = make_plan(case["prompt"], "openai:llama-3-8b-instruct")
    assert [(axis.name, axis.counterfactuals) for axis in plan.axes] == [
        (snake_case(name), counterfactuals) for name, counterfactuals in case["axes"].items()
    ]
    assert plan.attempts == 1 and fake_openai.pending_chat == 0
    assert "response_format" not in fake_openai.chat_requests()[-1].json
    assert plan.transcript[-1].content == case["reply"]


def test_missing_api_key_is_one_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for spec in ("openai:gpt-4o-mini", "langchain:openai:gpt-4o-mini"):
        with pytest.raises(AuditorError) as caught:
            make_plan(PROMPT, spec)
        assert str(caught.value) == "OPENAI_API_KEY is not set: export it, or use --llm offline"
        assert type(caught.value) is AuditorError


def test_langchain_backend_runs_the_same_chain(fake_openai):
    _script(fake_openai, "```json\n" + json.dumps({"axes": {"Nationality": NATIONALITY, "Gender": GENDER}}) + "\n```")
    plan = make_plan(PROMPT, "langchain:openai:gpt-4o-mini", temperature=0.0, seed=3)
    assert _axes(plan) == {"nationality": NATIONALITY, "gender": GENDER}
    assert (plan.llm, plan.llm_temperature, plan.llm_seed) == ("langchain:openai:gpt-4o-mini", 0.0, 3)
    requests = [r.json for r in fake_openai.chat_requests()]
    assert len(requests) == 3 and requests[2]["response_format"] == {"type": "json_object"}
    assert "response_format" not in requests[0]
    assert all(r["model"] == "gpt-4o-mini" and r["temperature"] == 0.0 and r["seed"] == 3 for r in requests)
    assert len(requests[2]["messages"]) == 5


def test_langchain_repairs_and_reports_http_errors(fake_openai):
    _script(fake_openai, "not json", CLEAN)
    assert make_plan(PROMPT, "langchain:openai:gpt-4o-mini").attempts == 2
    fake_openai.chat_replies(*[http_error(503, "overloaded", retry_after_ms=5)] * (HTTP_RETRIES + 1))
    with pytest.raises(BackendError, match=r"^langchain:openai:gpt-4o-mini: HTTP 503 from .* after 4 tries: overloaded$"):
        make_plan(PROMPT, "langchain:openai:gpt-4o-mini")


def test_langchain_unknown_provider_is_a_clear_error():
    with pytest.raises(AuditorError, match="langchain could not create the model|langchain has no"):
        make_plan(PROMPT, "langchain:no-such-provider:model")


def test_specs_are_checked_without_importing_sdks():
    assert LLM_BACKENDS.prefixes == ["langchain", "offline", "openai"]
    assert check_llm_spec(" OpenAI:gpt-4o-mini ") == "openai:gpt-4o-mini"
    assert check_llm_spec("langchain:anthropic:claude-3-5-haiku-latest") == "langchain:anthropic:claude-3-5-haiku-latest"
    assert check_llm_spec("offline") == "offline"
    for bad, reason in [
        ("gpt-4o", "unknown --llm 'gpt-4o'"),
        ("openai", "needs a model"),
        ("langchain:anthropic", "needs a provider and a model"),
        ("offline:big", "takes no model"),
    ]:
        with pytest.raises(AuditorError, match=reason):
            check_llm_spec(bad)


@pytest.mark.parametrize(
    "limits, option",
    [({"max_axes": 0}, "--max-axes"), ({"max_counterfactuals": 1}, "--max-counterfactuals"), ({"retries": -1}, "--llm-retries")],
)
def test_bad_limits_are_refused_before_any_request(limits, option):
    with pytest.raises(AuditorError, match=option):
        make_plan(PROMPT, "offline", **limits)


def test_fake_server_images_endpoint_speaks_the_openai_images_api(fake_openai):
    """The same fake server serves the OpenAI images backend's tests: base64 PNGs, n copies, errors."""
    import base64

    from openai import BadRequestError, OpenAI

    from tests.fake_openai import png_base64

    red, blue = png_base64(rgb=(255, 0, 0)), png_base64(4, 2, rgb=(0, 0, 255))
    fake_openai.image_replies(red, [red, blue], http_error(400, "Your request was rejected by the safety system."))
    client = OpenAI(max_retries=0)  # key and base URL from the environment the fixture set
    first = client.images.generate(model="gpt-image-1", prompt="a cat", n=2)
    assert [item.b64_json for item in first.data] == [red, red]
    assert base64.b64decode(first.data[0].b64_json).startswith(b"\x89PNG\r\n\x1a\n")
    second = client.images.generate(model="gpt-image-1", prompt="a dog")
    assert [item.b64_json for item in second.data] == [red, blue]
    with pytest.raises(BadRequestError, match="safety system"):
        client.images.generate(model="gpt-image-1", prompt="x")
    requests = fake_openai.image_requests()
    assert [r.json["prompt"] for r in requests] == ["a cat", "a dog", "x"]
    assert requests[0].json["n"] == 2 and requests[0].headers["authorization"] == f"Bearer {FAKE_API_KEY}"


def test_credentials_in_the_base_url_never_reach_an_error_line(fake_openai, monkeypatch):
    """A base URL with a user, password and token query: the error names the server without them, and the
    password and token are blanked wherever the SDK or its HTTP library repeats them (records and reports keep
    the error line). The user name is no secret: "openai" is left, so the spec in the line stays readable."""
    from auditor.core.openai_api import one_line

    secret_url = fake_openai.base_url.replace("http://", "http://openai:pw123pw123@")  # no secret, a common word
    monkeypatch.setenv("OPENAI_BASE_URL", secret_url)
    fake_openai.chat_replies(*[http_error(500, "The server had an error", retry_after_ms=5)] * (HTTP_RETRIES + 1))
    with pytest.raises(BackendError) as caught:
        make_plan(PROMPT, "openai:gpt-4o-mini")
    assert str(caught.value) == (
        f"openai:gpt-4o-mini: HTTP 500 from {fake_openai.base_url} after {HTTP_RETRIES + 1} tries: The server had an error"
    )
    monkeypatch.setenv("OPENAI_BASE_URL", secret_url + "?token=tok987tok987")  # a gateway's token, say
    echoed = one_line(f"connect to {secret_url}?token=tok987tok987 failed")
    assert all(secret not in echoed for secret in ("pw123pw123", "tok987tok987")), echoed
    # the HTTP library turns the URL's password into "Authorization: Basic base64(user:password)"; a server may echo it
    sent = fake_openai.chat_requests()[-1].headers["authorization"]
    assert sent == "Basic " + base64.b64encode(b"openai:pw123pw123").decode()
    assert sent.split()[1] not in one_line(f"HTTP 500: you sent {sent}")


def test_a_reply_that_is_not_json_is_one_line_for_every_openai_backend(fake_openai):
    """A proxy's HTML page with status 200: the SDK raises a JSONDecodeError, no error of its own."""
    from PIL import Image

    from auditor.generation.base import GenerationItem
    from auditor.generation.registry import T2I_BACKENDS
    from auditor.perception.registry import VQA_BACKENDS
    from auditor.records import GenerationSettings, PerceptionSettings

    page = (200, b"<html>502 bad gateway</html>")  # sent as application/json, as a misconfigured proxy may
    html = (200, b"<html>502 bad gateway</html>", {"Content-Type": "text/html"})  # the SDK returns its text
    fake_openai.chat_replies(page, html, page, html)
    fake_openai.image_replies(page, html)
    not_json = f"the reply from {fake_openai.base_url} is not JSON"
    for _ in range(2):
        with pytest.raises(BackendError, match=not_json):
            make_plan(PROMPT, "openai:gpt-4o-mini")
    vqa = VQA_BACKENDS.load("openai:gpt-4o-mini", settings=PerceptionSettings(concurrency=1))
    for _ in range(2):
        with pytest.raises(BackendError, match=not_json):
            vqa.answer([Image.new("RGB", (8, 8))], ["What is the gender of the person?"])
    images = T2I_BACKENDS.load("openai:dall-e-3", settings=GenerationSettings(batch_size=1))
    for _ in range(2):
        with pytest.raises(BackendError, match=not_json):
            images.generate([GenerationItem(PROMPT, 0, 0)])


def test_a_server_that_trickles_its_reply_is_timed_out_and_retried_a_bounded_number_of_times(fake_openai):
    """Each read returns in time, so the HTTP library's own timeout never fires: the deadline is per request."""
    import time

    import openai

    from auditor.core.openai_api import openai_client
    from tests.fake_openai import Trickle

    fake_openai.chat_replies(Trickle(), Trickle())
    client = openai_client("no key", max_retries=1, timeout=0.5)
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert time.monotonic() - started < 5  # two tries of 0.5 s and the SDK's backoff, not the trickle's 10 s
    assert len(fake_openai.chat_requests()) == 2
    fake_openai.chat_replies("an answer")  # a server that answers is unaffected
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "an answer"


def test_requests_go_through_the_proxy_the_environment_names(fake_openai, monkeypatch):
    """The deadline transport sends what the SDK built, through HTTP(S)_PROXY as the SDK's own client would."""
    from auditor.core.openai_api import openai_client

    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    proxy = fake_openai.base_url.removesuffix("/v1")
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://llm.corp.invalid/v1")  # resolvable only through the proxy
    fake_openai.chat_replies("via the proxy")
    reply = openai_client("no key").chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.choices[0].message.content == "via the proxy"
    assert fake_openai.chat_requests()[-1].path == "http://llm.corp.invalid/v1/chat/completions"


def test_a_malformed_base_url_leaves_error_lines_alone(monkeypatch):
    from auditor.core.openai_api import one_line

    monkeypatch.setenv("OPENAI_BASE_URL", "http://[oops/v1")  # urlsplit refuses it
    assert one_line("error: no run 'x'") == "error: no run 'x'"
