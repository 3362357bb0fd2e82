"""benchmarks/merge_results.py: the runs of several benchmark sessions pooled only where they measured the same
thing, summarised as one session's are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_bench_audit import BENCHMARKS, _bench_module, _FakeSetup, benchmark_module

MERGE = BENCHMARKS / "merge_results.py"


def _merge_module():
    return benchmark_module("merge_results")


def run_session(folder: Path, monkeypatch, walls: dict[str, list[float]], rows: int = 36) -> Path:
    """One session of the benchmark's driver with stand-in runs: ``walls`` maps a measurement to its warm-up's
    and then each timed run's wall seconds (auditor's runs at batch 4, unoptimised)."""
    bench = _bench_module()
    folder.mkdir(parents=True)
    out = folder / "result.json"
    left = {name: iter(values) for name, values in walls.items()}

    def measure(setup, name, sets, workdir):
        wall = next(left[name])
        run = {"wall_s": wall, "phases": {"generate": wall / 4, "perceive": wall / 2}, "images_generated": 6,
               "pairs": 12, "decoded_token_rows": rows, "gpu_idle_share": 0.25, "peak_memory_gib": 2.0}  # fmt: skip
        if not name.startswith("auditor"):
            return run
        return run | {"batch_size": 4, "optimizations": [], "answers": {"initial": ["a man"]}}

    monkeypatch.setattr(bench, "Setup", _FakeSetup)
    monkeypatch.setattr(bench, "measure", measure)
    repeats = len(next(iter(walls.values()))) - 1
    bench._run(bench.parse_args(["--tiny", "--only", *walls, "--repeats", str(repeats), "--out", str(out)]), folder)
    return out


def edit(path: Path, change) -> Path:
    session = json.loads(path.read_text())
    change(session)
    path.write_text(json.dumps(session))
    return path


def merge_files(tmp_path, *files: Path):
    return subprocess.run(
        [sys.executable, str(MERGE), *map(str, files), "--out", str(tmp_path / "merged.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_two_sessions_pool_their_runs_per_measurement(tmp_path, monkeypatch):
    first = run_session(tmp_path / "a", monkeypatch, {"authors": [1, 10, 14], "auditor-default": [1, 6, 8]})
    second = run_session(tmp_path / "b", monkeypatch, {"authors": [1, 12]})
    result = merge_files(tmp_path, first, second)
    assert result.returncode == 0, result.stderr
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert [source["file"] for source in merged["merged_from"]] == [str(first), str(second)]
    assert merged["device"] == json.loads(first.read_text())["device"]
    sd15 = merged["models"]["sd15"]
    authors, auditor = sd15["measurements"]["authors"], sd15["measurements"]["auditor-default"]
    assert authors["runs"] == 3 and authors["wall_s"] == {"median": 12.0, "min": 10.0, "max": 14.0}
    assert authors["phase_s_median"] == {"generate": 3.0, "perceive": 6.0}
    assert authors["images_per_s"] == 2.0  # 6 images in the median 3 s of generation
    assert authors["sources"] == sorted([str(first), str(second)])
    assert auditor["runs"] == 2 and auditor["wall_s"]["median"] == 7.0 and auditor["sources"] == [str(first)]
    assert [run["source"] for run in sd15["runs"]["authors"]] == [str(first)] * 2 + [str(second)]
    assert sd15["checks"] == {"same_decoded_token_rows": True}
    assert "authors" in result.stdout and "12.0" in result.stdout


def test_the_authors_loop_pools_across_auditor_code_changes_but_auditor_runs_do_not(tmp_path, monkeypatch):
    first = run_session(tmp_path / "a", monkeypatch, {"authors": [1, 10], "auditor-default": [1, 6]})
    second = edit(run_session(tmp_path / "b", monkeypatch, {"authors": [1, 12]}),
                  lambda s: s["code"].update(auditor="0" * 16))  # fmt: skip
    assert merge_files(tmp_path, first, second).returncode == 0  # the authors' loop runs none of auditor's code
    pooled = (tmp_path / "merged.json").read_text()
    third = edit(run_session(tmp_path / "c", monkeypatch, {"auditor-default": [1, 7]}),
                 lambda s: s["code"].update(auditor="0" * 16))  # fmt: skip
    result = merge_files(tmp_path, first, third)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "code of sd15 auditor-default" in result.stderr and "0000000000000000" in result.stderr
    assert (tmp_path / "merged.json").read_text() == pooled  # the refused merge wrote nothing


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda s: s["models"]["sd15"].update(answer_tokens=30), "sd15's answer_tokens"),
        (lambda s: s["versions"].update(torch="0.0"), "versions of"),
        (lambda s: s["models"]["sd15"]["questions"].__setitem__(0, "Who is it?"), "sd15's questions"),
        (lambda s: s["device"].update(name="another GPU"), "device of"),
        (lambda s: s["code"].update(benchmark="0" * 16), "code of sd15 authors"),
        (lambda s: s["models"]["sd15"]["runs"]["auditor-default"][0].update(optimizations=["fused-qkv"]),
         "optimizations of sd15 auditor-default"),
        (lambda s: s["models"]["sd15"]["runs"]["authors"][0].update(decoded_token_rows=30), "decoded different work"),
        (lambda s: s.pop("code"), "written before bench_audit.py kept each run"),
        (lambda s: s.pop("session"), "written before bench_audit.py kept each run"),
        (lambda s: s["models"]["sd15"].pop("runs"), "written before bench_audit.py kept each run"),
    ],
)  # fmt: skip
def test_sessions_that_measured_something_else_are_refused_in_one_line(tmp_path, monkeypatch, change, says):
    first = run_session(tmp_path / "a", monkeypatch, {"authors": [1, 10], "auditor-default": [1, 6]})
    second = edit(run_session(tmp_path / "b", monkeypatch, {"authors": [1, 12], "auditor-default": [1, 7]}), change)
    result = merge_files(tmp_path, first, second)
    assert result.returncode == 2 and result.stderr.startswith("merge_results: ") and says in result.stderr
    assert result.stderr.count("\n") == 1 and not (tmp_path / "merged.json").exists()


def test_both_executors_pool_and_their_answer_checks_carry_over(tmp_path, monkeypatch):
    walls = {"auditor-sequential": [1, 8], "auditor-overlapped": [1, 6]}
    first, second = run_session(tmp_path / "a", monkeypatch, walls), run_session(tmp_path / "b", monkeypatch, walls)
    assert json.loads(first.read_text())["models"]["sd15"]["checks"]["executors_same_answers"] is True
    result = merge_files(tmp_path, first, second)
    assert result.returncode == 0, result.stderr
    sd15 = json.loads((tmp_path / "merged.json").read_text())["models"]["sd15"]
    assert sd15["checks"] == {"same_decoded_token_rows": True, "executors_same_answers": True}
    assert sd15["measurements"]["auditor-overlapped"]["runs"] == 2


def test_a_merged_file_takes_later_sessions_but_not_one_it_holds(tmp_path, monkeypatch):
    first = run_session(tmp_path / "a", monkeypatch, {"authors": [1, 10], "auditor-default": [1, 6]})
    second = run_session(tmp_path / "b", monkeypatch, {"authors": [1, 12]})
    third = run_session(tmp_path / "c", monkeypatch, {"authors": [1, 14]})
    assert merge_files(tmp_path, first, second).returncode == 0
    pooled = tmp_path / "pooled.json"
    (tmp_path / "merged.json").rename(pooled)
    again = merge_files(tmp_path, pooled, third)
    assert again.returncode == 0, again.stderr
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert [source["file"] for source in merged["merged_from"]] == [str(first), str(second), str(third)]
    authors = merged["models"]["sd15"]["measurements"]["authors"]
    assert authors["runs"] == 3 and authors["wall_s"]["median"] == 12.0
    assert authors["sources"] == sorted(map(str, (first, second, third)))
    twice = merge_files(tmp_path, pooled, second)
    assert twice.returncode == 2 and "is given twice" in twice.stderr and str(second) in twice.stderr
    assert merge_files(tmp_path, first, second, third).returncode == 0  # each session once: pooled


def test_a_file_named_twice_is_refused(tmp_path, monkeypatch):
    first = run_session(tmp_path / "a", monkeypatch, {"authors": [1, 10]})
    result = merge_files(tmp_path, first, first)
    assert result.returncode == 2 and "named twice" in result.stderr


def test_errors_budget_cuts_and_executor_checks_are_carried_over(tmp_path, monkeypatch):
    merge = _merge_module()
    first = run_session(tmp_path / "a", monkeypatch, {"authors": [1, 10]})
    second = run_session(tmp_path / "b", monkeypatch, {"authors": [1, 12]})

    def cut(session, same_answers):
        sd15 = session["models"]["sd15"]
        sd15["errors"] = {"auditor-overlapped": "RuntimeError: CUDA out of memory"}
        sd15["left_out_for_budget"] = {"authors": 1}
        sd15["checks"]["executors_same_answers"] = same_answers

    sessions = {str(path): json.loads(edit(path, lambda s, ok=ok: cut(s, ok)).read_text())
                for path, ok in ((first, True), (second, False))}  # fmt: skip
    sd15 = merge.merge(sessions, "merge")["models"]["sd15"]
    assert sd15["errors"] == {"auditor-overlapped": [f"{first}: RuntimeError: CUDA out of memory",
                                                     f"{second}: RuntimeError: CUDA out of memory"]}  # fmt: skip
    assert sd15["left_out_for_budget"] == {"authors": 2}
    assert sd15["checks"]["executors_same_answers"] is False  # one session's executors disagreed


def test_vqa_sweeps_pool_per_batch_size():
    merge = _merge_module()

    def sweep(rates, memory=1.0):
        return {"images": 64, "pairs": 576, "by_batch_size": {
            size: rate if isinstance(rate, str) else
            {"images_per_call": max(8, int(size)), "seconds": 576 / rate, "pairs_per_s": rate,
             "decoded_token_rows": 11520, "peak_memory_gib": memory}
            for size, rate in rates.items()}}  # fmt: skip

    runs = [sweep({"16": 40.0, "64": 100.0, "256": 300.0}), sweep({"16": 44.0, "64": 90.0, "256": "out of memory"}, 2.0),
            sweep({"16": 42.0, "64": 95.0})]  # fmt: skip
    pooled = merge.median_vqa(runs)
    assert pooled["runs"] == 3 and list(pooled["by_batch_size"]) == ["16", "64"]  # 256 was not swept in every session
    assert pooled["by_batch_size"]["16"] == {
        "images_per_call": 16, "pairs_per_s": 42.0, "decoded_token_rows": [11520], "peak_memory_gib": 2.0
    }  # fmt: skip
    assert pooled["by_batch_size"]["64"]["pairs_per_s"] == 95.0
    assert merge.median_vqa(runs[:2])["by_batch_size"]["256"] == "out of memory"
    runs[1]["by_batch_size"]["64"]["images_per_call"] = 8  # a session whose calls took 8 images whatever the rows
    with pytest.raises(merge.Incomparable, match="images per VQA call at 64 rows differ: 8 and 64"):
        merge.median_vqa(runs)


def test_the_unet_of_median_speed_is_kept():
    merge = _merge_module()
    runs = [{"achieved_tflops": tflops, "unet_batch": 128, "source": name, "code": {}}
            for name, tflops in (("a", 240.0), ("b", 231.0), ("c", 236.0), ("d", 250.0))]  # fmt: skip
    assert merge.median_unet(runs) == {"achieved_tflops": 236.0, "unet_batch": 128, "runs": 4}  # the lower middle
