"""The executors on tiny random models: the overlapped one gives the sequential one's record and
cache, runs resume across executors, failures name their stage, and the writer keeps order and errors."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from auditor.core.cache import ContentCache
from auditor.core.store import RunStore
from auditor.executors.recall import STAGE as RECALL
from auditor.executors.writer import BackgroundWriter
from auditor.records import GenerationSettings, PerceptionSettings, load_record
from auditor.studies.progress import QuietProgress
from auditor.studies.prompt_audit import PromptAuditOptions, resume_audit, start_audit
from auditor.studies.run import Resumption
from tests.clitools import run_auditor
from tests.test_prompt_audit import StopAfter, check_run_folder

PROMPT = "a photo of a pharmacist"


def options(tiny_models, executor: str, **changes) -> PromptAuditOptions:
    """Two axes of two counterfactuals (5 prompt sets), 3 images each: generation batches of 2 cross
    prompt sets, and the VQA chunks of 8 images cross them too."""
    fields = dict(
        prompt=PROMPT,
        llm="offline",
        t2i=f"diffusers:{tiny_models.t2i}",
        vqa=f"blip2:{tiny_models.vqa}",
        embedder=f"clip:{tiny_models.clip}",
        embedder_required=True,
        images=3,
        generation=GenerationSettings(steps=2, batch_size=2),
        perception=PerceptionSettings(batch_size=8, max_new_tokens=4, caption_max_new_tokens=6),
        max_axes=2,
        max_counterfactuals=2,
        executor=executor,
    )
    return PromptAuditOptions(**{**fields, **changes})


def cache_rows(path: Path) -> list[tuple[str, str, bytes]]:
    """Every cached result; not the descriptions of models loaded in process, which runs on Ray do not write."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT key, stage, value FROM cache WHERE stage != ? ORDER BY key", (RECALL,)).fetchall()


def run_fresh(tiny_models, tmp_path: Path, executor: str):
    """One audit in its own runs folder and its own cache, so every result is computed."""
    store = RunStore(tmp_path / executor / "runs")
    cache = ContentCache(tmp_path / executor / "cache.sqlite")
    try:
        record = start_audit(options(tiny_models, executor), store, cache, QuietProgress(), run_name="r").run()
    finally:
        cache.close()
    return record, store.root / "r", cache_rows(tmp_path / executor / "cache.sqlite")


def test_every_vqa_batch_is_full_but_the_last_of_each_kind_of_question(tiny_models, tmp_path, monkeypatch):
    """A VQA call gets as many images as --vqa-batch-size has rows, so the caption's rows (one per image) fill
    whole batches as the axis questions' do: 5 prompt sets of 4 images at 16 rows a batch are a call of 16
    images (two axes: two batches of 16 rows; the caption: one) and a call of the last 4 (8 rows, then 4)."""
    from auditor.perception.vqa import Blip2Vqa

    rows: list[int] = []
    answer_batch = Blip2Vqa._answer_batch

    def counting(self, encoded, prompts, max_new_tokens):
        rows.append(len(prompts))
        return answer_batch(self, encoded, prompts, max_new_tokens)

    monkeypatch.setattr(Blip2Vqa, "_answer_batch", counting)
    perception = PerceptionSettings(batch_size=16, max_new_tokens=4, caption_max_new_tokens=6)
    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        audit = options(tiny_models, "sequential", images=4, embedder=None, perception=perception)
        record = start_audit(audit, RunStore(tmp_path / "runs"), cache, QuietProgress(), run_name="r").run()
    finally:
        cache.close()
    assert record.status == "completed" and sum(len(s.images) for s in record.prompt_sets) == 20
    assert rows == [16, 16, 16, 8, 4]


def test_overlapped_executor_gives_the_sequential_record_and_cache(tiny_models, tmp_path):
    sequential, seq_dir, seq_cache = run_fresh(tiny_models, tmp_path, "sequential")
    overlapped, ovl_dir, ovl_cache = run_fresh(tiny_models, tmp_path, "overlapped")
    for record, run_dir in ((sequential, seq_dir), (overlapped, ovl_dir)):
        check_run_folder(run_dir, images=3)
        assert load_record(run_dir / "record.json") == record
    assert (sequential.config.executor, overlapped.config.executor) == ("sequential", "overlapped")
    assert overlapped.config.model_copy(update={"executor": "sequential"}) == sequential.config
    assert overlapped.prompt_sets == sequential.prompt_sets  # same images, same bytes
    assert overlapped.answers == sequential.answers
    assert overlapped.concepts == sequential.concepts
    assert overlapped.scores == sequential.scores  # CAS, BAV and the embedding scores
    assert any(cf.embedding_similarity is not None for axis in overlapped.scores.axes for cf in axis.counterfactuals)
    assert ovl_cache == seq_cache  # every image, answer and embedding cached under the same key, same value
    timings = {executor: {t.stage: (t.computed, t.cached) for t in record.timings}
               for executor, record in (("s", sequential), ("o", overlapped))}  # fmt: skip
    assert timings["o"] == timings["s"]
    assert timings["s"]["generate"] == (15, 0) and timings["s"]["perceive"] == (15, 0)
    for prompt_set in overlapped.prompt_sets:  # the images were written, not only cached
        assert all((ovl_dir / i.file).read_bytes() == (seq_dir / i.file).read_bytes() for i in prompt_set.images)


def test_generation_waits_for_a_reader_that_lags_behind(tiny_models, tmp_path, monkeypatch):
    """A slow VQA under the overlapped executor: generation waits before a batch while the reader has MAX_BACKLOG
    images waiting (each holds its pixels), so the backlog stays within that plus the batches already on their way
    (the one made, and those the writer holds), where without the wait it grows to nearly all 30 images."""
    from auditor.executors import local
    from auditor.executors.writer import QUEUE_DEPTH
    from auditor.perception.vqa import Blip2Vqa

    answer_batch, put = Blip2Vqa._answer_batch, local._Lane.put
    backlogs: list[int] = []

    def slow(self, encoded, prompts, max_new_tokens):
        time.sleep(0.3)
        return answer_batch(self, encoded, prompts, max_new_tokens)

    def counting(self, stored):
        put(self, stored)
        backlogs.append(self.backlog)

    monkeypatch.setattr(Blip2Vqa, "_answer_batch", slow)
    monkeypatch.setattr(local._Lane, "put", counting)
    monkeypatch.setattr(local, "MAX_BACKLOG", 1)
    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        audit = options(tiny_models, "overlapped", images=6, embedder=None)
        record = start_audit(audit, RunStore(tmp_path / "runs"), cache, QuietProgress(), run_name="r").run()
    finally:
        cache.close()
    assert record.status == "completed" and sum(len(answers) for answers in record.answers.values()) == 30
    batch = audit.generation.batch_size
    assert max(backlogs) <= local.MAX_BACKLOG - 1 + batch * (QUEUE_DEPTH + 2) + 1  # + 1: the end-of-images mark


@pytest.mark.parametrize(
    "first, then, stage, stop_at",
    [
        ("overlapped", "sequential", "perceive", 4),
        ("overlapped", "overlapped", "generate", 4),
        ("sequential", "overlapped", "perceive", 4),
    ],
)
def test_a_run_interrupted_under_one_executor_resumes_under_another(tiny_models, tmp_path, first, then, stage, stop_at):
    check_resume_across_executors(tiny_models, tmp_path, first, then, stage, stop_at)


def check_resume_across_executors(tiny_models, tmp_path: Path, first: str, then: str, stage: str, stop_at: int) -> None:
    """Ctrl-C a 10-image run under ``first`` once ``stage`` stored ``stop_at`` items, resume it under
    ``then``: what was stored is not computed again, and the rest is."""
    store = RunStore(tmp_path / "runs")
    cache = ContentCache(tmp_path / "cache.sqlite")
    audit = start_audit(
        options(tiny_models, first, embedder=None, images=2), store, cache, StopAfter(stage, stop_at), run_name="r"
    )
    with pytest.raises(KeyboardInterrupt):
        audit.run()
    partial = load_record(audit.run_dir / "record.json")
    assert partial.status == "interrupted" and partial.errors[-1].stage == stage
    per_image = 1 if stage == "generate" else 3
    done = cache.entries(stage) // per_image
    assert 0 < done < 10
    generated = cache.entries("generate")
    cache.close()

    cache = ContentCache(tmp_path / "cache.sqlite")
    record = resume_audit("r", store, cache, QuietProgress(), Resumption(executor=then)).run()
    assert record.status == "completed" and record.errors == [] and record.config.executor == then
    timing = {t.stage: t for t in record.timings}
    assert (timing[stage].cached, timing[stage].computed) == (done, 10 - done)
    assert cache.misses[stage] == (10 - done) * per_image  # nothing finished was computed again
    assert timing["generate"].cached == generated and cache.entries("generate") == 10
    check_run_folder(store.root / "r", images=2)
    cache.close()


def test_a_reader_that_fails_ends_an_overlapped_run_naming_its_stage(tiny_models, tmp_path):
    store = RunStore(tmp_path / "runs")
    cache = ContentCache(tmp_path / "cache.sqlite")
    (tmp_path / "no-such-vqa").mkdir()  # a model's config, but no weights: the reader fails when it loads
    shutil.copy(tiny_models.vqa / "config.json", tmp_path / "no-such-vqa")
    broken = options(tiny_models, "overlapped", vqa=f"blip2:{tmp_path / 'no-such-vqa'}", embedder=None)
    audit = start_audit(broken, store, cache, QuietProgress(), run_name="r")
    with pytest.raises(Exception, match="no-such-vqa"):
        audit.run()
    record = load_record(audit.run_dir / "record.json")
    assert record.status == "failed"
    assert record.errors[-1].stage == "perceive" and "no-such-vqa" in record.errors[-1].message
    assert {t.stage for t in record.timings} >= {"generate", "perceive"}
    cache.close()


# --------------------------------------------------------------------------- the writer


def test_writer_runs_jobs_in_order_on_another_thread():
    seen: list[tuple[int, str]] = []
    with BackgroundWriter() as writer:
        for i in range(20):
            writer.submit(lambda i=i: seen.append((i, threading.current_thread().name)))
        writer.drain()
        assert [i for i, _ in seen] == list(range(20))
    assert {name for _, name in seen} == {"auditor-writer"}


def test_writer_error_reaches_the_producer_as_the_same_object_and_later_jobs_are_skipped():
    failure = KeyboardInterrupt()
    tags: list[str] = []
    ran: list[int] = []

    def fail() -> None:
        raise failure

    writer = BackgroundWriter(on_error=tags.append)
    writer.submit(lambda: ran.append(1), "generate")
    writer.submit(fail, "perceive")
    writer.submit(lambda: ran.append(3), "perceive")
    with pytest.raises(KeyboardInterrupt) as caught:
        writer.drain()
    assert caught.value is failure and tags == ["perceive"] and ran == [1]
    with pytest.raises(KeyboardInterrupt):
        writer.submit(lambda: ran.append(4))
    with pytest.raises(KeyboardInterrupt):
        writer.close()
    assert ran == [1]


def test_writer_finishes_queued_work_when_the_producer_fails():
    stored: list[int] = []

    def slow_store(i: int) -> None:
        time.sleep(0.01)
        stored.append(i)

    with pytest.raises(RuntimeError, match="generation failed"):
        with BackgroundWriter(depth=2) as writer:
            for i in range(5):
                writer.submit(lambda i=i: slow_store(i))
            raise RuntimeError("generation failed")
    assert stored == [0, 1, 2, 3, 4]  # what was computed before the failure is kept


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--executor", "ray", "--ray-address", "not an address"], "--ray-address takes auto, HOST:PORT"),
        # nothing listens there: Ray would retry for minutes, a line a second
        (["--executor", "ray", "--ray-address", "127.0.0.1:1"], "--ray-address 127.0.0.1:1: cannot reach a Ray cluster"),
        (["--ray-address", "auto"], "--ray-address is for --executor ray"),
        (["--executor", "remote"], "unknown executor 'remote' for --executor: use sequential, overlapped, ray"),
    ],
)
def test_bad_executor_options_are_one_line_before_any_run(tmp_path, args, expected):
    result = run_auditor("prompt", PROMPT, "--llm", "offline", *args, process=True)
    assert result.returncode == 2 and result.stderr.startswith("error: ") and expected in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "runs").exists()


def test_a_caption_is_never_served_as_the_short_answer_to_the_same_words(tiny_models, tmp_path):
    """The caption question gets the caption's template and length: a later run that asks the same
    words as an axis question must not get the caption back from the cache."""
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    try:
        small = options(tiny_models, "sequential", images=2, max_axes=1, embedder=None, embedder_required=False)
        first = start_audit(small, store, cache, QuietProgress(), run_name="a").run()
        caption = first.plan.caption_question
        axis = first.plan.axes[0].model_copy(update={"question": caption})
        audit = start_audit(small, store, cache, QuietProgress(), run_name="b")
        audit.record.plan = first.plan.model_copy(update={"axes": [axis], "caption_question": "Say what you see."})
        second = audit.run()
    finally:
        cache.close()
    captions = [answers.caption for answers in first.answers["initial"]]
    short = [answers.answers[axis.name] for answers in second.answers["initial"]]
    assert second.status == "completed" and second.prompt_sets[0].images == first.prompt_sets[0].images
    assert short != captions


class BatchSpyCache(ContentCache):
    """Notes how results reach the cache: per stage, the size of each transaction."""

    def __init__(self, path: Path):
        super().__init__(path)
        self.transactions: dict[str, list[int]] = {}

    def put(self, stage, fingerprint, inputs, value):
        self.transactions.setdefault(stage, []).append(-1)  # a lone put: not a batch's transaction
        super().put(stage, fingerprint, inputs, value)

    def put_many(self, stage, fingerprint, entries):
        entries = list(entries)
        self.transactions.setdefault(stage, []).append(len(entries))
        super().put_many(stage, fingerprint, entries)


def test_each_batch_reaches_the_cache_whole_or_not_at_all(tiny_models, tmp_path):
    """A kill -9 while a batch is being stored must leave all of it or none: a resumed run then
    computes whole batches again in the same company, so its results are the uninterrupted run's
    to the last bit (a remainder batched with other images could differ there)."""
    cache = BatchSpyCache(tmp_path / "cache.sqlite")
    try:
        audit = start_audit(options(tiny_models, "sequential"), RunStore(tmp_path / "runs"), cache, QuietProgress(), "r")
        record = audit.run()
        assert record.status == "completed"
        assert cache.transactions["generate"] == [2] * 7 + [1]  # 15 images in batches of 2, each one transaction
        assert all(size > 0 for stage in ("perceive", "embed") for size in cache.transactions[stage])
        assert sum(cache.transactions["embed"]) == 15
        with pytest.raises((sqlite3.Error, TypeError)):  # a failure inside a transaction stores none of it
            cache.put_many("check", "f", [({"i": 1}, b"one"), ({"i": 2}, {"not": "bytes"})])
        assert cache.get("check", "f", {"i": 1}) is None and cache.entries("check") == 0
    finally:
        cache.close()


def test_a_named_embedder_that_fails_to_load_fails_every_resume_until_it_is_pointed_elsewhere(
    tiny_models, clip_without_weights, tmp_path
):
    """Only the default CLIP model is optional. An embedder the user named (here a CLIP folder without weights) fails
    the run, and a resume that does not point it elsewhere fails the same way instead of dropping
    it."""
    from auditor.core.errors import AuditorError

    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    asked = options(tiny_models, "sequential", images=2, max_axes=1, embedder=f"clip:{clip_without_weights}")
    try:
        for attempt in range(2):
            with pytest.raises(AuditorError, match="CLIP"):
                if attempt == 0:
                    start_audit(asked, store, cache, QuietProgress(), run_name="r").run()
                else:
                    resume_audit("r", store, cache, QuietProgress()).run()
            failed = load_record(store.root / "r" / "record.json")
            assert failed.status == "failed" and failed.errors[-1].stage == "embed"
            assert failed.config.embedder is not None and failed.config.embedder.spec == f"clip:{clip_without_weights}"
        pointed = Resumption(models={"embedder": f"clip:{tiny_models.clip}"})
        record = resume_audit("r", store, cache, QuietProgress(), pointed).run()
    finally:
        cache.close()
    assert record.status == "completed" and record.config.embedder.spec == f"clip:{tiny_models.clip}"
    assert all(cf.embedding_similarity is not None for cf in record.scores.axes[0].counterfactuals)


def test_an_optional_embedder_that_fails_to_load_leaves_a_record_and_reports_that_say_why(
    tiny_models, clip_without_weights, tmp_path
):
    """The default CLIP model is optional: without its weights the audit completes without embedding scores, and
    the record keeps why, so its reports say it long after the run's notice scrolled away (or --quiet dropped it).
    A resume naming an embedder drops the old reason."""
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    optional = options(
        tiny_models, "sequential", images=2, max_axes=1, embedder=f"clip:{clip_without_weights}",
        embedder_required=False,
    )  # fmt: skip
    try:
        record = start_audit(optional, store, cache, QuietProgress(), run_name="r").run()
        assert record.status == "completed" and record.config.embedder is None
        assert "CLIP" in record.embedder_skipped
        assert load_record(store.root / "r" / "record.json").embedder_skipped == record.embedder_skipped
        shown = run_auditor("report", "r", "--json", "--runs-dir", str(store.root))
        assert json.loads(shown.stdout)["notes"][0].startswith("No embedding scores: the default image embedder")
        assert "No embedding scores" in (store.root / "r" / "report.html").read_text(encoding="utf-8")
        assert "No embedding scores" in run_auditor("report", "r", "--runs-dir", str(store.root)).stdout
        none = resume_audit("r", store, cache, QuietProgress(), Resumption(models={"embedder": "none"}))
        assert none.record.embedder_skipped is None  # embeddings now not asked for: no reason to give

        # Ctrl-C as the skip is told: the interrupted record keeps the reason, and so does the run its resume ends
        with pytest.raises(KeyboardInterrupt):
            start_audit(optional, store, cache, InterruptedAtTheSkip(), run_name="stopped").run()
        stopped = load_record(store.root / "stopped" / "record.json")
        assert stopped.status == "interrupted" and stopped.embedder_skipped == record.embedder_skipped
        resumed = resume_audit("stopped", store, cache, QuietProgress()).run()
        assert resumed.status == "completed" and resumed.embedder_skipped == record.embedder_skipped
    finally:
        cache.close()


class InterruptedAtTheSkip(QuietProgress):
    """Ctrl-C the moment the run says the optional embedder was skipped."""

    def notice(self, message: str) -> None:
        if message.startswith("embedding scores skipped"):
            raise KeyboardInterrupt


#: Starts a local Ray in a process of its own, as ``auditor prompt --executor ray`` does, then sends itself SIGTERM.
SIGTERM_AFTER_RAY = """
import os, signal, time
import ray
from auditor.cli import _terminate
from auditor.executors.ray import connect
signal.signal(signal.SIGTERM, _terminate)
connect()
try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
except KeyboardInterrupt as exc:
    print(type(exc).__name__, signal.getsignal(signal.SIGTERM) is _terminate)
finally:
    ray.shutdown()
"""


def test_a_run_on_ray_still_stops_on_sigterm_as_the_command_line_handles_it():
    """ray.init replaces SIGTERM's handler with a plain exit (and its core's crash handler): a run on Ray stopped by a
    scheduler would keep the record ``running``. The handler the command line set is put back."""
    pytest.importorskip("ray")
    result = subprocess.run([sys.executable, "-c", SIGTERM_AFTER_RAY], capture_output=True, text=True, timeout=300)
    assert result.stdout.split() == ["Terminated", "True"], result.stdout + result.stderr[-2000:]


def test_a_cluster_address_in_the_environment_is_checked_and_lets_workers_find_the_models(monkeypatch, tmp_path):
    """RAY_ADDRESS set by hand is checked as --ray-address is (Ray would retry it for minutes); on a cluster a model
    path is the workers' to find, so this machine lacking it is no error before the run."""
    from auditor.core.errors import AuditorError
    from auditor.generation.registry import T2I_BACKENDS

    ray = pytest.importorskip("ray")
    missing = f"diffusers:{tmp_path / 'sd15'}"
    with pytest.raises(AuditorError, match="there is no file or folder"):
        T2I_BACKENDS.preflight(missing)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    assert T2I_BACKENDS.preflight(missing).target == str(tmp_path / "sd15")
    if ray.is_initialized():  # a test of this process already joined a Ray: connect() keeps it
        pytest.skip("Ray is already initialised in this process")
    from auditor.executors.ray import connect

    with pytest.raises(AuditorError, match=r"^RAY_ADDRESS 127\.0\.0\.1:1: cannot reach a Ray cluster there"):
        connect()


def test_batch_size_auto_under_overlapped_probes_with_the_readers_models_loaded(tiny_models, tmp_path, monkeypatch):
    """The probe measures the GPU's memory with every model that will share it: under overlapped the VQA and
    embedding models are loaded before it, also where their descriptions were remembered (which would otherwise
    let them load only at their first missing answer) and where their threads start late."""
    from auditor.executors import local
    from auditor.generation.diffusers_backend import DiffusersTextToImage
    from auditor.studies.run import ModelPool

    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    try:  # the readers' models are described and remembered by a first run
        start_audit(options(tiny_models, "sequential", images=1), store, cache, QuietProgress(), run_name="a").run()
    finally:
        cache.close()

    loaded: list[str] = []
    at_probe: list[list[str]] = []
    get, probe, lane_run = ModelPool.get, DiffusersTextToImage.probe_batch_size, local._Lane._run

    def logging_get(self, kind, spec, load):
        model = get(self, kind, spec, load)
        loaded.append(kind)
        return model

    def logging_probe(self):
        at_probe.append(list(loaded))
        return probe(self)

    def late_run(self, *args):
        time.sleep(0.5)  # the readers' threads reach their models after generation would have reached its own
        return lane_run(self, *args)

    monkeypatch.setattr(ModelPool, "get", logging_get)
    monkeypatch.setattr(DiffusersTextToImage, "probe_batch_size", logging_probe)
    monkeypatch.setattr(local._Lane, "_run", late_run)
    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        auto = GenerationSettings(steps=2, batch_size_auto=True)
        audit = options(tiny_models, "overlapped", images=2, generation=auto)
        record = start_audit(audit, store, cache, QuietProgress(), run_name="b").run()
    finally:
        cache.close()
    assert record.status == "completed" and record.config.generation.batch_size == 4
    assert len(at_probe) == 1 and {"vqa", "embedder"} <= set(at_probe[0])


def test_batch_size_auto_under_overlapped_goes_on_when_a_reader_skips_its_stage(
    tiny_models, clip_without_weights, tmp_path
):
    """An embedder that is not required and fails to load skips its stage, reading the image stream to its end,
    which comes only after generation: generation, waiting for the readers before it probes, must not wait for
    that end (it did, for ever)."""
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    auto = GenerationSettings(steps=2, batch_size_auto=True)
    audit = options(
        tiny_models, "overlapped", images=1, generation=auto, embedder=f"clip:{clip_without_weights}",
        embedder_required=False,
    )  # fmt: skip
    ended: list = []
    run = threading.Thread(
        target=lambda: ended.append(start_audit(audit, store, cache, QuietProgress(), run_name="r").run()), daemon=True
    )
    run.start()
    run.join(120)
    try:
        assert not run.is_alive(), "the run waits for a skipped reader"
        assert ended[0].status == "completed" and ended[0].config.generation.batch_size == 4
        assert ended[0].scores is not None and not any(t.stage == "embed" and t.computed for t in ended[0].timings)
    finally:
        cache.close()


def test_ctrl_c_while_generation_waits_for_the_readers_is_recorded_at_generation(tiny_models, tmp_path, monkeypatch):
    """Ctrl-C before generation starts (it waits for the readers' models under --batch-size auto) is an interruption
    of the generate stage, not of a reader's stage that happened to stop first."""
    from auditor.executors import local

    raise_first, lane_run = local._raise_first, local._Lane._run
    checks: list[int] = []

    def ctrl_c_at_first_check(lanes):
        checks.append(1)
        if len(checks) == 1:
            raise KeyboardInterrupt
        raise_first(lanes)

    def late_run(self, *args):
        time.sleep(0.5)  # the readers are still loading when the key is pressed
        return lane_run(self, *args)

    monkeypatch.setattr(local, "_raise_first", ctrl_c_at_first_check)
    monkeypatch.setattr(local._Lane, "_run", late_run)
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    auto = GenerationSettings(steps=2, batch_size_auto=True)
    try:
        with pytest.raises(KeyboardInterrupt):
            start_audit(options(tiny_models, "overlapped", images=1, generation=auto), store, cache, QuietProgress(),
                        run_name="r").run()  # fmt: skip
    finally:
        cache.close()
    record = load_record(store.root / "r" / "record.json")
    assert record.status == "interrupted" and [e.stage for e in record.errors] == ["generate"]


def test_a_resumed_run_on_another_executor_is_refused_for_that_before_its_ray_address_is_reached():
    """``--resume R --ray-address HOST:PORT``: the run's executor is known only from its record. A run that is not
    on Ray is refused for that; only a run on Ray tries to reach the address."""
    from auditor.core.errors import AuditorError
    from auditor.executors import use_ray_address
    from auditor.studies.run import Resumption
    from tests.factories import make_config

    unreachable = "127.0.0.1:1"  # use_ray_address sets RAY_ADDRESS: the autouse fixture unsets it afterwards
    assert use_ray_address(None, f" {unreachable} ") == unreachable  # the run's executor is not known yet
    with pytest.raises(AuditorError, match="cannot reach a Ray cluster"):
        use_ray_address("ray", unreachable)
    config = make_config()
    with pytest.raises(AuditorError, match="^--ray-address is for runs on Ray; this run's executor is sequential$"):
        Resumption(ray_address=unreachable).apply(config, {})
    config.executor = "ray"
    with pytest.raises(AuditorError, match=f"^--ray-address {unreachable}: cannot reach a Ray cluster there"):
        Resumption(ray_address=unreachable).apply(config, {})
    Resumption(ray_address="auto").apply(config, {})  # Ray's own search for a cluster, when the run starts
