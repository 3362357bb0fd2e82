"""The Ray executor on a local Ray (one CPU) with the tiny random models: the sequential executor's
record and cache, a worker killed mid-run costs only its batch, and runs resume across executors
(Ray -> in process after a kill; in process -> Ray for a trace). Each Ray run costs tens of seconds
of worker start-up, so each test checks several things of one run."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence

import pytest

from auditor.core.cache import ContentCache
from auditor.core.store import RunStore
from auditor.records import load_record
from auditor.studies.progress import QuietProgress, WorkerThroughput
from auditor.studies.prompt_audit import resume_audit, start_audit
from auditor.studies.run import Resumption
from tests.test_executors import cache_rows, options, run_fresh
from tests.test_prompt_audit import StopAfter, check_run_folder

ray = pytest.importorskip("ray", reason="the Ray executor needs the ray extra: pip install 'auditor[ray]'")


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """One local Ray for the module; its workers load models offline, as the tests' driver does.

    Ray gives a one-CPU worker one torch thread; a CPU matmul's float sums depend on the
    thread count, so the workers get the driver's for embeddings equal to the last bit.

    One CPU, so one worker per stage: every worker is a process that imports torch and loads its
    model (about 5 s of CPU), and under ``make test`` the two cores are already busy; a killed
    worker is still restarted and its batch run again, and every result still crosses from a
    worker to the driver. Ray keeps idle workers up to one per CPU, so a stage's actor would end
    the idle worker that described the stage's model, and every stage's ``describe`` would start a
    process and import torch again; a machine with more CPUs keeps it, as this limit does.
    """
    import torch

    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": str(torch.get_num_threads())}
    ray.init(
        num_cpus=1, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env},
        _system_config={"num_workers_soft_limit": 8},
    )  # fmt: skip
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def sequential(tiny_models, tmp_path_factory):
    """The sequential executor's record, run folder and cache rows, the reference of every Ray run here."""
    return run_fresh(tiny_models, tmp_path_factory.mktemp("reference"), "sequential")


def test_ray_executor_gives_the_sequential_record_and_cache(tiny_models, tmp_path, sequential):
    sequential, seq_dir, seq_cache = sequential
    on_ray, ray_dir, ray_cache = run_fresh(tiny_models, tmp_path, "ray")
    check_run_folder(ray_dir, images=3)
    assert load_record(ray_dir / "record.json") == on_ray
    assert on_ray.status == "completed" and on_ray.config.executor == "ray"
    assert on_ray.config.model_copy(update={"executor": "sequential"}) == sequential.config
    assert on_ray.prompt_sets == sequential.prompt_sets  # same images, same bytes
    assert on_ray.answers == sequential.answers
    assert on_ray.concepts == sequential.concepts
    assert on_ray.scores == sequential.scores
    assert ray_cache == seq_cache  # every image, answer and embedding cached under the same key, same value
    counts = {record.config.executor: {t.stage: (t.computed, t.cached) for t in record.timings}
              for record in (sequential, on_ray)}  # fmt: skip
    assert counts["ray"] == counts["sequential"]
    for prompt_set in on_ray.prompt_sets:  # the images were written by the driver, not only cached
        assert all((ray_dir / i.file).read_bytes() == (seq_dir / i.file).read_bytes() for i in prompt_set.images)


class KillAWorker(StopAfter):
    """Kills (SIGKILL) the first worker of ``kill`` to deliver a batch, as a lost node or an OOM kill
    would, remembers every worker that delivered one, and presses Ctrl-C once ``stage`` advanced ``count``."""

    def __init__(self, kill: str, stage: str, count: int):
        super().__init__(stage, count)
        self.kill = kill
        self.killed: int | None = None
        self.pids: list[int] = []

    def workers(self, stage: str, workers: Sequence[WorkerThroughput]) -> None:
        if stage != self.kill:
            return
        self.pids = [worker.pid for worker in workers]
        if self.killed is None:
            self.killed = workers[0].pid
            os.kill(self.killed, signal.SIGKILL)


def test_a_killed_worker_loses_only_its_batch_and_the_run_resumes_in_process(tiny_models, tmp_path, sequential):
    """A generation worker killed after its first batch: every image made once, none missing. Then Ctrl-C in
    the VQA stage, and the run resumed in process recomputes nothing and ends with the sequential results."""
    reference, _, reference_cache = sequential
    store = RunStore(tmp_path / "runs")
    cache = ContentCache(tmp_path / "cache.sqlite")
    progress = KillAWorker("generate", "perceive", 4)
    try:  # no embeddings: the kill is in generation, and the answers check the images' readers
        with pytest.raises(KeyboardInterrupt):
            start_audit(options(tiny_models, "ray", embedder=None), store, cache, progress, run_name="r").run()
        made, answered = cache.misses["generate"], cache.entries("perceive")
    finally:
        cache.close()
    assert progress.killed is not None and progress.pids[-1] != progress.killed  # Ray restarted it
    images = sum(len(prompt_set.images) for prompt_set in reference.prompt_sets)
    assert made == images  # each image computed once, though its worker died
    partial = load_record(store.root / "r" / "record.json")
    assert partial.status == "interrupted" and partial.errors[-1].stage == "perceive"
    assert 0 < answered < cache_size(reference_cache, "perceive")

    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        record = resume_audit("r", store, cache, QuietProgress(), Resumption(executor="sequential")).run()
        misses = dict(cache.misses)
    finally:
        cache.close()
    assert record.status == "completed" and record.errors == [] and record.config.executor == "sequential"
    assert misses.get("generate", 0) == 0 and misses["perceive"] == cache_size(reference_cache, "perceive") - answered
    assert record.prompt_sets == reference.prompt_sets and record.answers == reference.answers
    # Every item stored once, none missing: each image and answer cached as in the reference.
    assert cache_rows(tmp_path / "cache.sqlite") == [row for row in reference_cache if row[1] != "embed"]
    check_run_folder(store.root / "r", images=3)


def cache_size(rows, stage: str) -> int:
    return sum(1 for row in rows if row[1] == stage)


def run_round(tiny_models, tmp_path, executor: str):
    """An exploration's round on the tiny models: two prompt sets share two images (the same prompt and
    seeds) and ask them different questions; chunks of two, so under Ray an image arrives while the
    chunk with its bytes is still being computed. Returns the answers, the reader's counts and the cache."""
    from auditor.core.environment import collect_environment
    from auditor.executors.generation import PromptRequest
    from auditor.records import GenerationSettings, PerceptionSettings, RunConfig, RunRecord
    from auditor.studies.explore_rounds import RoundQuestions
    from auditor.studies.run import StudyRun, spec_ref

    config = RunConfig(
        prompt="a photo of a doctor", llm="offline", t2i=spec_ref(f"diffusers:{tiny_models.t2i}"),
        vqa=spec_ref(f"blip2:{tiny_models.vqa}"), embedder=None, images_per_prompt=3, seeds=[0, 1, 2],
        generation=GenerationSettings(steps=2, batch_size=2),
        perception=PerceptionSettings(max_new_tokens=4, caption_max_new_tokens=6), executor=executor,
    )  # fmt: skip
    record = RunRecord(run_id="run", config=config, environment=collect_environment())
    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        study = StudyRun(tmp_path / "run", record, cache, QuietProgress(), device="cpu")
        requests = [
            PromptRequest("c001/initial", "a photo of a doctor", indices=(0, 1, 2)),
            PromptRequest("c001/gender/0", "a photo of a doctor", indices=(1, 2)),
        ]
        gender, age = {"gender": "is this a man or a woman?"}, {"age": "is this person young or old?"}
        asked = {("c001/initial", i): gender for i in range(3)} | {("c001/gender/0", i): gender | age for i in (1, 2)}
        reader = RoundQuestions(study, asked, "what is in the picture?", lambda _answers: None)
        reader.chunk_size = 2
        study.run_images(requests, [reader])
        return reader.answers(), (reader.counts.computed, reader.counts.cached)
    finally:
        cache.close()


def test_per_image_questions_on_ray_give_the_sequential_answers_chunks_and_cache(tiny_models, tmp_path):
    sequential = run_round(tiny_models, tmp_path / "sequential", "sequential")
    on_ray = run_round(tiny_models, tmp_path / "ray", "ray")
    answers, counts = on_ray
    assert [[(a.image_index, sorted(a.answers)) for a in answers[pid]] for pid in answers] == [
        [(0, ["gender"]), (1, ["gender"]), (2, ["gender"])],
        [(1, ["age", "gender"]), (2, ["age", "gender"])],
    ]
    assert on_ray == sequential
    # Chunks [0, 1] and then [2, 1 again for its new question]: the same two forward passes on both.
    assert counts == (4, 0)
    assert cache_rows(tmp_path / "ray" / "cache.sqlite") == cache_rows(tmp_path / "sequential" / "cache.sqlite")


def trace_run(tiny_models, tiny_tracing_models, folder, executor: str, progress=None):
    """Two caption triplets of ``folder.parent``'s captions, two seeds each (12 traced images in batches of 4),
    their objects from the tiny BLIP-2 and their CLIP embeddings, in ``folder``'s own runs folder and cache."""
    from auditor.studies.trace import start_trace
    from tests.test_trace_study import trace_options, write_captions

    captions = folder.parent / "captions.csv"
    if not captions.exists():
        write_captions(folder.parent)
    options = trace_options(
        tiny_models, tiny_tracing_models, captions, vqa=f"blip2:{tiny_models.vqa}",
        embedders=[f"clip:{tiny_models.clip}"], detector=None, segmenter=None, limit=2, executor=executor,
    )  # fmt: skip
    store, cache = RunStore(folder / "runs"), ContentCache(folder / "cache.sqlite")
    try:
        return start_trace(options, store, cache, progress or QuietProgress(), run_name="t").run()
    finally:
        cache.close()


def test_a_trace_interrupted_in_process_resumes_on_ray_with_the_sequential_results(
    tiny_models, tiny_tracing_models, tmp_path
):
    """Traced generation, VQA and embeddings on Ray workers: the same images, traces, answers, embeddings and
    scores as in process, and the images stored before Ctrl-C are not made again."""
    from auditor.records import TraceRecord
    from auditor.studies.trace import resume_trace
    reference = trace_run(tiny_models, tiny_tracing_models, tmp_path / "sequential", "sequential")
    with pytest.raises(KeyboardInterrupt):
        trace_run(tiny_models, tiny_tracing_models, tmp_path / "moved", "sequential", StopAfter("generate", 4))
    store, cache = RunStore(tmp_path / "moved" / "runs"), ContentCache(tmp_path / "moved" / "cache.sqlite")
    try:
        assert cache.entries("trace") == 4
        record = resume_trace("t", store, cache, QuietProgress(), Resumption(executor="ray")).run()
    finally:
        cache.close()
    assert record.status == "completed" and record.errors == [] and record.config.executor == "ray"
    assert load_record(store.root / "t" / "record.json", TraceRecord) == record
    timing = {t.stage: (t.computed, t.cached) for t in record.timings}
    assert timing["generate"] == (8, 4) and timing["perceive"] == (12, 0) and timing["embed"] == (12, 0)
    assert record.config.model_copy(update={"executor": "sequential"}) == reference.config
    assert record.triplets == reference.triplets  # the same words traced, chosen with a worker's tokenizer
    assert record.prompt_sets == reference.prompt_sets  # the same image bytes
    assert record.answers == reference.answers and record.images == reference.images
    assert record.pairs == reference.pairs  # text, latent, pixel and embedding similarities
    assert record.objects == reference.objects and record.chi_square == reference.chi_square
    # Every trace (z0, encodings, 8-bit word maps), answer and embedding cached under the same key, same bytes.
    assert cache_rows(tmp_path / "moved" / "cache.sqlite") == cache_rows(tmp_path / "sequential" / "cache.sqlite")


def test_without_a_shared_run_folder_the_images_go_through_the_object_store(tiny_models, tmp_path, sequential):
    """Readers' workers that do not see the run folder get each chunk's PNG bytes in its dataset row (checked
    against the recorded sha256 as files are): the sequential run's embeddings, bit for bit."""
    import shutil

    from auditor.executors.perception import EmbedReader
    from auditor.executors.ray import RayExecutor, RayOptions
    from auditor.studies.run import EMBED_BATCH_SIZE, StudyRun

    reference, reference_dir, reference_cache = sequential
    shutil.copytree(reference_dir, tmp_path / "run")
    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        study = StudyRun(tmp_path / "run", reference.model_copy(deep=True), cache, QuietProgress())
        reader = EmbedReader(study, EMBED_BATCH_SIZE)
        RayExecutor(RayOptions(shared_files=False)).read_stored(study, [reader])
    finally:
        cache.close()
    assert reader.counts.computed == sum(len(s.images) for s in reference.prompt_sets)
    assert cache_rows(tmp_path / "cache.sqlite") == [row for row in reference_cache if row[1] == "embed"]


def test_on_ray_the_driver_says_which_prompts_are_cut_and_refuses_a_folder_lacking_images_at_once(
    tiny_models, tmp_path
):
    """As in process: the text encoder's unread end of a long prompt is a notice (learnt where the model is
    described, not by loading it again), and a folder lacking images fails before any batch, naming them all."""
    from PIL import Image

    from auditor.core.environment import collect_environment
    from auditor.core.errors import AuditorError
    from auditor.executors.generation import PromptRequest, text_to_image_recipe
    from auditor.executors.ray import RemoteModel
    from auditor.executors.ray_workers import Placement
    from auditor.records import GenerationSettings, RunConfig, RunRecord
    from auditor.studies.run import StudyRun, spec_ref

    notices: list[str] = []

    class Notices(QuietProgress):
        def notice(self, message: str) -> None:
            notices.append(message)

    def study(t2i: str, name: str) -> StudyRun:
        config = RunConfig(
            prompt="a photo of a nurse", llm="offline", t2i=spec_ref(t2i), vqa=spec_ref("blip2:unused"),
            embedder=None, images_per_prompt=2, seeds=[0, 1], generation=GenerationSettings(steps=1, batch_size=2),
            executor="ray",
        )  # fmt: skip
        record = RunRecord(run_id=name, config=config, environment=collect_environment())
        return StudyRun(tmp_path / name, record, cache, Notices(), device="cpu")

    long = "a photo of a nurse, " + "very " * 40 + "in a city"
    folder = tmp_path / "images"
    folder.mkdir()
    Image.new("RGB", (8, 8)).save(folder / "nurse.png")
    (folder / "manifest.json").write_text('{"a photo of a nurse": ["nurse.png"]}')
    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        cutting = study(f"diffusers:{tiny_models.t2i}", "cut")
        cutting.run_images(
            [PromptRequest("short", "a photo of a nurse", indices=(0,)), PromptRequest("long", long, indices=(0,))]
        )
        # A prompt known only after the model was described (a trace's) is asked of a worker.
        remote = RemoteModel.load(text_to_image_recipe(cutting), Placement(num_gpus=0, num_cpus=1, workers=1))
        later = remote.cut_prompts([long, "a photo of a nurse"])
        lacking = study(f"folder:{folder}", "folder")
        with pytest.raises(AuditorError) as caught:
            lacking.run_images([PromptRequest("nurse", "a photo of a nurse"), PromptRequest("long", long)])
        made = cache.entries("generate")
    finally:
        cache.close()
    cut = [notice for notice in notices if notice.startswith("the text encoder reads only")]
    assert cut == [f"the text encoder reads only the start of {long!r}: 'very " + cut[0].split(": 'very ", 1)[1]]
    assert cut[0].endswith(" in a city' is cut, so the images cannot show it")
    assert later == [(long, cut[0].split(": '", 1)[1].removesuffix("' is cut, so the images cannot show it"))]
    assert str(caught.value).startswith(f"folder {folder}: ")
    assert "has 1 images, image 2 was asked for" in str(caught.value) and f"no images for prompt {long!r}" in str(
        caught.value
    )
    assert made == 2  # the diffusers run's two images; not one of the folder's
