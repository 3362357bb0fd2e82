"""`auditor trace` through the real command line on tiny models (tiny SD, BLIP-2, CLIP, DINOv2, Grounding DINO):
a caption file and the profession set, JSON and the 80-column terminal report, resume, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from auditor.records import TraceRecord, load_record
from tests.clitools import assert_fits, run_auditor

CAPTIONS = [
    {"caption": "a person riding a bike in the park"},
    {"caption": "a person and a woman reading on a bench"},
    {"caption": "people waiting for a train"},
    {"caption": "a person cooking in a kitchen"},
]


def _captions(folder: Path) -> Path:
    path = folder / "captions.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in CAPTIONS), encoding="utf-8")
    return path


def _models(tiny_models, tiny_tracing_models) -> list[str]:
    return [
        "--t2i", f"diffusers:{tiny_tracing_models.t2i}",
        "--vqa", f"blip2:{tiny_models.vqa}",
        "--steps", "2",
    ]  # fmt: skip


def test_trace_a_caption_file_then_resume_it(tiny_models, tiny_tracing_models, tmp_path):
    args = [
        str(_captions(tmp_path)), *_models(tiny_models, tiny_tracing_models),
        "--embedder", f"clip:{tiny_models.clip}", "--embedder", f"dinov2:{tiny_tracing_models.dinov2}",
        "--detector", f"grounding-dino:{tiny_tracing_models.grounding_dino}",
        "--seeds", "2", "--limit", "2", "--show", "1", "--min-count", "1", "--bootstrap", "100",
        "--min-expected", "5",
    ]  # fmt: skip
    result = run_auditor("trace", *args, "--json", "--name", "captions")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    run_dir = Path(report["run_dir"])
    record = load_record(run_dir / "record.json", TraceRecord)
    assert record.status == report["status"] == "completed"
    assert [t.prompts["neutral"] for t in record.triplets] == [CAPTIONS[0]["caption"], CAPTIONS[2]["caption"]]
    assert record.triplets[1].prompts["masculine"] == "men waiting for a train"
    assert record.config.seeds == report["seeds"] == [0, 1] and len(record.prompt_sets) == 6
    assert report["selection"]["with_indicator"] == 1 and report["selection"]["neutral"] == 3

    # The JSON carries the record's findings: the per-stage table, objects and human words apart, χ², groups.
    assert [row["key"] for row in report["similarity"]] == [row.key for row in record.similarity]
    assert [row["key"] for row in report["similarity"]][:4] == [
        "prompt_eos",
        "prompt_mean",
        "denoising_z0",
        "image_ssim",
    ]
    assert all(row["finding"] for row in report["similarity"])
    assert [row.model for row in record.similarity if row.model] == [
        f"clip:{tiny_models.clip}", f"dinov2:{tiny_tracing_models.dinov2}"
    ]  # fmt: skip
    assert set(report) >= {"masculine_objects", "feminine_objects", "human_words", "chi_square", "dependency_groups"}
    assert report["chi_square"]["correction"] == "holm" and report["chi_square"]["tests"] == 24
    assert record.config.scoring.min_expected == 5 and record.config.scoring.min_objects == 5
    assert all(t.note is None for t in record.chi_square if t.p_value is not None)  # the strict rule: no rough test ran
    assert [g["group"] for g in report["dependency_groups"]][-1] == "hidden"
    assert report["pictures"][0]["file"] == "pictures/triplet-0000.png"
    assert (run_dir / "pictures" / "triplet-0000.png").is_file() and (run_dir / "report.html").is_file()
    timings = {t.stage: t for t in record.timings}
    assert timings["generate"].computed == 12 and timings["perceive"].computed == 12

    # Resume of the finished run, the command typed again: every stage from the cache, the same numbers, the report
    # in 80 columns.
    again = run_auditor(
        "trace", *args, "--name", "captions", "--resume", "captions", "--executor", "sequential", env={"COLUMNS": "80"}
    )
    assert again.returncode == 0, again.stderr
    resumed = load_record(run_dir / "record.json", TraceRecord)
    timings = {t.stage: t for t in resumed.timings}
    assert timings["generate"].cached == 12 and timings["generate"].computed == 0
    assert timings["perceive"].computed == timings["embed"].computed == timings["detect"].computed == 0
    assert resumed.similarity == record.similarity and resumed.chi_square == record.chi_square
    assert_fits(again.stdout, 80, whole=(str(run_dir),))
    assert "…" not in again.stdout  # no cell cut short: an interval wraps instead
    verdicts = [row.closer_to for row in record.similarity]
    assert all(verdict in again.stdout for verdict in verdicts)
    for heading in ("closer to the masculine or the feminine", "Human words (counted apart", "χ² tests",
                    "dependency groups", "HTML report"):  # fmt: skip
        assert heading in again.stdout

    # `auditor report` redraws the same findings from the record alone.
    redrawn = run_auditor("report", "captions", "--json")
    assert redrawn.returncode == 0, redrawn.stderr
    assert json.loads(redrawn.stdout)["similarity"] == report["similarity"]

    refused = run_auditor("trace", "--resume", "captions", "--limit", "3")
    assert refused.returncode == 2 and "; --limit 3 (the run's: 2) cannot change them" in refused.stderr


def test_a_resume_that_turns_the_image_embedders_off_says_so_in_the_record(tiny_models, tiny_tracing_models, tmp_path):
    """--embedder none on --resume drops the embedders' stages, and so changes the family the stages' p-values are
    adjusted over: the record's notes say it."""
    moved = tmp_path / "moved-vqa"
    moved.mkdir()
    shutil.copy(tiny_models.vqa / "config.json", moved)  # its config, not its weights: stopped when it loads
    args = [
        str(_captions(tmp_path)), "--t2i", f"diffusers:{tiny_tracing_models.t2i}", "--vqa", f"blip2:{moved}",
        "--steps", "2", "--embedder", f"clip:{tiny_models.clip}", "--seeds", "1", "--limit", "1", "--bootstrap", "100",
        "--name", "t",
    ]  # fmt: skip
    assert run_auditor("trace", *args).returncode == 1  # stopped where it loads the VQA model
    resumed = run_auditor("trace", "--resume", "t", "--vqa", f"blip2:{tiny_models.vqa}", "--embedder", "none", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    record = load_record(Path(resumed.stdout.strip()) / "record.json", TraceRecord)
    assert record.config.image_embedders == [] and not any(row.model for row in record.similarity)
    assert any(note.startswith(f"--embedder none on --resume turned off the image embedders clip:{tiny_models.clip}")
               for note in record.notes)  # fmt: skip


def test_default_image_embedders_that_cannot_load_are_skipped_with_a_note_in_the_record(
    tiny_models, tiny_tracing_models, tmp_path
):
    """Without --embedder the paper's CLIP and DINOv2 are optional: offline (no hub here) each is skipped, and the
    record's notes say which and why, with no embedder recorded for the run."""
    args = [
        str(_captions(tmp_path)), "--t2i", f"diffusers:{tiny_tracing_models.t2i}", "--vqa", f"blip2:{tiny_models.vqa}",
        "--steps", "2", "--seeds", "1", "--limit", "1", "--bootstrap", "100", "--name", "t", "--quiet",
    ]  # fmt: skip
    result = run_auditor("trace", *args)
    assert result.returncode == 0, result.stderr
    record = load_record(Path(result.stdout.strip()) / "record.json", TraceRecord)
    assert record.config.image_embedders == []
    skipped = [note for note in record.notes if note.startswith("image embedder ")]
    assert [note.split(" skipped: ")[0] for note in skipped] == [
        "image embedder clip:openai/clip-vit-base-patch32", "image embedder dinov2:facebook/dinov2-small"
    ]
    assert all(note.endswith("(name the embedders with --embedder)") for note in skipped)


def test_a_trace_stopped_by_a_missing_model_resumes_with_the_model_where_it_is_now(tiny_models, tiny_tracing_models,
                                                                                   tmp_path):
    moved = tmp_path / "moved-vqa"
    moved.mkdir()  # emptied but for its config: the run starts, and stops when it loads the VQA model
    shutil.copy(tiny_models.vqa / "config.json", moved)
    args = [
        str(_captions(tmp_path)), "--t2i", f"diffusers:{tiny_tracing_models.t2i}", "--vqa", f"blip2:{moved}",
        "--steps", "2", "--embedder", "none", "--seeds", "1", "--limit", "1", "--bootstrap", "100", "--name", "t",
    ]  # fmt: skip
    failed = run_auditor("trace", *args)
    assert failed.returncode == 1 and f"cannot load VQA model '{moved}'" in failed.stderr
    assert "continue it with --resume" in failed.stderr
    for refused, message in [
        (["--detector", f"grounding-dino:{tiny_tracing_models.grounding_dino}"], "this run has no detector"),
        (["--embedder", f"clip:{tiny_models.clip}"], "--embedder on --resume says where the run's 0 image embedders"),
        (["--t2i", f"folder:{tmp_path}"], "is not one (use diffusers:<hub id or folder>)"),
    ]:
        result = run_auditor("trace", "--resume", "t", *refused)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    resumed = run_auditor("trace", "--resume", "t", "--vqa", f"blip2:{tiny_models.vqa}", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    record = load_record(Path(resumed.stdout.strip()) / "record.json", TraceRecord)
    assert record.status == "completed" and record.config.vqa.spec == f"blip2:{tiny_models.vqa}"
    assert record.results_from["vqa"] == record.config.vqa and record.config.vqa.fingerprint


def test_trace_the_profession_set(tiny_models, tiny_tracing_models, tmp_path):
    args = [*_models(tiny_models, tiny_tracing_models), "--embedder", "none", "--seeds", "1", "--limit", "2"]
    result = run_auditor("trace", "--professions", *args, "--batch-size", "auto", "--quiet", "--name", "professions")
    assert result.returncode == 0, result.stderr
    run_dir = Path(result.stdout.strip())
    record = load_record(run_dir / "record.json", TraceRecord)
    assert record.config.source == "professions" and record.config.limit == 2
    assert record.config.generation.batch_size_auto and record.config.generation.batch_size >= 1
    assert [t.prompts["feminine"] for t in record.triplets] == [
        "a female botanist at work",
        "a female geologist at work",
    ]
    assert [t.subject_words["masculine"] for t in record.triplets] == ["botanist", "geologist"]
    assert record.groups is None and any("--detector" in note for note in record.notes)
    assert [row.key for row in record.similarity] == [
        "prompt_eos", "prompt_mean", "denoising_z0", "image_ssim", "objects"
    ]  # fmt: skip
    assert (run_dir / "report.html").is_file()


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "error: give a caption file or --professions"),
        (["captions.jsonl", "--professions"], "error: give a caption file or --professions"),
        (["missing.csv"], "error: no such caption file or folder: missing.csv"),
        (["captions.jsonl", "--t2i", "folder:./images"], "is not one (use diffusers:"),
        (
            ["captions.jsonl", "--embedder", "none", "--embedder", "clip:x"],
            "--embedder none turns image embeddings off",
        ),
        (["captions.jsonl", "--bootstrap", "0"], "read off the resamples and cannot be turned off: give at least 40"),
        (["captions.jsonl", "--executor", "overlapped"], "auditor trace runs its stages one after the other"),
        (["captions.jsonl", "--ray-address", "auto"], "error: --ray-address is for --executor ray"),
        (["captions.jsonl", "--batch-size", "many"], "--batch-size takes a positive integer or 'auto'"),
        # a scoring setting's error names its one option, as the other commands' do
        (["captions.jsonl", "--alpha", "2"], "error: --alpha must lie strictly between 0 and 1 (got 2.0)"),
        (["captions.jsonl", "--min-expected", "0"], "error: --min-expected: input should be greater than 0 (got 0.0)"),
    ],
)
def test_bad_input_is_one_line_and_creates_no_run(tiny_models, tmp_path, args, message):
    _captions(tmp_path)
    result = run_auditor("trace", *args, "--vqa", f"blip2:{tiny_models.vqa}", process=True)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()
