"""The cache never serves one model's results for another, and bad checkpoints are refused loudly.

Model identities are content-based (weights' digests for local folders, memoised in the
cache database), plans are keyed on the planner's data and endpoint, VQA and embedding
keys on dtype and device kind; checkpoints with missing tensors are an error unless
``--allow-partial-weights``; an unreachable hub fails in seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from auditor.core.cache import ContentCache
from auditor.core.errors import BackendError
from auditor.core.fingerprint import file_sha256
from auditor.core.store import RunStore
from auditor.records import GenerationSettings, PerceptionSettings, load_record
from auditor.studies.progress import QuietProgress
from auditor.studies.prompt_audit import PromptAuditOptions, start_audit
from tests.clitools import run_auditor
from tests.fake_openai import FakeOpenAI

PROMPT = "a photo of a pharmacist"


def _retrained_copy(source: Path, target: Path, component: str = "unet") -> Path:
    """``source`` with one tensor of ``component`` changed: same configs, same file sizes, other weights."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, target)
    weights = next((target / component).glob("*.safetensors")) if component else next(target.glob("*.safetensors"))
    tensors = load_file(weights)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 0.5
    before = weights.stat().st_size
    save_file(tensors, weights, metadata={"format": "pt"})
    assert weights.stat().st_size == before  # nothing but the contents tells the two apart
    return target


def _without_tensor(source: Path, target: Path, component: str, fragment: str) -> tuple[Path, str]:
    """``source`` with the first tensor of ``component`` whose name contains ``fragment`` deleted."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, target)
    weights = next((target / component).glob("*.safetensors")) if component else next(target.glob("*.safetensors"))
    tensors = load_file(weights)
    name = next(key for key in sorted(tensors) if fragment in key)
    del tensors[name]
    save_file(tensors, weights, metadata={"format": "pt"})
    return target, name


def _audit(t2i: Path, vqa: Path, cache: ContentCache, runs: Path, name: str, llm: str = "offline"):
    options = PromptAuditOptions(
        prompt=PROMPT,
        llm=llm,
        t2i=f"diffusers:{t2i}",
        vqa=f"blip2:{vqa}",
        embedder=None,
        images=2,
        generation=GenerationSettings(steps=2, batch_size=4),
        perception=PerceptionSettings(max_new_tokens=4, caption_max_new_tokens=4),
        max_axes=1,
        max_counterfactuals=2,
    )
    return start_audit(options, RunStore(runs), cache, QuietProgress(), run_name=name).run()


def test_two_models_with_the_same_configs_and_sizes_never_share_cached_results(tiny_models, tmp_path):
    other_t2i = _retrained_copy(tiny_models.t2i, tmp_path / "t2i-finetune")
    other_vqa = _retrained_copy(tiny_models.vqa, tmp_path / "vqa-finetune", component="")
    cache = ContentCache(tmp_path / "cache.sqlite")
    first = _audit(tiny_models.t2i, tiny_models.vqa, cache, tmp_path / "runs", "before")
    second = _audit(other_t2i, other_vqa, cache, tmp_path / "runs", "after")

    timings = {t.stage: t for t in second.timings}
    assert timings["generate"].cached == 0 and timings["generate"].computed == 6
    assert timings["perceive"].cached == 0 and timings["perceive"].computed == 6
    assert second.config.t2i.fingerprint != first.config.t2i.fingerprint
    assert second.config.vqa.fingerprint != first.config.vqa.fingerprint
    hashes = lambda record: [image.sha256 for s in record.prompt_sets for image in s.images]  # noqa: E731
    assert set(hashes(first)).isdisjoint(hashes(second))  # every image differs

    again = _audit(other_t2i, other_vqa, cache, tmp_path / "runs", "again")  # the same weights do hit the cache
    assert {t.stage: t.cached for t in again.timings}["generate"] == 6


def test_weight_digests_are_memoised_by_path_size_mtime_ctime_and_inode(tmp_path):
    cache = ContentCache(tmp_path / "cache.sqlite")
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"a" * 1000)
    reads: list[Path] = []

    def counting(path: Path) -> str:
        reads.append(path)
        return file_sha256(path)

    first = cache.file_digest(weights, counting)
    assert cache.file_digest(weights, counting) == first and len(reads) == 1
    weights.write_bytes(b"b" * 1000)  # same size, new contents and mtime
    assert cache.file_digest(weights, counting) != first and len(reads) == 2
    replacement = tmp_path / "new.safetensors"
    replacement.write_bytes(b"b" * 1000)
    stat = weights.stat()
    replacement.replace(weights)  # another inode
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert cache.file_digest(weights, counting) == file_sha256(weights) and len(reads) == 3
    cache.close()
    reopened = ContentCache(tmp_path / "cache.sqlite")  # remembered across processes
    assert reopened.file_digest(weights, counting) == file_sha256(weights) and len(reads) == 3
    time.sleep(0.05)  # past the file system's coarse clock tick
    stat = weights.stat()
    with weights.open("r+b") as handle:  # rewritten in place, then its mtime put back (as tar and cp -p do)
        handle.write(b"c" * 1000)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (weights.stat().st_size, weights.stat().st_mtime_ns, weights.stat().st_ino) == (
        stat.st_size, stat.st_mtime_ns, stat.st_ino
    )  # fmt: skip
    assert reopened.file_digest(weights, counting) == file_sha256(weights) and len(reads) == 4  # ctime moved


def test_vqa_and_embedding_keys_follow_dtype_and_device_kind(tiny_models):
    from auditor.perception.registry import EMBEDDERS, VQA_BACKENDS

    vqa = VQA_BACKENDS.load(f"blip2:{tiny_models.vqa}", settings=PerceptionSettings())
    clip = EMBEDDERS.load(f"clip:{tiny_models.clip}")
    for backend in (vqa, clip):
        cpu = backend.cache_fingerprint()
        keys = {}
        for device, dtype in (("cuda:0", "float32"), ("cuda:1", "float32"), ("cuda:0", "float16")):
            backend.ref = backend.ref.model_copy(update={"device": device, "dtype": dtype})
            keys[device, dtype] = backend.cache_fingerprint()
        assert keys["cuda:0", "float32"] == keys["cuda:1", "float32"] != cpu  # the kind of device counts, not its number
        assert keys["cuda:0", "float16"] != keys["cuda:0", "float32"]


def test_a_cached_plan_is_not_served_for_another_server(tiny_models, fake_openai, tmp_path, monkeypatch):
    plan = {"gender": ["a photo of a male pharmacist", "a photo of a female pharmacist"]}
    reply = f"```json\n{json.dumps(plan)}\n```"
    fake_openai.chat_replies("axes", "counterfactuals", reply)
    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        for name in ("one", "two"):
            _audit(tiny_models.t2i, tiny_models.vqa, cache, tmp_path / "runs", name, llm="openai:gpt-4o-mini")
        assert len(fake_openai.chat_requests()) == 3  # the second run: the same server's cached plan

        other = FakeOpenAI().start()
        try:
            other.chat_replies("axes", "counterfactuals", reply)
            monkeypatch.setenv("OPENAI_BASE_URL", other.base_url)
            record = _audit(tiny_models.t2i, tiny_models.vqa, cache, tmp_path / "runs", "three", llm="openai:gpt-4o-mini")
            assert len(other.chat_requests()) == 3  # another endpoint: planned again
        finally:
            other.stop()
    finally:
        cache.close()
    timings = {t.stage: t for t in record.timings}
    assert timings["plan"].computed == 1 and timings["plan"].cached == 0


def test_plan_key_follows_the_planner_data(monkeypatch):
    import auditor.planning.registry as planning

    for name in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    offline, llm = planning.planner_fingerprint("offline"), planning.planner_fingerprint("openai:gpt-4o-mini")
    assert offline != llm != planning.planner_fingerprint("openai:gpt-4o")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert planning.planner_fingerprint("openai:gpt-4o-mini") != llm
    assert planning.planner_fingerprint("offline") == offline  # no endpoint
    chain = planning.planner_fingerprint("langchain:openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:2/v1")  # langchain-openai's own variable, first
    assert planning.planner_fingerprint("langchain:openai:gpt-4o-mini") != chain
    assert planning.planner_fingerprint("openai:gpt-4o-mini") != llm  # the openai SDK ignores it: OPENAI_BASE_URL's
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert planning.planner_fingerprint("openai:gpt-4o-mini") == llm
    anthropic = planning.planner_fingerprint("langchain:anthropic:claude-3-5-haiku-latest")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-an-endpoint")
    assert planning.planner_fingerprint("langchain:anthropic:claude-3-5-haiku-latest") == anthropic
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:3")
    assert planning.planner_fingerprint("langchain:anthropic:claude-3-5-haiku-latest") != anthropic
    original = planning.read_prompt_text
    monkeypatch.setattr(planning, "read_prompt_text", lambda name: original(name) + "\n# edited")
    assert planning.planner_fingerprint("offline") != offline  # an edited axis library or question table


def test_a_checkpoint_missing_a_tensor_is_refused_unless_partial_weights_are_allowed(tiny_models, tmp_path):
    import torch

    from auditor.core.weights import LoadOptions
    from auditor.generation.registry import T2I_BACKENDS
    from auditor.perception.registry import VQA_BACKENDS

    broken_vqa, name = _without_tensor(tiny_models.vqa, tmp_path / "vqa", "", "language_model")
    with pytest.raises(BackendError, match=rf"missing {name}.*--allow-partial-weights"):
        VQA_BACKENDS.load(f"blip2:{broken_vqa}", settings=PerceptionSettings())
    loaded = VQA_BACKENDS.load(
        f"blip2:{broken_vqa}", settings=PerceptionSettings(), options=LoadOptions(allow_partial_weights=True)
    )
    assert loaded.ref.partial_weights == [f"missing {name}"]
    again = VQA_BACKENDS.load(
        f"blip2:{broken_vqa}", settings=PerceptionSettings(), options=LoadOptions(allow_partial_weights=True)
    )
    assert all(  # the missing layer is initialised from a fixed seed: the same model both times
        torch.equal(a, b) for a, b in zip(loaded.model.state_dict().values(), again.model.state_dict().values())
    )

    broken_t2i, unet_name = _without_tensor(tiny_models.t2i, tmp_path / "t2i", "unet", "conv_out")
    with pytest.raises(BackendError, match=rf"missing unet\.{unet_name}"):
        T2I_BACKENDS.load(f"diffusers:{broken_t2i}", settings=GenerationSettings(steps=1))


def test_partial_weights_on_the_command_line_are_one_line_or_recorded(tiny_models, tmp_path):
    broken, name = _without_tensor(tiny_models.t2i, tmp_path / "t2i", "unet", "conv_out")
    args = ["--llm", "offline", "--t2i", f"diffusers:{broken}", "--vqa", str(tiny_models.vqa), "--embedder", "none",
            "--images", "1", "--steps", "1", "--max-axes", "1", "--quiet"]  # fmt: skip
    refused = run_auditor("prompt", PROMPT, *args, "--name", "refused", process=True)  # one line, in a fresh process
    assert refused.returncode == 1
    assert f"missing unet.{name}" in refused.stderr and "--allow-partial-weights" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr

    allowed = run_auditor("prompt", "--resume", "refused", "--allow-partial-weights", "--quiet")
    assert allowed.returncode == 0, allowed.stderr
    record = load_record(tmp_path / "runs" / "refused" / "record.json")
    assert record.status == "completed" and record.config.allow_partial_weights is True
    assert record.config.t2i.partial_weights == [f"missing unet.{name}"]
    assert record.config.vqa.partial_weights == []


class _Blackhole:
    """A TCP server that accepts connections and never answers: the hub as a dead network shows it."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.socket.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                self.connections.append(self.socket.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.socket.close()
        for connection in self.connections:
            connection.close()


def test_an_unreachable_hub_fails_in_seconds_with_one_line(tmp_path):
    hub = _Blackhole()
    try:
        started = time.monotonic()
        result = run_auditor(
            "prompt", PROMPT, "--llm", "offline", "--t2i", "diffusers:nobody/no-such-model", "--images", "1",
            "--embedder", "none", "--max-axes", "1", "--quiet",
            env={"HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": "", "HF_ENDPOINT": hub.url,
                 "HF_HOME": str(tmp_path / "hf")},
        )  # fmt: skip
        elapsed = time.monotonic() - started
        asked = len(hub.connections)
    finally:
        hub.close()
    assert result.returncode == 1
    assert "nobody/no-such-model" in result.stderr and "hub is unreachable" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # One 3-second probe and nothing else: the hub client made no request of its own
    # (each would wait out its timeout and retries); the bound leaves room for a busy machine.
    assert asked == 1, f"{asked} connections to the hub"
    assert elapsed < 60, f"took {elapsed:.0f} s"


def test_hub_probe_is_skipped_for_local_folders_and_under_hf_hub_offline(tiny_models, monkeypatch):
    from auditor.core import weights

    weights.hub_reachable.cache_clear()
    assert weights.hub_options(str(tiny_models.vqa)) == {}  # a folder: no probe, no option
    assert weights.hub_options("Salesforce/blip2-opt-2.7b") == {"local_files_only": True}  # HF_HUB_OFFLINE=1
    weights.hub_reachable.cache_clear()


def test_a_resume_with_other_weights_says_so_and_makes_the_images_again(tiny_models, tmp_path):
    from auditor.studies.prompt_audit import resume_audit
    from auditor.studies.run import Resumption

    other_t2i = _retrained_copy(tiny_models.t2i, tmp_path / "t2i-finetune")
    cache = ContentCache(tmp_path / "cache.sqlite")
    first = _audit(tiny_models.t2i, tiny_models.vqa, cache, tmp_path / "runs", "r")
    assert first.results_from == {"t2i": first.config.t2i, "vqa": first.config.vqa}
    notices: list[str] = []

    class Notices(QuietProgress):
        def notice(self, message: str) -> None:
            notices.append(message)

    store = RunStore(tmp_path / "runs")
    again = resume_audit("r", store, cache, Notices(), Resumption(models={"t2i": f"diffusers:{other_t2i}"})).run()
    before, now = first.config.t2i.fingerprint, again.config.t2i.fingerprint
    assert before != now and again.results_from == {"t2i": again.config.t2i, "vqa": first.config.vqa}
    assert notices[-1] == (
        f"--t2i diffusers:{other_t2i} loads other weights than the ones this run's images came from "
        f"(diffusers:{tiny_models.t2i}, fingerprint {before[:12]}; now {now[:12]}): the images are made again with it"
    )
    assert {t.stage: t.computed for t in again.timings}["generate"] == 6  # nothing of the first weights reused
    notices.clear()
    resume_audit("r", store, cache, Notices(), Resumption(models={"t2i": f"diffusers:{other_t2i}"})).run()
    assert not any("other weights" in notice for notice in notices)  # the record's images are these weights' now
    cache.close()


def test_a_completed_run_whose_failed_resume_made_new_images_keeps_no_earlier_scores(
    tiny_models, vqa_without_weights, tmp_path
):
    """Other weights rewrote the images before the VQA model failed to load: the old scores no longer describe the
    run's files, so it is failed, without them, and the error offers the resume that finishes it."""
    other_t2i = _retrained_copy(tiny_models.t2i, tmp_path / "t2i-finetune")
    cache = ContentCache(tmp_path / "cache.sqlite")
    done = _audit(tiny_models.t2i, tiny_models.vqa, cache, tmp_path / "runs", "r")
    cache.close()
    assert done.status == "completed" and done.scores is not None
    result = run_auditor(
        "prompt", "--resume", "r", "--runs-dir", str(tmp_path / "runs"),
        "--t2i", f"diffusers:{other_t2i}", "--vqa", f"blip2:{vqa_without_weights}",  # a BLIP-2 without weights
    )  # fmt: skip
    run_dir = RunStore(tmp_path / "runs").resolve("r")
    assert result.returncode == 1 and f"continue it with --resume {run_dir}" in result.stderr
    failed = load_record(run_dir / "record.json")
    assert failed.status == "failed" and failed.errors[-1].stage == "perceive"
    assert failed.scores is None and failed.concepts == {}  # the page shows no numbers of the earlier models
    assert failed.results_from["t2i"].fingerprint != done.results_from["t2i"].fingerprint


def test_a_record_written_before_results_from_was_kept_reads_it_from_its_models(tiny_models, tmp_path):
    """An older record has no results_from: its config's models made what it holds."""
    import json

    from auditor.records import RunRecord
    from auditor.studies.run import reopen_run

    cache = ContentCache(tmp_path / "cache.sqlite")
    first = _audit(tiny_models.t2i, tiny_models.vqa, cache, tmp_path / "runs", "r")
    cache.close()
    path = tmp_path / "runs" / "r" / "record.json"
    data = json.loads(path.read_text())
    del data["results_from"]
    path.write_text(json.dumps(data))
    _, record = reopen_run("r", RunStore(tmp_path / "runs"), RunRecord)
    assert record.results_from == first.results_from


def test_a_hosted_model_reached_at_another_service_is_named_as_such_not_as_other_weights():
    from auditor.records import ModelRef
    from auditor.studies.run import moved_service

    served = "http://127.0.0.1:1/v1"
    before = ModelRef(spec="openai:dall-e-3", backend="openai", model_id="dall-e-3", fingerprint="a" * 16)
    before = before.model_copy(update={"service": served})
    now = before.model_copy(update={"fingerprint": "b" * 16, "service": "http://proxy:8000/v1"})
    assert moved_service(before, now) == (
        "openai:dall-e-3 is served by http://proxy:8000/v1 now, not by http://127.0.0.1:1/v1 as before "
        "(set OPENAI_BASE_URL back to http://127.0.0.1:1/v1 to use what it made)"
    )
    assert moved_service(before, before) is None
    other_model = now.model_copy(update={"spec": "openai:gpt-image-1", "model_id": "gpt-image-1"})
    assert moved_service(before, other_model) is None  # another model too: OPENAI_BASE_URL alone would not do
    local = ModelRef(spec="diffusers:/m", backend="diffusers", fingerprint="c" * 16)
    assert moved_service(local, local.model_copy(update={"fingerprint": "d" * 16})) is None  # weights, not a service
