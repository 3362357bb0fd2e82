"""Remembered model descriptions (auditor.executors.recall): a run whose results are all cached loads no model
and records what a load would have recorded; a missing result loads the model mid-stage with the same results;
other weights, other settings or a hub id while the hub answers are never recalled."""

from __future__ import annotations

import json
import shutil
import sqlite3
import zlib
from pathlib import Path

import pytest

from auditor.core.cache import ContentCache
from auditor.core.errors import AuditorError
from auditor.core.fingerprint import source_fingerprint
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
        started = start_audit(options(tiny_models, executor, **changes), store, cache, QuietProgress(), run_name=name)
        return started.run()
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


def leaves(value, path: str = "") -> dict[str, object]:
    """A nested dump as path -> leaf value, so two can be compared leaf by leaf."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in leaves(item, f"{path}.{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in leaves(item, f"{path}[{i}]").items()}
    return {path: value}


def test_a_missing_result_loads_the_model_mid_stage_and_gives_a_fresh_runs_results(tiny_models, tmp_path):
    audit(tiny_models, tmp_path / "shared", "three")
    more = audit(tiny_models, tmp_path / "shared", "four", images=4)  # VQA recalled, then loaded for image 4
    fresh = audit(tiny_models, tmp_path / "fresh", "four", images=4)
    assert counts(more)["generate"] == (5, 15) and counts(more)["perceive"] == (5, 15)
    assert more.config == fresh.config
    assert (more.prompt_sets, more.answers) == (fresh.prompt_sets, fresh.answers)
    # The images were embedded in batches of other sizes (15 then 5, against 20): with several threads the
    # embeddings, and the scores from them, may differ in float32's last bits, no more.
    scores, fresh_scores = leaves(more.scores.model_dump()), leaves(fresh.scores.model_dump())
    assert scores.keys() == fresh_scores.keys()
    for path, value in scores.items():
        if isinstance(value, float):
            assert value == pytest.approx(fresh_scores[path], rel=1e-5, abs=1e-6), path
        else:
            assert value == fresh_scores[path], path


def test_other_weights_settings_or_partial_weights_are_never_recalled(tiny_models, tmp_path, monkeypatch):
    t2i = tmp_path / "t2i"
    shutil.copytree(tiny_models.t2i, t2i)
    first = audit(tiny_models, tmp_path, "first", t2i=f"diffusers:{t2i}")

    config = t2i / "scheduler" / "scheduler_config.json"  # the same weights, another scheduler setting
    config.write_text(json.dumps({**json.loads(config.read_text()), "steps_offset": 0}))
    other = audit(tiny_models, tmp_path, "other", t2i=f"diffusers:{t2i}")
    assert counts(other)["generate"] == (15, 0)  # loaded, and its images keyed on the new files
    assert other.config.t2i.fingerprint != first.config.t2i.fingerprint

    forbid_loading(monkeypatch, "t2i")
    changes = [{"generation": GenerationSettings(steps=3, batch_size=2)}, {"allow_partial_weights": True}]
    for number, change in enumerate(changes):  # more steps, or partial weights allowed: not what was remembered
        with pytest.raises(AssertionError, match="t2i model was loaded"):
            audit(tiny_models, tmp_path, f"changed-{number}", t2i=f"diffusers:{t2i}", **change)


def test_a_compiled_run_recalled_records_what_the_compiled_load_did(tiny_models, tmp_path, monkeypatch):
    settings = GenerationSettings(steps=2, batch_size=2, compile=True)
    compiled = audit(tiny_models, tmp_path, "compiled", generation=settings)
    forbid_loading(monkeypatch, "t2i", "vqa", "embedder")
    again = audit(tiny_models, tmp_path, "again", generation=settings)
    assert again.config.generation == compiled.config.generation  # torch.compile recorded as the load recorded it
    cache = ContentCache(tmp_path / "cache.sqlite")
    try:  # and a resume, which asks with the record's settings
        resumed = resume_audit("compiled", RunStore(tmp_path / "runs"), cache, QuietProgress()).run()
    finally:
        cache.close()
    assert resumed.config == compiled.config


def test_files_that_change_while_the_model_loads_are_not_remembered(tiny_models, tmp_path, monkeypatch):
    """A trainer rewriting the folder during the load: the model loaded is not the one the folder now holds."""
    import transformers

    clip = tmp_path / "clip"
    shutil.copytree(tiny_models.clip, clip)
    original = transformers.CLIPModel.from_pretrained.__func__

    def rewrite_then_load(cls, *args, **kwargs):
        (clip / "processor_config.json").write_text((clip / "processor_config.json").read_text() + "\n")
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(transformers.CLIPModel, "from_pretrained", classmethod(rewrite_then_load))
    audit(tiny_models, tmp_path, "one", embedder=f"clip:{clip}")
    assert "clip" not in remembered_backends(tmp_path)


def test_a_model_that_loads_other_than_remembered_stops_the_run_in_one_line(tiny_models, tmp_path):
    audit(tiny_models, tmp_path, "three")
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        for key, value in db.execute("SELECT key, value FROM cache WHERE stage = ?", (RECALL,)).fetchall():
            found = json.loads(value)
            if found["ref"]["backend"] == "blip2":  # as if another version of the code had remembered it
                found["cache_fingerprint"] = "0" * 64
                value = json.dumps(found).encode()  # with its checksum: a sound entry, not a damaged one
                db.execute("UPDATE cache SET value = ?, crc = ? WHERE key = ?", (value, zlib.crc32(value), key))
    with pytest.raises(AuditorError, match=r"^model blip2:\S+ loaded as another model than the one its files were"):
        audit(tiny_models, tmp_path, "four", images=4)


def test_an_embedder_the_run_may_skip_is_loaded_to_find_out(tiny_models, tmp_path, monkeypatch):
    audit(tiny_models, tmp_path, "three", embedder_required=False)

    def out_of_reach(*args, **kwargs):
        raise OSError("the disk is gone")

    monkeypatch.setattr("transformers.CLIPModel.from_pretrained", out_of_reach)
    more = audit(tiny_models, tmp_path, "four", embedder_required=False, images=4)
    assert more.status == "completed" and more.config.embedder is None  # skipped, as without a remembered load


def test_the_weights_identity_follows_files_revision_library_and_code(tmp_path, monkeypatch):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")

    def identity(target: str) -> str | None:
        return weights_identity(Spec("clip", target), "config.json", LoadOptions(), "transformers")

    before = identity(str(folder))
    assert before is not None and identity(str(folder)) == before
    (folder / "model.safetensors").write_bytes(b"other weights")
    changed = identity(str(folder))
    assert changed not in (None, before)
    assert identity(str(tmp_path / "absent")) is None  # a load says why
    with monkeypatch.context() as patch:
        patch.setattr("importlib.metadata.version", lambda name: "0.0")
        assert identity(str(folder)) != changed  # another transformers
    with monkeypatch.context() as patch:
        patch.setattr("auditor.core.weights.code_fingerprint", lambda: "another auditor")
        assert identity(str(folder)) != changed

    # A hub cache: two snapshots with the same files are two revisions; a hub that answers may have a newer one.
    import huggingface_hub.constants

    hub = tmp_path / "hub"
    snapshots = hub / "models--someone--tiny" / "snapshots"
    for commit in ("a" * 40, "b" * 40):
        shutil.copytree(folder, snapshots / commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    (hub / "models--someone--tiny" / "refs").mkdir()
    identities = []
    for commit in ("a" * 40, "b" * 40):
        (hub / "models--someone--tiny" / "refs" / "main").write_text(commit)
        identities.append(identity("someone/tiny"))
    assert None not in identities and identities[0] != identities[1]
    monkeypatch.setattr("auditor.core.weights.hub_reachable", lambda: True)
    assert identity("someone/tiny") is None


def remembered_backends(root: Path) -> list[str]:
    with sqlite3.connect(root / "cache.sqlite") as db:
        values = [json.loads(value) for (value,) in db.execute("SELECT value FROM cache WHERE stage = ?", (RECALL,))]
    return sorted(value["ref"]["backend"] for value in values)


def test_every_load_in_process_is_remembered_under_the_settings_asked_and_those_it_ran_with(tiny_models, tmp_path):
    audit(tiny_models, tmp_path, "one")
    # Text-to-image was asked with defaults left open (scheduler, guidance, size): a second key, for a resume.
    # The VQA model ran with the settings asked, and the embedder takes none: one key each.
    assert remembered_backends(tmp_path) == ["blip2", "clip", "diffusers", "diffusers"]


def test_the_source_fingerprint_follows_python_files_and_skips_editor_lock_files(tmp_path):
    package = tmp_path / "package"
    (package / "core").mkdir(parents=True)
    (package / "core" / "weights.py").write_text("TEMPLATE = 'a'\n")
    before = source_fingerprint(package)
    (package / "core" / ".#weights.py").symlink_to("user@host.1234:1700000000")  # Emacs, while editing
    (package / "notes.txt").write_text("not code")
    assert source_fingerprint(package) == before
    (package / "core" / "weights.py").write_text("TEMPLATE = 'b'\n")
    assert source_fingerprint(package) != before
