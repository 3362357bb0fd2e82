"""`auditor batch`: one prompt audit per prompt, models loaded once, a leaderboard, resume, failures per prompt."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from auditor.core.cache import ContentCache
from auditor.core.errors import AuditorError, RunBusyError, StartAgainError
from auditor.core.runlock import is_running
from auditor.core.store import RunStore
from auditor.records import BatchRecord, GenerationSettings, PerceptionSettings, RunRecord, load_record
from auditor.reporting.batch import batch_json
from auditor.studies.batch import BatchOptions, resume_batch, start_batch
from auditor.studies.progress import QuietProgress
from auditor.studies.prompt_audit import PromptAuditOptions
from tests.clitools import run_auditor
from tests.test_prompt_audit import StopAfter
from tests.test_runlock import held_elsewhere, hold_lock

PROMPTS = ["a photo of a nurse", "a photo of an engineer", "a chef at work"]


def tiny_audit(tiny_models, **changes) -> PromptAuditOptions:
    settings = dict(
        prompt=PROMPTS[0],
        llm="offline",
        t2i=f"diffusers:{tiny_models.t2i}",
        vqa=f"blip2:{tiny_models.vqa}",
        embedder=None,
        images=2,
        generation=GenerationSettings(steps=2, batch_size=4),
        perception=PerceptionSettings(max_new_tokens=4, caption_max_new_tokens=4),
        max_axes=1,
        max_counterfactuals=2,
    )
    return PromptAuditOptions(**(settings | changes))


def test_batch_from_a_template_file_on_the_command_line(tiny_models, tmp_path):
    (tmp_path / "prompts.txt").write_text("a photo of a {occupation}\na chef at work\n")
    (tmp_path / "occupations.txt").write_text("nurse\nengineer\n")
    args = [
        "--llm", "offline", "--t2i", f"diffusers:{tiny_models.t2i}", "--vqa", f"blip2:{tiny_models.vqa}",
        "--embedder", "none", "--images", "2", "--steps", "2", "--max-axes", "2", "--max-counterfactuals", "2",
    ]  # fmt: skip
    result = run_auditor(
        "batch", "prompts.txt", "--values", "occupations.txt", *args, "--json", "--name", "b",
        cwd=tmp_path, env={"OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["kind"] == "batch" and data["status"] == "completed"
    assert [a["prompt"] for a in data["audits"]] == PROMPTS  # "an engineer": the article fits the value
    assert all(a["status"] == "completed" for a in data["audits"])
    rows = data["leaderboard"]
    assert len(rows) == 6 and {row["prompt"] for row in rows} == set(PROMPTS)
    bavs = [row["bav"] for row in rows if row["bav"] is not None]
    assert bavs == sorted(bavs, reverse=True)
    assert all(row["bav_ci"] is None or len(row["bav_ci"]) == 2 for row in rows)

    run_dir = Path(data["run_dir"])
    batch = load_record(run_dir / "record.json", BatchRecord)
    assert batch.prompt_sets == [] and batch.config.prompts == PROMPTS and batch.config.values == "occupations.txt"
    for entry in batch.audits:  # every prompt is a genuine prompt audit in its own folder
        audit = load_record(run_dir / entry.folder / "record.json", RunRecord)
        assert audit.status == "completed" and audit.config.prompt == entry.prompt and audit.scores is not None
        assert (run_dir / entry.folder / "report.html").is_file()
        assert {t.stage for t in audit.timings} >= {"plan", "generate", "perceive", "score"}
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert 'href="audits/001-a-photo-of-a-nurse/report.html"' in html

    shown = run_auditor("report", str(run_dir), cwd=tmp_path)
    assert shown.returncode == 0 and "a photo of an engineer" in shown.stdout
    one = run_auditor("report", str(run_dir / batch.audits[0].folder), "--json", cwd=tmp_path)
    assert one.returncode == 0 and json.loads(one.stdout)["prompt"] == PROMPTS[0]

    # the same prompt audited alone afterwards: every image and answer comes from the cache
    alone = run_auditor(
        "prompt", PROMPTS[1], *args, "--quiet", "--name", "alone", cwd=tmp_path, env={"OMP_NUM_THREADS": "1"}
    )
    assert alone.returncode == 0, alone.stderr
    timings = {t.stage: t for t in load_record(tmp_path / "runs" / "alone" / "record.json").timings}
    assert timings["generate"].computed == 0 and timings["perceive"].computed == 0 and timings["plan"].computed == 0

    # --quiet prints the run folder alone on one line, however long (a script reads it back)
    runs = tmp_path / ("a-long-folder-name-" * 8)
    again = run_auditor(
        "batch", "prompts.txt", "--values", "occupations.txt", *args, "--quiet", "--name", "again",
        cwd=tmp_path, env={"OMP_NUM_THREADS": "1", "AUDITOR_RUNS_DIR": str(runs)},
    )  # fmt: skip
    assert again.returncode == 0 and again.stdout == f"{runs / 'again'}\n"

    # the same command with --resume continues that batch; another prompts file is named beside the batch's
    resumed = run_auditor(
        "batch", "prompts.txt", "--values", "occupations.txt", *args, "--quiet", "--name", "again", "--resume", "again",
        cwd=tmp_path, env={"OMP_NUM_THREADS": "1", "AUDITOR_RUNS_DIR": str(runs)},
    )  # fmt: skip
    assert resumed.returncode == 0 and resumed.stdout == f"{runs / 'again'}\n", resumed.stderr
    other = run_auditor("batch", "other.txt", "--resume", "again", cwd=tmp_path, env={"AUDITOR_RUNS_DIR": str(runs)})
    assert other.returncode == 2  # each file by its absolute path: the same name typed in another folder is another
    assert f"; PROMPTS_FILE {tmp_path / 'other.txt'} (the run's: {tmp_path / 'prompts.txt'}) cannot" in other.stderr


def test_models_load_once_for_the_whole_batch(tiny_models, tmp_path, monkeypatch):
    from auditor.generation.registry import T2I_BACKENDS
    from auditor.perception.registry import VQA_BACKENDS

    loads: list[str] = []
    for registry, kind in ((T2I_BACKENDS, "t2i"), (VQA_BACKENDS, "vqa")):
        original = registry.load

        def counted(spec, *args, _original=original, _kind=kind, **kwargs):
            loads.append(_kind)
            return _original(spec, *args, **kwargs)

        monkeypatch.setattr(registry, "load", counted)
    cache = ContentCache(tmp_path / "cache.sqlite")
    batch = start_batch(
        BatchOptions(source="list", prompts=PROMPTS, audit=tiny_audit(tiny_models)),
        RunStore(tmp_path / "runs"), cache, QuietProgress(), "b",
    )  # fmt: skip
    record = batch.run()
    assert record.status == "completed" and [a.status for a in record.audits] == ["completed"] * 3
    assert sorted(loads) == ["t2i", "vqa"]
    assert {t.stage: t.computed for t in record.timings}["generate"] == 3 * 3 * 2  # 3 prompts x 3 sets x 2 images


def test_an_optional_embedder_that_fails_is_tried_once_and_every_audit_says_why(
    tiny_models, clip_without_weights, tmp_path, monkeypatch
):
    """The reason is an error's text, so a credential in it is blanked before the records keep it."""
    monkeypatch.setenv("AUDITOR_TEST_TOKEN", str(clip_without_weights))  # a "secret" the load error quotes
    cache = ContentCache(tmp_path / "cache.sqlite")
    audit = tiny_audit(tiny_models, embedder=f"clip:{clip_without_weights}", embedder_required=False)
    try:
        batch = start_batch(
            BatchOptions(source="list", prompts=PROMPTS[:2], audit=audit), RunStore(tmp_path / "runs"), cache,
            QuietProgress(), "b",
        )  # fmt: skip
        record = batch.run()
    finally:
        cache.close()
    assert record.status == "completed"
    audits = [load_record(batch.run_dir / entry.folder / "record.json", RunRecord) for entry in record.audits]
    assert all(a.config.embedder is None and "CLIP" in a.embedder_skipped for a in audits)
    assert all("***" in a.embedder_skipped and str(clip_without_weights) not in a.embedder_skipped for a in audits)
    assert audits[0].embedder_skipped == audits[1].embedder_skipped


def test_a_resume_naming_other_weights_audits_every_prompt_again_with_them(tiny_models, tmp_path):
    """The leaderboard ranks one model's results: completed audits are audited again too, and said so once."""
    from auditor.studies.run import Resumption
    from tests.test_model_identity import _retrained_copy

    other = _retrained_copy(tiny_models.t2i, tmp_path / "t2i-finetune")
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    options = BatchOptions(source="list", prompts=PROMPTS[:2], audit=tiny_audit(tiny_models))
    first = start_batch(options, store, cache, QuietProgress(), "b").run()
    assert first.status == "completed" and first.results_from["t2i"] == first.config.t2i
    notices: list[str] = []

    class Notices(QuietProgress):
        def notice(self, message: str) -> None:
            notices.append(message)

    resumption = Resumption(models={"t2i": f"diffusers:{other}"})
    again = resume_batch("b", store, cache, Notices(), resumption).run()
    assert again.status == "completed" and [a.status for a in again.audits] == ["completed"] * 2
    assert notices[0].startswith("models named on resume: every prompt is audited again with them")
    assert sum("loads other weights" in notice for notice in notices) == 1  # every audit says it: once
    assert not any("already complete" in notice for notice in notices)
    assert {t.stage: t.computed for t in again.timings}["generate"] == 2 * 3 * 2  # every image made again
    audits = [load_record(again_dir / entry.folder / "record.json", RunRecord)
              for again_dir in [store.resolve("b")] for entry in again.audits]  # fmt: skip
    assert {audit.config.t2i.fingerprint for audit in audits} == {again.config.t2i.fingerprint}
    assert again.config.t2i.fingerprint != first.config.t2i.fingerprint
    assert again.results_from["t2i"] == again.config.t2i
    cache.close()


def test_a_completed_batch_whose_resume_changes_no_file_is_left_as_it_was(tiny_models, vqa_without_weights, tmp_path):
    """A VQA model that cannot load fails every audit before any file changed: the batch and each audit keep their
    records and pages, byte for byte."""
    from auditor.studies.run import Resumption

    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    options = BatchOptions(source="list", prompts=PROMPTS[:2], audit=tiny_audit(tiny_models))
    first = start_batch(options, store, cache, QuietProgress(), "b").run()
    pages = sorted(store.resolve("b").rglob("record.json")) + sorted(store.resolve("b").rglob("report.html"))
    assert len(pages) == 6  # the batch's and its two audits'
    before = [(path.read_bytes(), path.stat().st_mtime_ns) for path in pages]
    attempt = resume_batch("b", store, cache, QuietProgress(), Resumption(models={"vqa": f"blip2:{vqa_without_weights}"}))
    with pytest.raises(AuditorError, match="cannot load VQA model"):
        attempt.run()
    assert attempt.left_as_it_was and attempt.record == first
    assert [(path.read_bytes(), path.stat().st_mtime_ns) for path in pages] == before
    cache.close()


def test_an_interrupted_batch_resumes_without_recomputing(tiny_models, tmp_path):
    store = RunStore(tmp_path / "runs")
    cache = ContentCache(tmp_path / "cache.sqlite")
    batch = start_batch(
        BatchOptions(source="list", prompts=PROMPTS, audit=tiny_audit(tiny_models)), store, cache,
        StopAfter("generate", 2), "b",
    )  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        batch.run()
    partial = load_record(batch.run_dir / "record.json", BatchRecord)
    assert partial.status == "interrupted" and partial.errors[-1].stage == "generate"
    assert [a.status for a in partial.audits] == ["interrupted"] * 3
    # its reports say how it ended and the command that continues it, not a bare "KeyboardInterrupt at generate"
    said = (
        "this run did not complete (interrupted at generate: interrupted by the user); "
        f"auditor batch --resume {batch.run_dir} continues it"
    )
    shown = run_auditor("report", str(batch.run_dir)).stdout
    assert f"{said}\n" in shown and "No prompt x axis has a BAV yet." in shown
    assert "male - female" not in shown  # no leaderboard's header without a row under it
    data = json.loads(run_auditor("report", str(batch.run_dir), "--json").stdout)  # the same for programs
    assert data["next_step"] == f"auditor batch --resume {batch.run_dir} continues it"
    page = (batch.run_dir / "report.html").read_text(encoding="utf-8")
    assert f"<strong>T{said[1:]}.</strong>" in page
    made = cache.entries("generate")
    assert made == 2 * 3 * 2  # two prompts' images were made before Ctrl-C
    cache.close()

    # While another process runs the batch, a resume is refused before it writes or removes anything.
    audit_dir = batch.run_dir / partial.audits[0].folder
    in_flight = audit_dir / ".record.json.other.tmp"
    in_flight.write_text("{")
    before = [(path, path.read_bytes()) for path in (batch.run_dir / "record.json", audit_dir / "record.json")]
    holder = hold_lock(batch.run_dir)
    try:
        cache = ContentCache(tmp_path / "cache.sqlite")
        with pytest.raises(RunBusyError, match=f"run b is being run by pid {holder.pid}"):
            resume_batch("b", store, cache, QuietProgress()).run()
        cache.close()
    finally:
        holder.kill()
        holder.wait()
    assert in_flight.exists() and all(path.read_bytes() == data for path, data in before)

    cache = ContentCache(tmp_path / "cache.sqlite")
    record = resume_batch("b", store, cache, QuietProgress()).run()
    assert record.status == "completed" and all(a.status == "completed" for a in record.audits)
    assert [path.name for path in batch.run_dir.rglob(".lock")] == [".lock"]  # the batch's lock covers its audits
    assert cache.misses["generate"] == 3 * 3 * 2 - made and cache.hits["generate"] == made
    assert cache.misses["plan"] == 0  # the plans are in the audits' records
    assert len(record.leaderboard) == 3

    class Notices(QuietProgress):
        said: list[str] = []

        def notice(self, message: str) -> None:
            self.said.append(message)

    again = resume_batch("b", store, cache, Notices()).run()  # complete: nothing is run, the audits are ranked
    assert Notices.said == [
        "run b is already complete; auditing again the prompts whose audit failed, then ranking its audits and "
        "writing its report"
    ]
    assert again.leaderboard == record.leaderboard and cache.misses["generate"] == 3 * 3 * 2 - made
    shutil.copytree(batch.run_dir, batch.run_dir.parent / "b-copy")  # the copy's record still names run b
    Notices.said.clear()
    resume_batch("b-copy", store, cache, Notices()).run()
    assert Notices.said[0].startswith("run b-copy is already complete")  # the run resumed, as the user named it

    saved = batch.run_dir / "record.json"  # an audit's folder edited to leave the batch's: one line
    saved.write_text(saved.read_text().replace('"audits/', '"../', 1))
    with pytest.raises(AuditorError, match=r"audits\.0\.folder: String should match pattern") as caught:
        resume_batch("b", store, cache, QuietProgress())
    assert "\n" not in str(caught.value)


def test_a_batch_resumed_with_a_ray_address_reaches_it_once_not_once_per_audit(tiny_models, tmp_path):
    """``--resume B --ray-address HOST:PORT``: the address is checked against the batch's executor, reached once."""
    import contextlib
    import socket

    from auditor.studies.run import Resumption

    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    options = BatchOptions(source="list", prompts=PROMPTS, audit=tiny_audit(tiny_models, executor="ray"))
    start_batch(options, store, cache, QuietProgress(), "b")  # created, not run: nothing reaches Ray
    with socket.create_server(("127.0.0.1", 0), backlog=8) as listener:  # connections wait in its backlog
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        batch = resume_batch("b", store, cache, QuietProgress(), Resumption(ray_address=address))
        listener.setblocking(False)
        connections = 0
        with contextlib.suppress(BlockingIOError):
            while True:
                listener.accept()[0].close()
                connections += 1
    cache.close()
    assert len(batch.audits) == 3 and batch.record.config.executor == "ray"
    assert connections == 1


def test_ctrl_c_while_its_audits_finish_ends_the_batch_interrupted_and_resumable(tiny_models, tmp_path, monkeypatch):
    """Ctrl-C as the second audit writes its page, after every stage ran: the batch record ends ``interrupted``
    at ``report`` (it used to stay ``running``), its lock is let go, and a resume finishes it without generating
    and writes the page the second audit (completed) did not get."""
    import auditor.reporting

    real_page, pages = auditor.reporting.write_html_report, []

    def interrupted_second_page(record, run_dir):
        pages.append(record.run_id)
        if len(pages) == 2:
            raise KeyboardInterrupt
        return real_page(record, run_dir)

    monkeypatch.setattr(auditor.reporting, "write_html_report", interrupted_second_page)
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    batch = start_batch(
        BatchOptions(source="list", prompts=PROMPTS[:2], audit=tiny_audit(tiny_models)), store, cache, QuietProgress(), "b"
    )
    with pytest.raises(KeyboardInterrupt):
        batch.run()
    stopped = load_record(batch.run_dir / "record.json", BatchRecord)
    assert stopped.status == "interrupted" and stopped.errors[-1].stage == "report"
    assert is_running(batch.run_dir) is False
    assert stopped.audits[1].status == "completed" and not (batch.run_dir / stopped.audits[1].folder / "report.html").exists()
    monkeypatch.setattr(auditor.reporting, "write_html_report", real_page)
    record = resume_batch("b", store, cache, QuietProgress()).run()
    assert record.status == "completed" and all(a.status == "completed" for a in record.audits)
    assert cache.misses["generate"] == 2 * 3 * 2  # every image made once, in the first attempt
    assert all((batch.run_dir / audit.folder / "report.html").is_file() for audit in record.audits)
    cache.close()


def test_a_sigterm_while_an_audit_of_an_ending_batch_writes_its_page_waits_for_the_batchs_own(
    tiny_models, tmp_path, monkeypatch
):
    """Ctrl-C as the first audit writes its page ends the batch, which ends the second audit too; a scheduler's SIGTERM
    as that one writes its page waits until the batch's record and page are written as well (it was delivered as the
    audit's were done: the batch's record stayed ``running``, its page unwritten)."""
    import os
    import signal

    import auditor.reporting
    from auditor.cli import _terminate

    real_page, pages = auditor.reporting.write_html_report, []

    def interrupted_then_terminated(record, run_dir):
        pages.append(record.run_id)
        if len(pages) == 1:
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGTERM)
        return real_page(record, run_dir)

    monkeypatch.setattr(auditor.reporting, "write_html_report", interrupted_then_terminated)
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    options = BatchOptions(source="list", prompts=PROMPTS[:2], audit=tiny_audit(tiny_models))
    batch = start_batch(options, store, cache, QuietProgress(), "b")
    previous = signal.signal(signal.SIGTERM, _terminate)  # as the command line installs it
    try:
        with pytest.raises(KeyboardInterrupt):
            batch.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
        cache.close()
    assert len(pages) == 2  # the second audit's page was written, and the SIGTERM came as it was
    stopped = load_record(batch.run_dir / "record.json", BatchRecord)
    assert stopped.status == "interrupted" and all(audit.status != "running" for audit in stopped.audits)
    assert (batch.run_dir / "report.html").read_text(encoding="utf-8").rstrip().endswith("</html>")


def test_a_prompt_without_a_valid_plan_fails_alone_and_the_batch_goes_on(tiny_models, fake_openai, tmp_path):
    plan = json.dumps({"gender": ["a male {x}", "a female {x}"]})
    fake_openai.chat_replies(
        "axes", "counterfactuals", plan.replace("{x}", "nurse"),
        "axes", "counterfactuals", "I would rather not.",  # the second prompt never gets a plan
        "axes", "counterfactuals", plan.replace("{x}", "chef"),
    )  # fmt: skip
    cache = ContentCache(tmp_path / "cache.sqlite")
    audit = tiny_audit(tiny_models, llm="openai:gpt-4o-mini", llm_retries=0, max_axes=None, max_counterfactuals=None)
    record = start_batch(
        BatchOptions(source="list", prompts=PROMPTS, audit=audit),
        RunStore(tmp_path / "runs"),
        cache,
        QuietProgress(),
        "b",
    ).run()
    assert record.status == "completed"
    assert [a.status for a in record.audits] == ["completed", "failed", "completed"]
    assert "no valid plan" in record.audits[1].error
    assert {row.prompt for row in record.leaderboard} == {PROMPTS[0], PROMPTS[2]}
    failed = load_record(tmp_path / "runs" / "b" / record.audits[1].folder / "record.json")
    assert failed.status == "failed" and failed.errors[-1].stage == "plan"
    shown = run_auditor("report", str(tmp_path / "runs" / "b")).stdout
    assert f"auditor batch --resume {tmp_path / 'runs' / 'b'} tries the 1 audit that did not complete again" in shown


def test_a_batch_in_which_every_audit_failed_fails_and_a_resume_retries_them(tiny_models, fake_openai, tmp_path):
    """An LLM that refuses the key fails every prompt's plan: the batch found nothing, so it is not 'completed'."""
    from tests.fake_openai import http_error

    refused = http_error(401, "Incorrect API key provided", error_type="invalid_request_error")
    fake_openai.chat_replies(*[refused] * len(PROMPTS))
    cache = ContentCache(tmp_path / "cache.sqlite")
    audit = tiny_audit(tiny_models, llm="openai:gpt-4o-mini", llm_retries=0, max_axes=None, max_counterfactuals=None)
    batch = start_batch(BatchOptions(source="list", prompts=PROMPTS, audit=audit), RunStore(tmp_path / "runs"), cache,
                        QuietProgress(), "b")  # fmt: skip
    with pytest.raises(AuditorError, match=f"no audit of the batch completed; '{PROMPTS[0]}' failed at plan: "):
        batch.run()
    cache.close()
    record = load_record(batch.run_dir / "record.json", BatchRecord)
    assert record.status == "failed" and [a.status for a in record.audits] == ["failed"] * len(PROMPTS)
    listed = json.loads(run_auditor("runs", "--json", "--runs-dir", str(tmp_path / "runs")).stdout)
    assert listed[0]["resume"] == f"auditor batch --resume {batch.run_dir}"  # what goes on once the key is right

    # --axes that fit none of the prompts (refused up front on the command line): a resume would fail them again
    unfit = start_batch(
        BatchOptions(source="list", prompts=PROMPTS, audit=tiny_audit(tiny_models, axes=["setting"])),
        RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite"), QuietProgress(), "unfit",
    )  # fmt: skip
    with pytest.raises(StartAgainError, match="no audit of the batch completed; .* the offline planner found no"):
        unfit.run()
    listed = {row["run_id"]: row for row in json.loads(run_auditor("runs", "--json", "--runs-dir",
                                                                    str(tmp_path / "runs")).stdout)}  # fmt: skip
    assert listed["unfit"]["status"] == "failed" and "resume" not in listed["unfit"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["missing.txt"], "no such file: missing.txt"),
        (["folder"], "error: folder is a folder; give a file"),
        (["template.txt"], "is a template; give its values with --values"),
        ([], "give a PROMPTS_FILE"),
        (["template.txt", "--resume", "x"], "no run 'x' in "),
        (["list.txt", "--axes", "height"], "unknown axis 'height'"),
        (["list.txt", "--axes", "setting"], "--axes fit none of the batch's 2 prompts; the first: the offline planner"),
        (["values.yaml"], "values.yaml: a .yaml file is not a prompts list; give .txt (one prompt per line), .csv"),
        (["huge.csv"], "huge.csv:2: not a CSV file auditor can read (field larger than field limit"),
    ],
)
def test_bad_batch_input_is_one_line_and_creates_nothing(tmp_path, args, message):
    (tmp_path / "huge.csv").write_text("prompt\n" + "a" * 200_000 + "\n")  # over the csv module's cell limit
    (tmp_path / "folder").mkdir()
    (tmp_path / "template.txt").write_text("a photo of a {occupation}\n")
    (tmp_path / "list.txt").write_text("a photo of a nurse\na photo of a chef\n")
    (tmp_path / "values.yaml").write_text("occupation: [nurse, chef]\n")  # --values, given as the prompts by a slip
    result = run_auditor("batch", *args, "--llm", "offline", cwd=tmp_path, process=True)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "runs").exists()


def test_axes_take_the_offline_planner_and_refuse_another_llm(tmp_path):
    (tmp_path / "list.txt").write_text("a photo of a nurse\n")
    result = run_auditor("batch", "list.txt", "--axes", "gender", "--llm", "openai:gpt-4o")
    assert result.returncode == 2 and "so --llm openai:gpt-4o would not be asked" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_each_prompt_says_which_of_the_axes_its_plan_dropped(tiny_models, tmp_path):
    """--axes that fit one prompt and not another: each prompt's drop is named on the terminal as it is planned, and
    the batch's report sums them up."""
    (tmp_path / "list.txt").write_text("a photo of a nurse\na kettle on a table\n")
    result = run_auditor(
        "batch", "list.txt", "--axes", "gender,setting", "--t2i", f"diffusers:{tiny_models.t2i}",
        "--vqa", f"blip2:{tiny_models.vqa}", "--embedder", "none", "--images", "1", "--steps", "2",
        "--max-counterfactuals", "2", "--name", "b", cwd=tmp_path, env={"OMP_NUM_THREADS": "1", "COLUMNS": "400"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (
        "note: --axes dropped for 'a photo of a nurse': setting (the axis library does not apply it to person prompts)."
        in result.stderr
    )
    assert (
        "note: --axes dropped for 'a kettle on a table': gender (the axis library does not apply it to object prompts)."
        in result.stderr
    )
    # the batch's own report sums them up in one note (from its record), and says why it has no intervals
    batch = load_record(tmp_path / "runs" / "b" / "record.json", BatchRecord)
    assert [sorted(audit.dropped_axes) for audit in batch.audits] == [["setting"], ["gender"]]
    assert (
        "- --axes dropped: setting for 1 of 2 prompts (the axis library does not apply it to person prompts); gender "
        "for 1 of 2 prompts (the axis library does not apply it to object prompts)." in result.stdout
    )
    assert "- No intervals: one image per prompt set: no other seed to resample;" in result.stdout


def leaderboard_headline(*intervals: tuple[float, float, float]) -> str:
    """The batch headline over rows of (BAV, interval low, interval high), highest first."""
    from auditor.records import BatchRow, Interval
    from auditor.reporting.batch import headline

    rows = [
        BatchRow(audit_id=f"a{i}", prompt=f"p{i}", axis="gender", bav=bav,
                 bav_ci=Interval(low=low, high=high, method="percentile", defined=1.0))
        for i, (bav, low, high) in enumerate(intervals)
    ]  # fmt: skip
    return headline(BatchRecord.model_construct(leaderboard=rows))


def test_the_batch_headline_claims_the_top_row_only_above_every_other_interval():
    assert leaderboard_headline((0.5, 0.4, 0.6), (0.2, 0.1, 0.3)).startswith("The strongest lean is 'p0' on gender")
    assert leaderboard_headline((0.5, 0.4, 0.6), (0.45, 0.3, 0.5), (0.1, 0.0, 0.2)).endswith(
        "but 1 other row overlaps its interval, so no single one leans most."
    )
    assert leaderboard_headline((0.5, 0.4, 0.6), (0.45, 0.3, 0.5), (0.42, 0.35, 0.45)).endswith(
        "but 2 other rows overlap its interval, so no single one leans most."
    )


def batch_record(bavs: list[tuple[float | None, float | None, float | None]], images: int = 6,
                 dropped: list[dict[str, str]] | None = None) -> BatchRecord:
    """A batch record around the stored audit's settings, with one leaderboard row (BAV, interval low, high; no
    interval where low is None) per prompt, in the given order, and each prompt's dropped --axes."""
    from auditor.records import BatchAudit, BatchConfig, BatchRow, Interval

    audit = load_record(Path(__file__).parent / "fixtures" / "runs" / "pharmacist-sd15" / "record.json")
    prompts = [f"a photo of a p{i}" for i in range(len(bavs))]
    settings = audit.config.model_dump(exclude={"prompt", "review", "images_per_prompt", "seeds", "axes"})
    config = BatchConfig(source="list", prompts=prompts, images_per_prompt=images, seeds=list(range(images)),
                         axes=["gender", "setting"] if dropped else None, **settings)  # fmt: skip
    audits = [
        BatchAudit(audit_id=f"00{i}-p{i}", prompt=prompt, folder=f"audits/00{i}-p{i}", status="completed")
        for i, prompt in enumerate(prompts)
    ]
    for entry, axes in zip(audits, dropped or []):
        entry.dropped_axes = axes
    rows = [
        BatchRow(audit_id=f"00{i}-p{i}", prompt=prompt, axis="gender", bav=bav,
                 bav_ci=None if low is None else Interval(low=low, high=high, method="percentile", defined=1.0))
        for i, (prompt, (bav, low, high)) in enumerate(zip(prompts, bavs))
    ]  # fmt: skip
    return BatchRecord(run_id="b", config=config, environment=audit.environment, status="completed", audits=audits,
                       leaderboard=rows)  # fmt: skip


def batch_reports(record: BatchRecord, run_dir: Path) -> tuple[dict, str, str]:
    """The batch's --json, terminal text and report.html."""
    import io

    from rich.console import Console

    from auditor.reporting.batch import batch_json, render_batch, write_batch_report

    console = Console(width=200, file=io.StringIO(), record=True)
    render_batch(record, run_dir, console)
    return batch_json(record), console.export_text(), write_batch_report(record, run_dir).read_text()


def test_rows_with_equal_bavs_share_a_rank_in_every_report(tmp_path):
    """Two rows at the same BAV: neither leans more, so they are =1 (not 1 and 2) and the headline names no top."""
    import re

    record = batch_record([(0.3, 0.2, 0.4), (0.3, 0.1, 0.5), (0.1, 0.0, 0.2), (None, None, None)])
    data, text, page = batch_reports(record, tmp_path)
    board = [(row["rank"], row["tied"], row["prompt"]) for row in data["leaderboard"]]
    assert board == [(1, True, "a photo of a p0"), (1, True, "a photo of a p1"), (3, False, "a photo of a p2"),
                     (4, False, "a photo of a p3")]  # fmt: skip
    assert re.findall(r"^\s*(=?\d+)\s+a photo of a p", text, re.M) == ["=1", "=1", "3", "4"]
    assert re.findall(r'<tr><td class="num">([=\d]+)</td>', page) == ["=1", "=1", "3", "4"]
    headline = "'a photo of a p0' on gender and 1 other row share the largest BAV (0.3000), so no single one leans most."
    assert data["headline"] == headline and headline in text
    assert headline.replace("'", "&#39;") in page


def test_rows_ranked_apart_never_read_as_the_same_bav(tmp_path):
    """0.00552 and 0.00546 both read 0.0055 at four decimals, beside ranks 1 and 2: the leaderboard takes the
    decimals that tell them apart, in the terminal and on the page; the page also says what its intervals are."""
    from auditor.reporting.numbers import separating_decimals

    assert separating_decimals([(1, 0.3), (1, 0.3), (3, 0.1)], 4) == 4
    assert separating_decimals([(1, 0.00552), (2, 0.00546), (3, None)], 4) == 5
    assert separating_decimals([(1, 0.5), (1, 0.5000001)], 2) == 2  # a shared rank may read alike
    assert separating_decimals([(1, 0.3), (2, 0.3 - 1e-12)], 4) == 4  # noise no decimals show: no more of them
    record = batch_record([(0.00552, 0.001, 0.01), (0.00546, 0.001, 0.01)])
    data, text, page = batch_reports(record, tmp_path)
    assert "0.00552" in text and "0.00546" in text and "0.00552" in page and "0.00546" in page
    assert "(0.00552 [" in data["headline"]  # the headline quotes its top row as the table writes it
    uncertainty = "<tr><th>uncertainty</th><td>95% percentile intervals from 1000 paired-bootstrap resamples"
    assert uncertainty + " (--ci-seed 0)" in page


def test_a_batch_where_no_row_leans_says_so_plainly(tmp_path):
    record = batch_record([(0.0, 0.0, 0.0), (0.0, 0.0, 0.0)])
    data, text, _page = batch_reports(record, tmp_path)
    assert data["headline"] == (
        "No prompt leans on any axis: every axis's counterfactuals got equal CAS values in every audit."
    )
    assert [(row["rank"], row["tied"]) for row in data["leaderboard"]] == [(1, True), (1, True)]


def test_a_batch_with_too_few_seeds_says_why_it_has_no_intervals(tmp_path):
    """--images 3: no intervals, and every report says why instead of describing intervals that are not there."""
    from auditor.scoring.uncertainty import too_few_seeds

    why = too_few_seeds(3)
    record = batch_record([(0.3, None, None), (0.1, None, None)], images=3)
    data, text, page = batch_reports(record, tmp_path)
    assert data["headline"] == (
        f"The largest BAV is 'a photo of a p0' on gender (0.3000), but it has no interval ({why}), so no ranking is "
        "claimed."
    )
    assert data["no_intervals"] == why and data["notes"] == [f"No intervals: {why}; no row is ranked above another."]
    assert f"- No intervals: {why}" in text
    assert f"There are no intervals ({why})" in page and "paired-bootstrap" not in page
    assert batch_json(batch_record([(0.3, 0.2, 0.4)]))["no_intervals"] is None


def test_the_batch_sums_up_the_axes_its_prompts_plans_dropped(tmp_path):
    """One note for the batch (terminal, --json, page), and the page's --axes line does not claim them all."""
    person = "the axis library does not apply it to person prompts"
    dropped = [{"setting": person}, {}, {"setting": person}]
    record = batch_record([(0.3, 0.2, 0.4), (0.2, 0.1, 0.25), (0.0, 0.0, 0.0)], dropped=dropped)
    data, text, page = batch_reports(record, tmp_path)
    note = f"--axes dropped: setting for 2 of 3 prompts ({person})."
    assert data["notes"] == [note] and f"- {note}" in text and f"<li>{note}</li>" in page
    assert "axes fixed by --axes: gender, setting (not every prompt's plan kept them all: see the notes)" in page
    assert batch_json(batch_record([(0.3, 0.2, 0.4)]))["notes"] == []


def test_the_leaderboard_wraps_its_numbers_at_a_narrow_terminal_never_cuts_them(tmp_path):
    import io

    from rich.console import Console

    from auditor.records import Interval
    from auditor.reporting.batch import render_batch

    record = batch_record([(0.3, 0.2, 0.4), (0.1, 0.0, 0.2)])
    for row, (low, high) in zip(record.leaderboard, [(0.05, 0.25), (-0.35, -0.15)]):
        row.lean, row.lean_ci = (low + high) / 2, Interval(low=low, high=high, method="percentile", defined=1.0)
    for width in (50, 60):
        console = Console(width=width, file=io.StringIO(), record=True)
        render_batch(record, tmp_path, console)
        table = console.export_text().split("# prompt")[1]  # below the headline
        assert "…" not in table and "0.4000]" in table and "0.2000]" in table, table  # each interval's upper end
        assert "+0.25]" in table and "-0.15]" in table and "female" in table, table


def test_the_audits_of_a_batch_no_process_runs_any_more_read_stopped_not_running(tmp_path):
    """kill -9 leaves the batch and the audit it was on saying ``running``; its reports say ``stopped`` for both, as
    ``auditor runs`` does (the batch's lock covers its audits), and ``running`` while a process holds that lock."""
    import io

    from rich.console import Console

    from auditor.core.store import write_model
    from auditor.reporting.batch import batch_json, render_batch, write_batch_report

    record = batch_record([(0.3, 0.2, 0.4), (None, None, None)])
    record.status = record.audits[1].status = "running"
    run_dir = tmp_path / "b"
    write_model(run_dir / "record.json", record)

    def shown() -> tuple[str, str, str]:
        console = Console(width=200, file=io.StringIO(), record=True)
        render_batch(record, run_dir, console)
        page = write_batch_report(record, run_dir).read_text(encoding="utf-8")
        return batch_json(record, run_dir)["audits"][1]["shown_status"], console.export_text(), page

    status, terminal, page = shown()
    assert status == "stopped" and "- 'a photo of a p1': stopped" in terminal
    assert '<span class="badge bad">stopped</span>' in page and "<td>stopped</td>" in page and ">running<" not in page
    with held_elsewhere(run_dir):
        status, terminal, page = shown()
    assert status == "running" and "- 'a photo of a p1': running" in terminal
    assert '<span class="badge bad">running</span>' in page and "<td>running</td>" in page
