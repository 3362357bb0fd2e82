"""``auditor plan`` through the real entry point (a subprocess), against the fake OpenAI server."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from tests.clitools import run_auditor
from tests.fake_openai import FAKE_API_KEY, http_error

PROMPT = "a photo of a pharmacist"
PLAN_JSON = json.dumps(
    {
        "Gender": ["a photo of a male pharmacist", "a photo of a female pharmacist"],
        "Age": ["a photo of a young pharmacist", "a photo of an old pharmacist", "a photo of a middle-aged pharmacist"],
    }
)


def _assert_no_key(*texts: str) -> None:
    for text in texts:
        assert FAKE_API_KEY not in text


def test_plan_with_openai_writes_plan_and_transcript(fake_openai, tmp_path):
    fake_openai.chat_replies("Gender and age.", "Gender: ... Age: ...", f"```json\n{PLAN_JSON}\n```")
    out = tmp_path / "plan"
    result = run_auditor(
        "plan", PROMPT, "--llm", "openai:gpt-4o-mini", "--max-counterfactuals", "2", "--temperature", "0.5",
        "--llm-seed", "9", "--json", "--out", str(out), process=True
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    saved = json.loads((out / "plan.json").read_text())
    transcript = json.loads((out / "transcript.json").read_text())
    assert printed == saved
    assert [a["name"] for a in saved["axes"]] == ["gender", "age"]
    assert saved["axes"][1]["counterfactuals"] == ["a photo of a young pharmacist", "a photo of an old pharmacist"]
    assert (saved["llm"], saved["llm_temperature"], saved["llm_seed"]) == ("openai:gpt-4o-mini", 0.5, 9)
    assert transcript == saved["transcript"] and len(transcript) == 6
    assert fake_openai.chat_requests()[0].headers["authorization"] == f"Bearer {FAKE_API_KEY}"  # sent...
    _assert_no_key(result.stdout, result.stderr, *(p.read_text() for p in out.iterdir()))  # ...never recorded


def test_an_llm_that_never_complies_fails_with_the_transcript_saved(fake_openai, tmp_path):
    fake_openai.chat_replies("Gender.", "Gender: ...", *["Sorry, I cannot produce JSON."] * 5)
    out = tmp_path / "plan"
    result = run_auditor("plan", PROMPT, "--llm", "openai:gpt-4o-mini", "--llm-retries", "1", "--out", str(out), process=True)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: the LLM gave no valid plan in 2 replies to the JSON request (--llm-retries 1)")
    assert line.endswith(f"(transcript saved to {out / 'transcript.json'})")
    transcript = json.loads((out / "transcript.json").read_text())
    assert [m["role"] for m in transcript] == ["user", "assistant"] * 4
    assert transcript[-2]["content"].startswith("That reply could not be used: no JSON object was found in the reply")
    assert not (out / "plan.json").exists()
    assert len(fake_openai.chat_requests()) == 4
    _assert_no_key(result.stdout, result.stderr, (out / "transcript.json").read_text())


def test_http_errors_and_missing_key_are_one_line(fake_openai, tmp_path):
    fake_openai.chat_replies(*[http_error(429, "Rate limit reached", retry_after_ms=5)] * 4)
    out = tmp_path / "plan"
    limited = run_auditor("plan", PROMPT, "--llm", "langchain:openai:gpt-4o-mini", "--out", str(out), process=True)
    assert limited.returncode == 1 and "Traceback" not in limited.stderr
    assert limited.stderr.startswith(
        f"error: langchain:openai:gpt-4o-mini: HTTP 429 from {fake_openai.base_url} after 4 tries: Rate limit reached"
    )
    assert json.loads((out / "transcript.json").read_text())[0]["role"] == "user"

    no_key = run_auditor("plan", PROMPT, "--llm", "openai:gpt-4o-mini", env={"OPENAI_API_KEY": ""}, process=True)
    assert no_key.returncode == 2
    assert no_key.stderr == "error: OPENAI_API_KEY is not set: export it, or use --llm offline\n"
    _assert_no_key(limited.stdout, limited.stderr)


def test_default_planner_without_a_key_is_offline_with_a_notice(tmp_path):
    # an editor that drops every axis but the first, as a person would in --review
    editor = tmp_path / "edit.py"
    editor.write_text(
        textwrap.dedent(
            """
            import sys, yaml
            path = sys.argv[1]
            plan = yaml.safe_load(open(path))
            plan["axes"] = plan["axes"][:1]
            plan["axes"][0]["counterfactuals"].append("a photo of a female pharmacist wearing a hijab")
            yaml.safe_dump(plan, open(path, "w"))
            """
        )
    )
    out = tmp_path / "plan"
    result = run_auditor("plan", PROMPT, "--review", "--out", str(out), env={"EDITOR": f"{sys.executable} {editor}"})
    assert result.returncode == 0, result.stderr
    assert "OPENAI_API_KEY is not set: planning with the offline WordNet planner" in " ".join(result.stderr.split())
    assert "a photo of a female pharmacist" in result.stdout and "gender" in result.stdout
    saved = json.loads((out / "plan.json").read_text())
    assert saved["llm"] == "offline" and saved["edited"] is True
    assert [a["name"] for a in saved["axes"]] == ["gender"]
    assert saved["axes"][0]["counterfactuals"][-1] == "a photo of a female pharmacist wearing a hijab"


def test_an_invalid_edit_in_review_is_bad_input_in_one_line(tmp_path):
    """The person's edit breaks a plan rule: exit 2 (bad input, as any other), not the LLM's invalid plan's 1;
    stdin is no terminal here, so the editor is not opened again, and no plan is written."""
    editor = tmp_path / "edit.py"
    editor.write_text(
        "import sys, yaml\npath = sys.argv[1]\nplan = yaml.safe_load(open(path))\n"
        "plan['axes'][0]['counterfactuals'] = plan['axes'][0]['counterfactuals'][:1]\nyaml.safe_dump(plan, open(path, 'w'))\n"
    )
    out = tmp_path / "plan"
    result = run_auditor(
        "plan", PROMPT, "--llm", "offline", "--review", "--out", str(out),
        env={"EDITOR": f"{sys.executable} {editor}"}, process=True,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("error: invalid plan: axis 'gender' has only 1 counterfactual")
    assert result.stderr.count("\n") == 1 and not out.exists()


def test_bad_input_is_one_line(tmp_path):
    (tmp_path / "prompts.txt").write_text(f"{PROMPT}\n")
    for args, message in [
        (("plan", "", "--llm", "offline"), "error: the prompt is empty"),
        (("plan", "\u200b\x1b", "--llm", "offline"), "error: the prompt is empty (nothing but spaces or invisible"),
        (("plan", "a dog\x1b[2J", "--llm", "offline"), "error: the prompt holds the control character U+001B: give"),
        (("prompt", "a dog\x07", "--llm", "offline"), "error: the prompt holds the control character U+0007: give"),
        (("plan", PROMPT, "--llm", "gpt4"), "error: unknown --llm 'gpt4'"),
        (("plan", PROMPT, "--temperature", "0.7"),
         "error: --temperature sets how an LLM samples, but the planner is the offline one"),
        (("plan", PROMPT, "--llm", "offline", "--llm-seed", "3"), "error: --llm-seed sets how an LLM samples"),
        (("prompt", PROMPT, "--llm", "offline", "--temperature", "0", "--llm-seed", "3"), "error: --temperature and --llm-seed set"),
        (("batch", "prompts.txt", "--llm", "offline", "--temperature", "1"),
         "error: --temperature sets how an LLM samples"),
        (("explore", "--topic", "people at work", "--llm", "offline", "--llm-seed", "1"), "error: --llm-seed sets how"),
        (("plan", PROMPT, "--llm", "openai:gpt-4o", "--temperature", "-1"), "error: Invalid value for '--temperature'"),
        (("prompt", PROMPT, "--llm", "openai:gpt-4o", "--temperature", "2.5"), "error: Invalid value for '--temp"),
    ]:
        result = run_auditor(*args, process=True)
        assert result.returncode == 2 and result.stderr.startswith(message) and "Traceback" not in result.stderr, args
        assert not (Path("runs").exists() and any(Path("runs").iterdir())), args  # nothing created


def test_plan_has_no_seed_option_because_seed_means_image_seeds():
    result = run_auditor("plan", PROMPT, "--llm", "offline", "--seed", "9", process=True)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: No such option: --seed") and "--llm-seed" in line


def test_plan_out_refuses_a_run_folder_before_asking_the_llm(fake_openai, tmp_path):
    """A run's transcript.json is its own (perhaps paid-for) planning conversation: ``plan --out`` there would
    replace it with another prompt's."""
    run = tmp_path / "runs" / "nurse"
    run.mkdir(parents=True)
    (run / "record.json").write_text("{}")
    (run / "transcript.json").write_text("[]")
    refused = run_auditor("plan", PROMPT, "--llm", "openai:gpt-4o-mini", "--out", str(run), process=True)
    assert refused.returncode == 2 and refused.stderr == (
        f"error: --out {run} is a run folder (it holds record.json), whose transcript.json is its own: "
        "give another folder\n"
    )
    assert (run / "transcript.json").read_text() == "[]" and not (run / "plan.json").exists()
    assert fake_openai.chat_requests() == []
