"""Remembered model descriptions (auditor.executors.recall): a run whose results are all cached loads no model
and records what a load would have recorded; a missing result loads the model mid-stage with the same results;
other weights, other settings or a hub id while the hub answers are never recalled."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from auditor.core.cache import ContentCache
from auditor.core.registry import Spec
from auditor.core.store import RunStore
from auditor.core.weights import LoadOptions, weights_identity
from auditor.executors.recall import STAGE as RECALL
from auditor.records import GenerationSettings
from auditor.studies.progress import QuietProgress
from auditor.studies.prompt_audit import resume_audit, start_audit
from tests.test_executors import options

#: Where each kind of tiny model is loaded from in the libraries (what a recalled stage must never call).
LOADERS = {
    "t2i": ("diffusers", "AutoPipelineForText2Image"),
    "vqa": ("transformers", "Blip2ForConditionalGeneration"),
    "embedder": ("transformers", "CLIPModel"),
}


def forbid_loading(monkeypatch, *kinds: str) -> None:
    """Make the libraries' loading of these kinds of model fail, as a test of what a run must not load."""
    import importlib

    for kind in kinds:
        module, name = LOADERS[kind]

        def refuse(*args, kind=kind, **kwargs):
            raise AssertionError(f"the {kind} model was loaded")

        monkeypatch.setattr(getattr(importlib.import_module(module), name), "from_pretrained", refuse)


def audit(tiny_models, tmp_path: Path, name: str, executor: str = "sequential", **changes):
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    try:
        return start_audit(options(tiny_models, executor, **changes), store, cache, QuietProgress(), run_name=name).run()
    finally:
        cache.close()


def counts(record) -> dict[str, tuple[int, int]]:
    return {t.stage: (t.computed, t.cached) for t in record.timings}


@pytest.mark.parametrize("executor", ["sequential", "overlapped"])
def test_a_run_whose_results_are_all_cached_loads_no_model_and_records_what_a_load_would(
    tiny_models, tmp_path, monkeypatch, executor
):
    first = audit(tiny_models, tmp_path, "first", executor)
    forbid_loading(monkeypatch, "t2i", "vqa", "embedder")
    again = audit(tiny_models, tmp_path, "again", executor)
    assert again.status == "completed"
    assert counts(again)["generate"] == (0, 15) and counts(again)["perceive"] == (0, 15)
    assert again.config == first.config  # every model's identity and settings, defaults filled in
    assert (again.prompt_sets, again.answers, again.scores) == (first.prompt_sets, first.answers, first.scores)

    # A completed run resumed (rescored) is asked with its record's settings, the defaults filled in: recalled too.
    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        resumed = resume_audit("first", RunStore(tmp_path / "runs"), cache, QuietProgress()).run()
    finally:
        cache.close()
    assert resumed.config == first.config and resumed.scores == first.scores


def test_a_missing_result_loads_the_model_mid_stage_and_gives_a_fresh_runs_results(tiny_models, tmp_path):
    audit(tiny_models, tmp_path / "shared", "three")
    more = audit(tiny_models, tmp_path / "shared", "four", images=4)  # VQA recalled, then loaded for image 4
    fresh = audit(tiny_models, tmp_path / "fresh", "four", images=4)
    assert counts(more)["generate"] == (5, 15) and counts(more)["perceive"] == (5, 15)
    assert more.config == fresh.config
    assert (more.prompt_sets, more.answers, more.scores) == (fresh.prompt_sets, fresh.answers, fresh.scores)


def test_other_weights_or_other_settings_are_never_recalled(tiny_models, tmp_path, monkeypatch):
    t2i = tmp_path / "t2i"
    shutil.copytree(tiny_models.t2i, t2i)
    first = audit(tiny_models, tmp_path, "first", t2i=f"diffusers:{t2i}")

    config = t2i / "scheduler" / "scheduler_config.json"  # the same weights, another scheduler setting
    config.write_text(json.dumps({**json.loads(config.read_text()), "steps_offset": 0}))
    other = audit(tiny_models, tmp_path, "other", t2i=f"diffusers:{t2i}")
    assert counts(other)["generate"] == (15, 0)  # loaded, and its images keyed on the new files
    assert other.config.t2i.fingerprint != first.config.t2i.fingerprint

    forbid_loading(monkeypatch, "t2i")
    with pytest.raises(AssertionError, match="t2i model was loaded"):  # more steps: not what was remembered
        audit(tiny_models, tmp_path, "steps", t2i=f"diffusers:{t2i}", generation=GenerationSettings(steps=3, batch_size=2))


def test_the_weights_identity_follows_the_files_and_is_unknown_where_a_load_could_fetch_others(tmp_path, monkeypatch):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    options = LoadOptions()

    def identity(target: str) -> str | None:
        return weights_identity(Spec("clip", target), "config.json", options, "transformers", __file__)

    before = identity(str(folder))
    assert before is not None and identity(str(folder)) == before
    (folder / "model.safetensors").write_bytes(b"other weights")
    assert identity(str(folder)) not in (None, before)
    assert identity(str(tmp_path / "absent")) is None  # a load says why
    assert identity("someone/not-cached") is None  # offline (the tests' hub) and not in the hub cache

    monkeypatch.setattr("auditor.core.weights.hub_reachable", lambda: True)
    assert identity("someone/not-cached") is None  # the hub answers: a load may fetch a newer snapshot


def test_every_load_in_process_is_remembered_under_the_settings_asked_and_those_it_ran_with(tiny_models, tmp_path):
    audit(tiny_models, tmp_path, "one")
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        values = [json.loads(value) for (value,) in db.execute("SELECT value FROM cache WHERE stage = ?", (RECALL,))]
    backends = sorted(value["ref"]["backend"] for value in values)
    # Text-to-image was asked with defaults left open (scheduler, guidance, size): a second key, for a resume.
    # The VQA model ran with the settings asked, and the embedder takes none: one key each.
    assert backends == ["blip2", "clip", "diffusers", "diffusers"]
