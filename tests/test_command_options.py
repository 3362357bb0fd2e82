"""The options a run was started with, kept in its record: what they are stored as, and the resume of a run that
kept none. (Each study's command typed again with ``--resume`` is tested beside that study.)"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import pytest

from auditor.commands.command_options import as_json
from auditor.core.cache import ContentCache
from auditor.core.store import RunStore
from auditor.records import load_record
from auditor.studies.progress import QuietProgress
from auditor.studies.prompt_audit import PromptAudit, PromptAuditOptions, start_audit
from tests.clitools import run_auditor


class Colour(str, Enum):
    RED = "red"


def test_options_are_kept_as_json_with_credentials_blanked(monkeypatch):
    monkeypatch.setenv("GATEWAY_TOKEN", "s3cr3t-token-value")
    assert as_json(Colour.RED) == "red" and as_json(Path("runs/a b")) == str(Path.cwd() / "runs/a b")
    assert as_json(Path("./x/../prompts.txt")) == as_json(Path("prompts.txt")) == str(Path.cwd() / "prompts.txt")
    assert as_json(("a", "b")) == ["a", "b"] and as_json([]) == []
    assert [as_json(value) for value in (None, True, 3, 0.05)] == [None, True, 3, 0.05]
    assert as_json("https://host/?key=s3cr3t-token-value") == "https://host/?key=***"
    with pytest.raises(TypeError, match="an option of type dict has no JSON form"):
        as_json({"a": 1})


def started_from_python(tmp_path: Path, name: str) -> PromptAudit:
    """A prompt audit of two images of "a photo of a nurse" started (not run) from Python: its record keeps no
    command line."""
    options = PromptAuditOptions(
        prompt="a photo of a nurse", llm="offline", t2i="diffusers:nobody/model", vqa="blip2:nobody/vqa",
        embedder=None, images=2,
    )  # fmt: skip
    audit = start_audit(options, RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite"), QuietProgress(),
                        name)  # fmt: skip
    audit.cache.close()
    return audit


def test_a_run_started_from_python_kept_no_options_so_any_given_again_is_refused(tmp_path):
    audit = started_from_python(tmp_path, "py")
    before = (audit.run_dir / "record.json").read_bytes()
    assert load_record(audit.run_dir / "record.json").command_options is None

    result = run_auditor("prompt", "a photo of a nurse", "--images", "2", "--resume", "py", process=True)
    assert result.returncode == 2 and result.stderr.strip() == (
        "error: --resume continues a run with its own settings; PROMPT, --images cannot change them (only "
        "--allow-partial-weights, --device, --embedder, --executor, --json, --quiet, --ray-address, --runs-dir, --t2i, "
        "--vqa, --vqa-concurrency may be given: the run kept no record of the options it was started with)"
    )
    assert (audit.run_dir / "record.json").read_bytes() == before


def test_an_option_newer_than_the_runs_record_is_named_so(tmp_path):
    """A record from before an option existed holds no value for it: given on a resume, it is refused as such."""
    audit = started_from_python(tmp_path, "old")
    audit.record.command_options = {"text": "a photo of a nurse", "images": 2}
    audit.save()

    same = run_auditor("prompt", "a photo of a nurse", "--images", "2", "--negative-prompt", "blurry", "--resume",
                       "old")  # fmt: skip
    assert same.returncode == 2 and same.stderr.strip().startswith(
        "error: --resume continues a run with its own settings; --negative-prompt blurry (the run recorded no such "
        "option) cannot change them (only --allow-partial-weights"
    )
