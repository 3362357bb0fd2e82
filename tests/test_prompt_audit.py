"""`auditor prompt` end to end on tiny random models: records, resume, bad input."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from auditor.core.cache import ContentCache
from auditor.core.errors import AuditorError
from auditor.core.store import RunStore
from auditor.records import GenerationSettings, PerceptionSettings, load_record
from auditor.studies.progress import QuietProgress
from auditor.studies.prompt_audit import PromptAuditOptions, resume_audit, start_audit
from tests.clitools import run_auditor
from tests.fake_openai import FAKE_API_KEY

PROMPT = "a photo of a pharmacist"


def tiny_args(tiny_models, images: int = 2) -> list[str]:
    return [
        "--llm", "offline",
        "--t2i", f"diffusers:{tiny_models.t2i}",
        "--vqa", str(tiny_models.vqa),
        "--embedder", f"clip:{tiny_models.clip}",
        "--images", str(images),
        "--max-axes", "2",
        "--max-counterfactuals", "2",
        "--steps", "2",
    ]  # fmt: skip


def check_run_folder(run_dir: Path, images: int) -> None:
    """Everything the record claims is on disk, and every image was asked every question."""
    record = load_record(run_dir / "record.json")
    assert record.status == "completed"
    assert record.plan is not None and record.scores is not None
    sets = record.prompt_sets
    assert len(sets) == 1 + sum(len(axis.counterfactuals) for axis in record.plan.axes)
    for prompt_set in sets:
        assert [image.seed for image in prompt_set.images] == record.config.seeds[:images]
        for image in prompt_set.images:
            assert hashlib.sha256((run_dir / image.file).read_bytes()).hexdigest() == image.sha256
        answers = record.answers[prompt_set.prompt_id]
        assert len(answers) == images
        assert all(set(a.answers) == {axis.name for axis in record.plan.axes} and a.caption is not None for a in answers)
    assert [axis.axis for axis in record.scores.axes] == [axis.name for axis in record.plan.axes]
    stages = {"plan", "generate", "perceive", "score"} | ({"embed"} if record.config.embedder else set())
    assert {t.stage for t in record.timings} == stages | {"report"}
    assert record.config.t2i.fingerprint and record.config.vqa.fingerprint
    assert (run_dir / "report.html").is_file()


def test_prompt_audit_end_to_end_score_reproduces_it_and_a_rerun_computes_nothing_new(tiny_models, tmp_path):
    # A fresh process: what it records about its environment (WordNet) is its own.
    result = run_auditor("prompt", PROMPT, *tiny_args(tiny_models), "--json", "--name", "e2e", process=True)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    run_dir = Path(report["run_dir"])
    check_run_folder(run_dir, images=2)
    record = load_record(run_dir / "record.json")
    assert any(cf.embedding_similarity is not None for axis in record.scores.axes for cf in axis.counterfactuals)
    assert record.environment.wordnet == "3.0"  # the concepts came from WordNet 3.0, and the record says so

    rescored = run_auditor("score", str(run_dir), "--json")
    assert rescored.returncode == 0, rescored.stderr
    axes = json.loads(rescored.stdout)["axes"]
    for axis in record.scores.axes:
        assert axes[axis.axis]["cas"] == pytest.approx([cf.cas for cf in axis.counterfactuals])
        assert axes[axis.axis]["bav"] == pytest.approx(axis.bav)

    # The same audit again (same cache, another runs folder): everything comes from the cache.
    runs = tmp_path / ("a-long-folder-name-" * 8)  # --quiet prints the run folder on one line, however long
    second = run_auditor(
        "prompt", PROMPT, *tiny_args(tiny_models), "--quiet", "--name", "second", env={"AUDITOR_RUNS_DIR": str(runs)}, process=True
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout == f"{runs / 'second'}\n"
    record = load_record(runs / "second" / "record.json")
    timings = {t.stage: t for t in record.timings}
    assert timings["plan"].computed == 0 and timings["plan"].cached == 1
    assert timings["generate"].computed == 0 and timings["generate"].cached == 10
    assert timings["perceive"].computed == 0 and timings["perceive"].cached == 10


def test_axes_the_plan_drops_are_named_on_the_terminal_and_in_the_json(tiny_models, tmp_path):
    """`--axes` asked for but left out of the plan (not for this prompt, over --max-axes) are said, not only in
    the plan transcript: in the --json output and record, and on the terminal as the run goes and in its notes."""
    args = [*tiny_args(tiny_models, images=1), "--axes", "gender,setting,age,ethnicity"]  # tiny_args: --max-axes 2
    dropped = {"setting": "the axis library does not apply it to person prompts", "ethnicity": "over --max-axes 2"}
    note = (
        f"--axes dropped for '{PROMPT}': setting (the axis library does not apply it to person prompts); "
        "ethnicity (over --max-axes 2)."
    )
    machine = run_auditor("prompt", PROMPT, *args, "--json", "--name", "json")
    assert machine.returncode == 0, machine.stderr
    report = json.loads(machine.stdout)
    assert [axis["name"] for axis in report["plan"]] == ["gender", "age"]
    assert report["planner"]["dropped_axes"] == dropped and note in report["notes"]
    assert load_record(Path(report["run_dir"]) / "record.json").plan.dropped_axes == dropped

    person = run_auditor("prompt", PROMPT, *args, "--name", "terminal", env={"COLUMNS": "400"}, process=True)
    assert person.returncode == 0, person.stderr
    assert f"note: {note}" in person.stderr  # when the plan is made, not only after the images
    assert f"- {note}" in person.stdout  # the report's notes


def test_a_vqa_concurrency_a_local_vqa_model_cannot_use_is_said_once(tiny_models, tmp_path):
    """Only a hosted VQA model (openai:) takes requests at once; a local one is told so, not silently ignored."""
    args = [*tiny_args(tiny_models, images=1), "--embedder", "none"]
    asked = run_auditor("prompt", PROMPT, *args, "--vqa-concurrency", "3", "--name", "asked", env={"COLUMNS": "400"})
    assert asked.returncode == 0, asked.stderr
    unused = f"--vqa-concurrency 3 is not used: blip2:{tiny_models.vqa} answers on this machine"
    assert asked.stderr.count(unused) == 1
    default = run_auditor("prompt", PROMPT, *args, "--name", "default")
    assert default.returncode == 0 and "--vqa-concurrency" not in default.stderr


class StopAfter(QuietProgress):
    """A progress reporter that presses Ctrl-C once ``stage`` has advanced ``count`` units."""

    def __init__(self, stage: str, count: int):
        self.stage, self.count, self.seen = stage, count, 0

    def advance(self, stage: str, amount: int = 1) -> None:
        if stage == self.stage:
            self.seen += amount
            if self.seen >= self.count:
                raise KeyboardInterrupt


def tiny_options(tiny_models) -> PromptAuditOptions:
    return PromptAuditOptions(
        prompt=PROMPT,
        llm="offline",
        t2i=f"diffusers:{tiny_models.t2i}",
        vqa=f"blip2:{tiny_models.vqa}",
        embedder=None,
        images=2,
        generation=GenerationSettings(steps=2, batch_size=2),
        perception=PerceptionSettings(batch_size=8, max_new_tokens=4, caption_max_new_tokens=4),
        max_axes=2,
        max_counterfactuals=2,
    )


@pytest.mark.parametrize("stage, stop_at", [("generate", 4), ("perceive", 4)])
def test_resume_after_interruption_recomputes_nothing_finished(tiny_models, tmp_path, stage, stop_at):
    store = RunStore(tmp_path / "runs")
    cache = ContentCache(tmp_path / "cache.sqlite")
    audit = start_audit(tiny_options(tiny_models), store, cache, StopAfter(stage, stop_at), run_name="r")
    with pytest.raises(KeyboardInterrupt):
        audit.run()
    partial = load_record(audit.run_dir / "record.json")
    assert partial.status == "interrupted"
    assert partial.errors[-1].stage == stage
    per_image = 1 if stage == "generate" else 3  # answers are cached per question: two axes and the caption
    done = cache.entries(stage) // per_image
    assert 0 < done < 10
    cache.close()

    leftovers = [audit.run_dir / ".record.json.k1ll3d.tmp", audit.run_dir / "images" / ".000.png.k1ll3d.tmp"]
    for leftover in leftovers:  # what a kill -9 between writing and renaming leaves
        leftover.parent.mkdir(parents=True, exist_ok=True)
        leftover.write_bytes(b"half")
    cache = ContentCache(tmp_path / "cache.sqlite")
    resumed = resume_audit("r", store, cache, QuietProgress())
    record = resumed.run()
    assert record.status == "completed" and record.errors == []
    assert not any(leftover.exists() for leftover in leftovers)
    timing = {t.stage: t for t in record.timings}[stage]
    assert timing.cached == done and timing.computed == 10 - done
    assert cache.hits[stage] == done * per_image and cache.misses[stage] == (10 - done) * per_image
    assert cache.entries("generate") == 10
    check_run_folder(resumed.run_dir, images=2)


def interrupted_audit(tiny_models, store: RunStore, cache_file: Path, stage: str, count: int) -> Path:
    """The folder of audit "r", stopped by Ctrl-C once ``stage`` has advanced ``count`` units (its cache closed)."""
    cache = ContentCache(cache_file)
    audit = start_audit(tiny_options(tiny_models), store, cache, StopAfter(stage, count), run_name="r")
    with pytest.raises(KeyboardInterrupt):
        audit.run()
    cache.close()
    return audit.run_dir


def test_a_resume_without_the_cache_takes_the_images_the_run_folder_holds(tiny_models, tmp_path):
    """A run moved to another machine (or whose cache was cleared) keeps its finished images: the record names
    the weights, seed and bytes of each, so the resume takes each file that is still the recorded one, makes only
    the others, and fills the new cache with them."""
    store = RunStore(tmp_path / "runs")
    run_dir = interrupted_audit(tiny_models, store, tmp_path / "cache.sqlite", "generate", 6)
    partial = load_record(run_dir / "record.json")
    kept = {(s.prompt_id, i.index): i.sha256 for s in partial.prompt_sets for i in s.images}
    assert len(kept) == 6
    altered = run_dir / partial.prompt_sets[0].images[0].file  # a file that is not the recorded one
    altered.write_bytes(altered.read_bytes() + b"\0")

    fresh = ContentCache(tmp_path / "other-machine.sqlite")
    record = resume_audit("r", store, fresh, QuietProgress()).run()
    generate = {t.stage: t for t in record.timings}["generate"]
    assert (generate.cached, generate.computed) == (5, 10 - 5)  # the altered one is made again
    assert fresh.entries("generate") == 10
    final = {(s.prompt_id, i.index): i.sha256 for s in record.prompt_sets for i in s.images}
    assert all(final[key] == sha for key, sha in kept.items())  # the same images, the altered one made again
    fresh.close()


@pytest.mark.parametrize("earlier", ["same", "other weights", "other bytes", "unknown bytes"])
def test_a_resume_without_the_cache_takes_the_answers_the_record_holds(tiny_models, tmp_path, earlier):
    """The answers an interrupted run recorded survive a lost cache too, where the record says the same VQA weights
    (in the same precision, on the same kind of device) gave them about the same image bytes: only the others are
    asked, and the new cache gets them all. Answers from other weights, about other bytes (images made again since),
    or about bytes a record written before auditor kept them does not name, are asked again."""
    store = RunStore(tmp_path / "runs")
    record_file = interrupted_audit(tiny_models, store, tmp_path / "cache.sqlite", "perceive", 4) / "record.json"
    partial = load_record(record_file)
    answered = {(pid, row.image_index): row for pid, rows in partial.answers.items() for row in rows}
    assert 0 < len(answered) < 10
    images = {(s.prompt_id, i.index): i.sha256 for s in partial.prompt_sets for i in s.images}
    assert all(row.image_sha256 == images[key] for key, row in answered.items())
    about = {"other bytes": "0" * 64, "unknown bytes": None}
    if earlier == "other weights":
        vqa = partial.results_from["vqa"].model_copy(update={"fingerprint": "0" * 64})
        partial = partial.model_copy(update={"results_from": {**partial.results_from, "vqa": vqa}})
    elif earlier in about:
        partial = partial.model_copy(update={"answers": {
            pid: [row.model_copy(update={"image_sha256": about[earlier]}) for row in rows]
            for pid, rows in partial.answers.items()
        }})  # fmt: skip
    record_file.write_text(partial.model_dump_json(), encoding="utf-8")

    fresh = ContentCache(tmp_path / "other-machine.sqlite")
    record = resume_audit("r", store, fresh, QuietProgress()).run()
    assert record.status == "completed"
    perceive = {t.stage: t for t in record.timings}["perceive"]
    reused = len(answered) if earlier == "same" else 0
    assert (perceive.cached, perceive.computed) == (reused, 10 - reused)
    assert fresh.entries("perceive") == 10 * 3  # two axes and the caption per image, kept or asked
    final = {(pid, row.image_index): row for pid, rows in record.answers.items() for row in rows}
    assert all(final[key] == row for key, row in answered.items())  # greedy answers: the same either way
    fresh.close()


def test_a_completed_run_whose_resume_fails_before_changing_a_file_is_left_as_it_was(
    tiny_models, vqa_without_weights, tmp_path
):
    """A mistyped model on ``--resume`` of a finished audit: its record and page stay byte for byte (the status, the
    scores and the models), and the error says so instead of offering a resume."""
    from auditor.studies.run import Resumption

    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    done = start_audit(tiny_options(tiny_models), store, cache, QuietProgress(), run_name="r").run()
    assert done.status == "completed" and done.scores is not None and done.concepts
    kept = {name: store.resolve("r") / name for name in ("record.json", "report.html")}
    before = {name: (path.read_bytes(), path.stat().st_mtime_ns) for name, path in kept.items()}
    elsewhere = Resumption(models={"vqa": f"blip2:{vqa_without_weights}"})  # a BLIP-2 config without weights
    attempt = resume_audit("r", store, cache, QuietProgress(), elsewhere)
    with pytest.raises(AuditorError, match="cannot load VQA model"):
        attempt.run()
    assert attempt.left_as_it_was and attempt.record.status == "completed" and attempt.record.scores == done.scores
    assert {name: (path.read_bytes(), path.stat().st_mtime_ns) for name, path in kept.items()} == before
    cache.close()

    typo = run_auditor("prompt", "--resume", "r", "--runs-dir", str(store.root), "--t2i", f"diffusers:{tmp_path}/nope")
    assert typo.returncode == 2 and typo.stderr.strip() == (  # refused before the run is touched
        f"error: --t2i diffusers:{tmp_path}/nope: there is no file or folder '{tmp_path}/nope'; point it at a local "
        "copy of the text-to-image model"
    )
    resume = ["prompt", "--resume", "r", "--runs-dir", str(store.root)]
    clip = run_auditor(*resume, "--t2i", f"diffusers:{tiny_models.clip}")
    assert clip.returncode == 2 and clip.stderr.strip() == (  # its files say it is no pipeline: refused likewise
        f"error: --t2i diffusers:{tiny_models.clip}: '{tiny_models.clip}' is not a diffusers pipeline folder: it has "
        "no model_index.json"
    )
    other = run_auditor(*resume, "--vqa", f"blip2:{vqa_without_weights}")
    (error,) = [line for line in other.stderr.splitlines() if line.startswith("error:")]
    assert other.returncode == 1 and "Traceback" not in other.stderr and "cannot load VQA model" in error
    assert error.endswith(
        f"(run {store.resolve('r')} is left as it was: completed, with its earlier results; what this attempt "
        "computed is cached for the next)"
    )
    assert {name: (path.read_bytes(), path.stat().st_mtime_ns) for name, path in kept.items()} == before


def test_a_run_failing_on_a_full_disk_raises_its_own_error_when_the_record_cannot_be_saved(tiny_models, tmp_path,
                                                                                           monkeypatch):
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    audit = start_audit(tiny_options(tiny_models), store, cache, QuietProgress(), run_name="r")

    def full(path, _record):
        raise AuditorError(f"cannot write {path}: No space left on device")

    def plan_on_a_full_disk() -> None:  # the disk fills up during a stage: no record can be saved after it
        monkeypatch.setattr("auditor.studies.run.write_model", full)
        raise AuditorError("cannot write images/000.png: No space left on device")

    audit.plan = plan_on_a_full_disk
    with pytest.raises(AuditorError, match="images/000.png"):  # the stage's error, not the failed save's
        audit.run()
    assert load_record(audit.run_dir / "record.json").status == "running"  # as far as the disk let it get
    cache.close()


def test_a_run_writes_its_page_before_its_record_says_how_it_ended(tiny_models, tmp_path, monkeypatch):
    """A kill between the two then leaves a record a resume finishes, never a completed run without its page."""
    from auditor.studies.run import StudyRun

    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    audit = start_audit(tiny_options(tiny_models), store, cache, QuietProgress(), run_name="r")
    page = audit.run_dir / "report.html"
    pages_at_ended_saves = []
    save = StudyRun.save

    def noted(study) -> None:
        if study.record.status != "running":
            pages_at_ended_saves.append(page.is_file() and study.record.status in page.read_text(encoding="utf-8"))
        save(study)

    monkeypatch.setattr(StudyRun, "save", noted)
    assert audit.run().status == "completed"
    cache.close()
    assert pages_at_ended_saves and all(pages_at_ended_saves)


def test_a_resume_that_turns_the_embedder_off_keeps_no_embedding_time_or_scores(tiny_models, tmp_path):
    from auditor.studies.run import Resumption

    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    options = tiny_options(tiny_models)
    options.embedder = f"clip:{tiny_models.clip}"
    done = start_audit(options, store, cache, QuietProgress(), run_name="r").run()
    assert "embed" in {t.stage for t in done.timings}
    assert any(cf.embedding_similarity is not None for axis in done.scores.axes for cf in axis.counterfactuals)
    again = resume_audit("r", store, cache, QuietProgress(), Resumption(models={"embedder": "none"})).run()
    assert again.status == "completed" and again.config.embedder is None
    assert "embed" not in {t.stage for t in again.timings}  # no time shown for embeddings the record no longer has
    assert all(cf.embedding_similarity is None for axis in again.scores.axes for cf in axis.counterfactuals)
    cache.close()


@pytest.mark.parametrize(
    "args, message",
    [
        (["", "--llm", "offline"], "prompt is empty"),
        (["--llm", "offline"], 'no prompt given: auditor prompt "a photo of a pharmacist" audits one'),
        ([PROMPT, "--images", "0", "--llm", "offline"], "'--images': Input should be greater than or equal to 1"),
        ([PROMPT, "--t2i", "nosuch:model", "--llm", "offline"], "unknown text-to-image backend 'nosuch:model'"),
        ([PROMPT, "--vqa", "nosuch:model", "--llm", "offline"], "unknown VQA backend"),
        ([PROMPT, "--llm", "offline", "--seed", "x"], "--seed takes an integer"),
    ],
)
def test_bad_input_is_one_line_and_creates_nothing(tmp_path, args, message):
    result = run_auditor("prompt", *args, process=True)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "option, given, expected",
    [
        ("--t2i", "diffusers:{clip}", "is not a diffusers pipeline folder: it has no model_index.json"),
        ("--vqa", "blip2:{t2i}", "is not a transformers model folder: it has no config.json"),
        ("--embedder", "clip:{t2i}", "is not a transformers model folder: it has no config.json"),
        ("--vqa", "blip2:{clip}", "is a 'clip' model, not 'blip-2'"),
        ("--vqa", "instructblip:{vqa}", "is a 'blip-2' model, not 'instructblip'"),
        ("--vqa", "hf:{clip}", (
            "is a 'clip' model, not a vision-language model transformers' AutoModelForImageTextToText loads"
        )),  # what a bare folder of no BLIP type is loaded as
        ("--embedder", "clip:{vqa}", "is a 'blip-2' model, not 'clip'"),
        ("--embedder", "dinov2:{clip}", "is a 'clip' model, not 'dinov2' or 'dinov2_with_registers'"),
    ],
)
def test_a_model_folder_of_another_kind_is_one_line_and_creates_nothing(tiny_models, tmp_path, option, given, expected):
    """A folder holding another kind of model (a saved CLIP model given as a diffusers pipeline, or as BLIP-2: both
    transformers folders, told apart by their config's model type) is refused by its files before a run folder is
    made: a failed run's resume advice would only repeat the error."""
    spec = given.format(clip=tiny_models.clip, t2i=tiny_models.t2i, vqa=tiny_models.vqa)
    models = {"--t2i": f"diffusers:{tiny_models.t2i}", "--vqa": str(tiny_models.vqa), "--embedder": "none"}
    words = [word for pair in (models | {option: spec}).items() for word in pair]
    result = run_auditor("prompt", PROMPT, "--llm", "offline", "--images", "1", "--steps", "2", *words)
    folder = spec.partition(":")[2]
    assert (result.returncode, result.stderr) == (2, f"error: {option} {spec}: {folder!r} {expected}\n")
    assert not (tmp_path / "runs").exists()


def test_without_an_openai_key_the_offline_planner_is_said_once_the_options_are_checked(tiny_models, tmp_path):
    """No --llm and no key: the audit plans offline and says so, but only once its models are found; a mistyped
    model is the one line its person reads."""
    typo = run_auditor("prompt", PROMPT, "--t2i", f"diffusers:{tmp_path}/nope", env={"OPENAI_API_KEY": ""})
    assert (typo.returncode, typo.stderr) == (2, (
        f"error: --t2i diffusers:{tmp_path}/nope: there is no file or folder '{tmp_path}/nope'; point it at a local "
        "copy of the text-to-image model\n"
    ))  # fmt: skip
    args = [arg for arg in tiny_args(tiny_models, images=1) if arg not in ("--llm", "offline")]
    planned = run_auditor("prompt", PROMPT, *args, "--embedder", "none", env={"OPENAI_API_KEY": "", "COLUMNS": "400"})
    assert planned.returncode == 0, planned.stderr
    assert planned.stderr.count("note: OPENAI_API_KEY is not set: planning with the offline WordNet planner") == 1


def test_axes_none_of_which_fit_the_prompt_are_one_line_and_create_nothing(tmp_path):
    """--axes setting for a person: the offline plan has no axis to write, which the command finds before a run
    folder exists (one that fits is planned as usual, with the other named as dropped)."""
    result = run_auditor("prompt", "a photo of a nurse", "--llm", "offline", "--axes", "setting", process=True)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(
        "error: the offline planner found no plan: the axis library applies setting to other prompts"
    )
    assert not (tmp_path / "runs").exists()


def test_unwritable_output_folder_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = run_auditor("prompt", PROMPT, "--llm", "offline", "--runs-dir", str(blocker / "runs"), process=True)
    assert result.returncode == 2
    assert "cannot create run folder" in result.stderr and "Traceback" not in result.stderr


def test_missing_weights_name_the_model_and_resume_can_point_at_a_local_copy(tiny_models, tmp_path):
    command = [  # as typed: a resume may repeat it whole (its settings are the run's own)
        "prompt", PROMPT, "--llm", "offline", "--images", "1", "--steps", "2", "--max-axes", "1",
        "--max-counterfactuals", "2", "--name", "r",
    ]  # fmt: skip
    result = run_auditor(
        *command, "--t2i", "diffusers:nobody/no-such-model", "--embedder", "none", process=True
    )  # fmt: skip
    assert result.returncode == 1
    assert "nobody/no-such-model" in result.stderr and "--t2i" in result.stderr and "--resume" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    record = json.loads((tmp_path / "runs" / "r" / "record.json").read_text())
    assert record["status"] == "failed" and record["errors"][0]["stage"] == "generate"
    kept = record["command_options"]  # the settings as typed or defaulted; not where the models are, nor how it ran
    assert (kept["text"], kept["images"], kept["llm"], kept["seed"], kept["compile_models"]) == (PROMPT, 1, "offline",
                                                                                              None, False)
    assert not kept.keys() & {"t2i", "vqa", "embedder", "device", "executor", "resume", "runs_dir", "json_output"}

    refused = run_auditor("prompt", "--resume", "r", "--images", "3", "--compile")
    assert refused.returncode == 2
    assert "; --images 3 (the run's: 1), --compile (the run's: off) cannot" in refused.stderr
    another = run_auditor("prompt", "a photo of a chef", "--resume", "r")  # the argument as --help names it
    assert another.returncode == 2
    assert f"; PROMPT 'a photo of a chef' (the run's: '{PROMPT}') cannot change them" in another.stderr
    unset = run_auditor("prompt", "--resume", "r", "--seed", "7")
    assert unset.returncode == 2 and "; --seed 7 (not given when the run started) cannot" in unset.stderr

    resumed = run_auditor(
        *command, "--resume", "r", "--t2i", f"diffusers:{tiny_models.t2i}", "--vqa", str(tiny_models.vqa), "--quiet"
    )
    assert resumed.returncode == 0, resumed.stderr
    record = load_record(tmp_path / "runs" / "r" / "record.json")
    assert record.status == "completed" and record.config.t2i.model_id == str(tiny_models.t2i)
    assert record.config.images_per_prompt == 1  # the run's own settings, not the defaults


@pytest.mark.parametrize(
    ("given", "recorded"),
    [
        ("diffusers:./sd15", "diffusers:{cwd}/sd15"),
        ("Diffusers:models/../sd15", "Diffusers:models/../sd15"),  # no such folder here: a hub id's shape, kept
        ("diffusers:here/sd15", "diffusers:{cwd}/here/sd15"),  # a folder here, as the loader reads it
        ("mediapipe:here/face.tflite", "mediapipe:{cwd}/here/face.tflite"),
        ("openai:dall-e-3", "openai:dall-e-3"),  # a service's model name, though a folder here is called so
        ("diffusers:a/" + "x" * 5000, "diffusers:a/" + "x" * 5000),  # a name too long for the system: not a path
        ("./tiny-vqa", "{cwd}/tiny-vqa"),
        ("clip:~/clip", "clip:{home}/clip"),
        ("diffusers:/models/sd15", "diffusers:/models/sd15"),
        ("blip2:Salesforce/blip2-opt-2.7b", "blip2:Salesforce/blip2-opt-2.7b"),
        ("openai:gpt-4o-mini", "openai:gpt-4o-mini"),
    ],
)
def test_a_local_model_path_is_made_absolute_unless_it_is_a_ray_clusters(given, recorded, tmp_path, monkeypatch):
    from auditor.core.registry import with_absolute_path

    (tmp_path / "here" / "sd15").mkdir(parents=True)
    (tmp_path / "here" / "face.tflite").write_bytes(b"model")
    (tmp_path / "dall-e-3").mkdir()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert with_absolute_path(given) == recorded.format(cwd=tmp_path, home=tmp_path / "home")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert with_absolute_path(given) == given


def test_relative_model_paths_are_recorded_absolute_so_a_resume_from_another_folder_finds_them(tiny_models, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    relative = {name: os.path.relpath(getattr(tiny_models, name), tmp_path) for name in ("t2i", "vqa", "clip")}
    first = run_auditor(
        "prompt", PROMPT, "--llm", "offline", "--t2i", f"diffusers:{relative['t2i']}", "--vqa", relative["vqa"],
        "--embedder", f"clip:./{relative['clip']}", "--images", "1", "--steps", "2", "--max-axes", "1",
        "--max-counterfactuals", "2", "--name", "r", "--quiet",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    config = load_record(tmp_path / "runs" / "r" / "record.json").config
    assert config.t2i.spec == f"diffusers:{tiny_models.t2i}" and config.vqa.spec == str(tiny_models.vqa)
    assert config.embedder is not None and config.embedder.spec == f"clip:{tiny_models.clip}"

    again = run_auditor("prompt", "--resume", str(tmp_path / "runs" / "r"), "--quiet", cwd=tmp_path / "elsewhere")
    assert again.returncode == 0, again.stderr
    assert load_record(tmp_path / "runs" / "r" / "record.json").status == "completed"


def test_selftest_runs_offline_and_runs_every_model_each_time(tmp_path):
    for attempt in (1, 2):  # the second into the same folder: its models run again, nothing comes from a cache
        result = run_auditor("selftest", "--out", str(tmp_path / "st"), "--quiet")
        assert result.returncode == 0, result.stderr
        assert "MEANINGLESS" in result.stdout
        assert result.stdout.rstrip().endswith("selftest passed")  # no "scores above": --quiet shows none
        runs = [load_record(path) for path in (tmp_path / "st" / "runs").glob("*/record.json")]
        assert len(runs) == attempt and all(run.status == "completed" for run in runs)
        assert all(run.scores.intervals is not None for run in runs)  # the uncertainty code ran too
        for run in runs:
            assert {t.stage: t.cached for t in run.timings if t.stage in ("generate", "perceive", "embed")} == dict.fromkeys(
                ("generate", "perceive", "embed"), 0
            )


def test_the_command_selftest_prints_runs_its_audit_again(tiny_models, tmp_path):
    """A person reusing the selftest's models starts from its small settings, not the defaults' 50 steps and 6 axes
    (minutes on a CPU): the line it prints is a command the CLI takes, giving the same audit."""
    import shlex

    from auditor.commands.selftest import _command
    from auditor.records import GenerationSettings

    options = PromptAuditOptions(
        prompt="a photo of a pharmacist", llm="offline", t2i=f"diffusers:{tiny_models.t2i}",
        vqa=f"blip2:{tiny_models.vqa}", embedder=f"clip:{tiny_models.clip}", images=4,
        generation=GenerationSettings(steps=2, batch_size=4), max_axes=2, max_counterfactuals=2,
    )  # fmt: skip
    words = shlex.split(_command(options))
    assert words[:3] == ["auditor", "prompt", "a photo of a pharmacist"]
    ran = run_auditor(*words[1:], "--name", "again", "--quiet")
    assert ran.returncode == 0, ran.stderr
    config = load_record(tmp_path / "runs" / "again" / "record.json").config
    assert (config.images_per_prompt, config.generation.steps, config.generation.batch_size) == (4, 2, 4)
    assert (config.max_axes, config.max_counterfactuals, config.llm) == (2, 2, "offline")


def test_prompt_audit_planned_by_an_openai_compatible_llm(tiny_models, fake_openai, tmp_path):
    plan = {
        "gender": ["a photo of a male pharmacist", "a photo of a female pharmacist"],
        "age": ["a photo of a young pharmacist", "a photo of an old pharmacist"],
    }
    fake_openai.chat_replies(
        "Gender and age may be biased.",
        "Gender: male, female. Age: young, old.",
        f"Here is the JSON:\n```json\n{json.dumps(plan)}\n```",
    )
    args = tiny_args(tiny_models, images=1)
    args[args.index("--llm") + 1] = "openai:gpt-4o-mini"
    args[args.index("--embedder") + 1] = "none"
    result = run_auditor("prompt", PROMPT, *args, "--quiet", "--name", "llm")
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "runs" / "llm"
    record = load_record(run_dir / "record.json")
    assert record.plan.llm == "openai:gpt-4o-mini"
    assert {axis.name: axis.counterfactuals for axis in record.plan.axes} == plan
    assert record.plan.axes[0].question == "What is the gender (male, female, other) of the person in the image?"
    assert len(fake_openai.chat_requests()) == 3
    check_run_folder(run_dir, images=1)
    for path in run_dir.rglob("*"):
        if path.is_file() and path.suffix in {".json", ".html"}:
            assert FAKE_API_KEY not in path.read_text(encoding="utf-8"), f"API key leaked into {path.name}"


def editor(script: Path) -> dict[str, str]:
    """The environment that makes ``script`` (a Python file given the plan's path) the review's editor."""
    return {"EDITOR": f"{sys.executable} {script}", "VISUAL": ""}


def reviewed_run(tiny_models, script: Path, name: str):
    """``auditor prompt --review`` on the tiny models (one image, no embedder), ``script`` editing the plan."""
    args = tiny_args(tiny_models, images=1)
    args[args.index("--embedder") + 1] = "none"
    return run_auditor("prompt", PROMPT, *args, "--review", "--quiet", "--name", name, env=editor(script))


def test_review_edits_the_plan_before_anything_is_generated(tiny_models, tmp_path):
    """A review cancelled (the file emptied) generates nothing, and its resume opens the review again: $EDITOR
    then keeps one axis and replaces its counterfactuals; only the edited plan is generated."""
    cancel, script = tmp_path / "cancel.py", tmp_path / "editor.py"
    cancel.write_text("import sys\nopen(sys.argv[1], 'w').close()\n")
    script.write_text(
        "import sys, yaml\n"
        "path = sys.argv[1]\n"
        "plan = yaml.safe_load(open(path))\n"
        "plan['axes'] = [{'name': 'gender', 'counterfactuals': ['a photo of a man', 'a photo of a woman']}]\n"
        "yaml.safe_dump(plan, open(path, 'w'))\n"
    )
    cancelled = reviewed_run(tiny_models, cancel, "reviewed")
    # the person chose to stop: an interruption, not a failure, and the line says how to go on
    assert cancelled.returncode == 130
    kept = tmp_path / "runs" / "reviewed"
    assert cancelled.stderr.strip() == (
        f"error: review cancelled: the plan file was left empty (run kept in {kept}; continue it with --resume {kept})"
    )
    before = load_record(tmp_path / "runs" / "reviewed" / "record.json")
    assert before.config.review is True and before.plan is None and before.prompt_sets == []
    assert before.status == "interrupted"
    assert [(e.stage, e.message) for e in before.errors] == [("plan", "review cancelled: the plan file was left empty")]
    result = run_auditor("prompt", "--resume", "reviewed", "--quiet", env=editor(script))
    assert result.returncode == 0, result.stderr
    record = load_record(tmp_path / "runs" / "reviewed" / "record.json")
    assert record.plan.edited is True
    assert [(axis.name, axis.counterfactuals) for axis in record.plan.axes] == [
        ("gender", ["a photo of a man", "a photo of a woman"])
    ]
    assert [s.prompt for s in record.prompt_sets] == [PROMPT, "a photo of a man", "a photo of a woman"]


def test_an_invalid_review_edit_is_kept_and_its_resume_opens_it_again(tiny_models, tmp_path):
    """Without a terminal to ask again, an edit that is not a valid plan ends the review; the person's work is kept
    in the run folder (with the error on top), and the resume's review opens it, not the planner's plan."""
    broken, fixer = tmp_path / "broken.py", tmp_path / "fixer.py"
    broken.write_text("import sys\nopen(sys.argv[1], 'w').write('# my careful edit\\naxes: [\\n')\n")
    fixer.write_text(  # goes on only when it is shown the person's edit under the error
        "import sys\n"
        "text = open(sys.argv[1]).read()\n"
        "if '# my careful edit' not in text or not text.startswith('# error: the edited plan is not valid YAML'):\n"
        "    sys.exit(3)\n"
        "open(sys.argv[1], 'w').write(\n"
        "    'axes:\\n- name: gender\\n  counterfactuals: [a photo of a man, a photo of a woman]\\n'\n"
        ")\n"
    )
    failed = reviewed_run(tiny_models, broken, "r")
    draft = tmp_path / "runs" / "r" / "plan.edit.yaml"
    assert failed.returncode == 2 and f"the edit is kept in {draft}, and the next review opens it" in failed.stderr
    assert "# my careful edit" in draft.read_text()
    resumed = run_auditor("prompt", "--resume", "r", "--quiet", env=editor(fixer))
    assert resumed.returncode == 0, resumed.stderr
    record = load_record(tmp_path / "runs" / "r" / "record.json")
    assert [(axis.name, axis.counterfactuals) for axis in record.plan.axes] == [
        ("gender", ["a photo of a man", "a photo of a woman"])
    ]
    assert not draft.exists()  # accepted: nothing left to open next time

    cancel = tmp_path / "cancel.py"  # a review cancelled from the draft: the next one starts from the plan again
    cancel.write_text("import sys\nopen(sys.argv[1], 'w').close()\n")
    other_draft = tmp_path / "runs" / "c" / "plan.edit.yaml"
    assert reviewed_run(tiny_models, broken, "c").returncode == 2 and other_draft.exists()
    cancelled = run_auditor("prompt", "--resume", "c", "--quiet", env=editor(cancel))
    assert cancelled.returncode == 130 and not other_draft.exists()


class TerminateAfter(StopAfter):
    """A progress reporter that sends this process SIGTERM (a scheduler's time limit) once ``stage`` has advanced
    ``count`` units."""

    def advance(self, stage: str, amount: int = 1) -> None:
        if stage == self.stage:
            self.seen += amount
            if self.seen == self.count:
                os.kill(os.getpid(), signal.SIGTERM)


def signal_while_the_page_is_written(monkeypatch, number: signal.Signals) -> None:
    """Send this process ``number`` each time a run's page is about to be written (Ctrl-C or a scheduler's SIGTERM
    arriving while an ending run writes its record and page)."""
    import auditor.reporting as reporting

    write = reporting.write_html_report

    def signalled(record, run_dir):
        os.kill(os.getpid(), number)
        return write(record, run_dir)

    monkeypatch.setattr(reporting, "write_html_report", signalled)


def test_a_second_ctrl_c_while_a_stopping_run_writes_its_page_leaves_it_whole(tiny_models, tmp_path, monkeypatch):
    """Ctrl-C pressed twice: the first stops generation, the second comes while the record and page are written.
    It is ignored there (the run is stopping already), so the page a person opens next is whole."""
    signal_while_the_page_is_written(monkeypatch, signal.SIGINT)
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    try:
        study = start_audit(tiny_options(tiny_models), store, cache, StopAfter("generate", 2), run_name="r")
        with pytest.raises(KeyboardInterrupt):  # the first press
            study.run()
    finally:
        cache.close()
    assert load_record(study.run_dir / "record.json").status == "interrupted"
    assert (study.run_dir / "report.html").read_text(encoding="utf-8").rstrip().endswith("</html>")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Ctrl-C works again afterwards


def test_sigterm_while_a_completing_run_writes_its_page_waits_and_then_stops_nothing(
    tiny_models, tmp_path, monkeypatch, capsys
):
    """A scheduler's SIGTERM as a run that completed writes its page: it waits until the page and record are written
    (a record saying completed without its page, or a half page, is what it would leave otherwise), and then stops
    nothing: the run is not called a partial one to resume, and the command goes on to show it."""
    from auditor.cli import _terminate
    from auditor.commands.common import _noted_once, run_resumable

    signal_while_the_page_is_written(monkeypatch, signal.SIGTERM)
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGTERM, _terminate)  # as the command line installs it
    try:
        record = run_resumable(start_audit(tiny_options(tiny_models), store, cache, QuietProgress(), run_name="r"))
        # the SIGTERM was delivered once the page was written and noted: a second one stops the process at once, a
        # first Ctrl-C is noted as it would be while the result is shown
        assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == (signal.SIG_DFL, _noted_once)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        cache.close()
    assert record.status == "completed" == load_record(tmp_path / "runs" / "r" / "record.json").status
    assert (tmp_path / "runs" / "r" / "report.html").read_text(encoding="utf-8").rstrip().endswith("</html>")
    said = capsys.readouterr().err
    assert "note: the run has ended and is recorded" in said and "partial run" not in said


@pytest.mark.parametrize("swap", ["install", "put back"])
def test_a_signal_handled_as_the_hold_swaps_handlers_leaves_every_handler_as_it_was(monkeypatch, swap):
    """``signal.signal`` first runs the handler of a signal that came meanwhile, which may raise: a SIGTERM as the hold
    installs its handlers left Ctrl-C ignored for good, a Ctrl-C as it puts them back left SIGTERM swallowed. Here the
    interruption is raised by the swap itself, as CPython raises it, before the handler is changed."""
    from auditor.studies import run

    real_signal = signal.signal
    raised: list[int] = []

    def signal_with_one_pending(number, handler):
        swapping_in = handler is signal.SIG_IGN or getattr(handler, "__name__", "") == "<lambda>"
        if not raised and number == signal.SIGTERM and swapping_in == (swap == "install"):
            raised.append(number)
            raise KeyboardInterrupt  # as a pending signal's handler raises, before this handler is set
        return real_signal(number, handler)

    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(run.signal, "signal", signal_with_one_pending)
    ran = []
    try:
        with pytest.raises(KeyboardInterrupt), run.interruptions_held():
            ran.append(True)
    finally:
        monkeypatch.undo()
        after = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
        for number, handler in before.items():
            signal.signal(number, handler)
    assert raised and after == before
    assert ran == ([] if swap == "install" else [True])


def test_ctrl_c_once_the_result_is_shown_leaves_a_completed_run_exit_0(tiny_models, tmp_path):
    """A run that ended and was recorded has nothing left for Ctrl-C (or SIGTERM) to stop: pressed as its result
    prints, or as the interpreter exits, it does not turn the run into exit 130, a finalizer's traceback, or death by
    the signal with no word said."""
    import subprocess

    from tests.clitools import SOURCE_ROOT

    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    try:
        assert start_audit(tiny_options(tiny_models), store, cache, QuietProgress(), run_name="r").run().status == (
            "completed"
        )
    finally:
        cache.close()
    command = [sys.executable, "-m", "auditor", "prompt", "--resume", "r", "--quiet"]
    environment = {**os.environ, "PYTHONPATH": SOURCE_ROOT}
    resumed = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
    shown = resumed.stdout.readline()  # --quiet: the run folder, printed once the run has ended
    resumed.send_signal(signal.SIGINT)
    resumed.send_signal(signal.SIGTERM)
    rest, said = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, said
    assert shown.strip() == str(tmp_path / "runs" / "r") and rest == "" and "error" not in said
    assert "note: the run has ended and is recorded; exiting (interrupt again to stop at once)" in said
    assert load_record(tmp_path / "runs" / "r" / "record.json").status == "completed"


def test_sigterm_ends_a_run_as_interrupted_with_its_page_and_exit_code_143(tiny_models, tmp_path, capsys):
    from auditor.cli import _terminate
    from auditor.commands.common import run_resumable

    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    audit = start_audit(tiny_options(tiny_models), store, cache, TerminateAfter("generate", 2), run_name="r")
    previous = signal.signal(signal.SIGTERM, _terminate)  # as the command line installs it
    try:
        with pytest.raises(SystemExit) as exited:
            run_resumable(audit)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert exited.value.code == 143
    assert capsys.readouterr().err.startswith("error: terminated (SIGTERM); partial run kept in ")
    record = load_record(audit.run_dir / "record.json")
    assert record.status == "interrupted" and record.errors[-1].stage == "generate"
    assert (record.errors[-1].type, record.errors[-1].message) == ("Terminated", "terminated (SIGTERM)")
    assert (audit.run_dir / "report.html").is_file()
    assert resume_audit("r", store, cache, QuietProgress()).run().status == "completed"
    cache.close()
