"""benchmarks/bench_audit.py in its tiny CPU mode: every measurement runs and both sides do the same work."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
BENCH = BENCHMARKS / "bench_audit.py"


def benchmark_module(name: str):
    """``benchmarks/<name>.py`` imported afresh (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bench_module():
    return benchmark_module("bench_audit")


def test_bench_audit_tiny_runs_every_measurement_on_the_same_work(tmp_path):
    out = tmp_path / "result.json"
    result = subprocess.run(
        [sys.executable, str(BENCH), "--tiny", "--models", str(tmp_path / "models"), "--out", str(out)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["command"].endswith(f"--out {out}") and report["device"]["kind"] == "cpu"
    assert report["versions"]["torch"] and report["versions"]["diffusers"]
    assert set(report["code"]) == {"benchmark", "auditor"}
    sd15 = report["models"]["sd15"]
    assert sd15["errors"] == {}
    assert sd15["checks"] == {"same_decoded_token_rows": True, "executors_same_answers": True}
    measured = sd15["measurements"]
    names = ["authors", "authors-6x", "auditor-default", "auditor-sequential", "auditor-overlapped"]
    assert list(measured) == ["unet", "vqa", *names]  # the models alone first: a budget cuts the long runs, not them
    assert sd15["left_out_for_budget"] == {}
    images = sd15["prompt_sets"] * sd15["images_per_set"]  # 3 sets x 2 images
    for name in names:
        m = measured[name]
        assert m["runs"] == 1 and m["wall_s"]["min"] <= m["wall_s"]["median"] <= m["wall_s"]["max"]
        assert m["vqa_pairs"] == images * sd15["questions_per_image"]
        # Every answer decoded to its full budget on both sides: the same work.
        assert m["decoded_token_rows"] == m["vqa_pairs"] * sd15["answer_tokens"]
        assert m["gpu_idle_share"] == [None] and m["gpu_idle_share_note"] == "not measured: no GPU"
        if name == "auditor-overlapped":  # its stages overlap: a rate over a stage's span would mislead
            assert m["images_per_s"] is None and m["vqa_pairs_per_s"] is None
            assert set(m["rate_notes"]) == {"images_per_s", "vqa_pairs_per_s"}
        else:
            assert m["images_per_s"] > 0 and m["vqa_pairs_per_s"] > 0 and "rate_notes" not in m
        assert m["audit_images_per_s"] > 0  # at 2 images per set the released loop does not repeat its call
        split = m["generation_s_per_image"]  # nothing compiles with --tiny, so every run is split
        assert split["unet"] > 0 and split["vae_decode"] > 0 and split["rest"] > 0
        [run] = sd15["runs"][name]  # kept as measured, for merge_results.py; the answers were compared, then dropped
        assert run["generation_split_s"]["unet"] < run["phases"]["generate"]
        assert round(run["wall_s"], 2) == m["wall_s"]["median"] and "answers" not in run
    assert measured["authors"]["images_generated"] == measured["authors-6x"]["images_generated"] == images
    assert measured["authors"]["repeat_calls"] == measured["authors-6x"]["repeat_calls"] == 1
    assert measured["auditor-sequential"]["batch_size"] == 4  # --batch-size auto on a CPU
    unet = measured["unet"]
    assert unet["flops_per_forward"] > 0 and unet["achieved_tflops"] > 0 and unet["unet_batch"] == 8
    assert sd15["runs"]["unet"] == [unet]
    vqa = measured["vqa"]  # 2 random pictures, every question and the caption, at 2 and then 4 pairs per forward
    assert vqa["pairs"] == 2 * sd15["questions_per_image"] and list(vqa["by_batch_size"]) == ["2", "4"]
    for size in vqa["by_batch_size"].values():  # a call takes at least 8 pictures: each size is asked about 8
        assert size["pairs_per_s"] > 0 and size["pairs"] == 8 * sd15["questions_per_image"]
        assert size["decoded_token_rows"] == size["pairs"] * sd15["answer_tokens"]
    assert "vqa: pairs/s by --vqa-batch-size: 2: " in result.stdout
    assert "sd15" in result.stdout and "auditor-overlapped" in result.stdout
    assert "authors as released (x1 at 2 images)" in result.stdout and "images_per_s, vqa_pairs_per_s n/a: the overlapped" in result.stdout


def test_budget_lets_a_run_start_only_when_its_expected_time_is_left():
    bench = _bench_module()
    now = [100.0]
    budget = bench.Budget(2, clock=lambda: now[0])  # 120 s from t = 100
    assert budget.fits(None) and budget.fits(120) and not budget.fits(121)
    now[0] = 190.0
    assert budget.fits(30) and not budget.fits(31) and budget.fits(None)  # 30 s: what an unknown run needs
    now[0] = 191.0  # a run of unknown length would be cut off; a known short one still fits
    assert not budget.fits(None) and budget.fits(29)
    now[0] = 220.0  # spent: nothing starts
    assert not budget.fits(None) and not budget.fits(0)
    assert bench.Budget(None, clock=lambda: now[0]).fits(10**9)


def test_expected_seconds_of_a_run():
    bench = _bench_module()
    args = argparse.Namespace(sets=31, warmup_sets=3)
    assert bench.expected_seconds([], None, args, 3) is None  # a warm-up: unknown
    assert bench.expected_seconds([], None, args, None) is None  # its warm-up failed or was cut
    assert bench.expected_seconds([], 6.0, args, None) == 62.0  # the warm-up, 31 / 3 of it
    runs = [{"wall_s": 50.0}, {"wall_s": 70.0}]
    assert bench.expected_seconds(runs, 6.0, args, None) == 70.0  # the longest full run


def test_bench_audit_records_what_a_spent_budget_left_out(tmp_path):
    out = tmp_path / "result.json"
    result = subprocess.run(
        [sys.executable, str(BENCH), "--tiny", "--models", str(tmp_path / "models"), "--out", str(out),
         "--only", "authors", "unet", "--repeats", "2", "--budget-minutes", "0.0001"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    sd15 = json.loads(out.read_text())["models"]["sd15"]
    assert sd15["measurements"] == {} and sd15["errors"] == {}
    assert sd15["left_out_for_budget"] == {"authors": 3, "unet": 1}  # warm-up and 2 runs; the UNet


class _FakeSetup:
    """What the driver reads of a Setup, with no models (the driver is under test, not the audit)."""

    def __init__(self, args, t2i, root):
        self.size, self.steps, self.images, self.tokens = 32, 2, 2, 3
        self.work = root / "work"

    def sets(self, count=None):
        return [("initial", "a photo"), ("gender/0", "a photo of a man"), ("gender/1", "a photo of a woman")][:count]

    def questions(self, sets):
        return ["What is the gender?"], "Describe the image."


def _measure_then(stop: BaseException, last_rows: int = 36):
    """A stand-in for one measured run: a warm-up of 1 s, runs of 10 and 12 s (the second decoding
    ``last_rows`` token rows), then ``stop`` is raised."""
    walls = iter([(1.0, 36), (10.0, 36), (12.0, last_rows)])

    def measure(setup, name, sets, workdir):
        wall, rows = next(walls, (None, None))
        if wall is None:
            raise stop
        return {"wall_s": wall, "phases": {"generate": wall / 2, "perceive": wall / 2}, "images_generated": 6,
                "pairs": 12, "decoded_token_rows": rows, "gpu_idle_share": None, "peak_memory_gib": None}  # fmt: skip

    return measure


def test_a_session_cut_short_keeps_every_run_it_finished(tmp_path, monkeypatch):
    """A lent GPU's command limit kills the benchmark mid-way: each finished run is already summarised on disk."""
    bench = _bench_module()
    out = tmp_path / "result.json"
    monkeypatch.setattr(bench, "Setup", _FakeSetup)
    monkeypatch.setattr(bench, "measure", _measure_then(KeyboardInterrupt()))  # what the limit's signal raises
    args = bench.parse_args(["--tiny", "--only", "authors", "--repeats", "3", "--out", str(out)])
    with pytest.raises(KeyboardInterrupt):
        bench._run(args, tmp_path)
    authors = json.loads(out.read_text())["models"]["sd15"]["measurements"]["authors"]
    assert authors["runs"] == 2 and authors["wall_s"] == {"median": 11.0, "min": 10.0, "max": 12.0}


def test_a_measurement_that_fails_after_some_runs_keeps_them_and_is_still_checked(tmp_path, monkeypatch):
    bench = _bench_module()
    out = tmp_path / "result.json"
    monkeypatch.setattr(bench, "Setup", _FakeSetup)
    monkeypatch.setattr(bench, "measure", _measure_then(RuntimeError("CUDA out of memory"), last_rows=30))
    args = bench.parse_args(["--tiny", "--only", "authors", "--repeats", "3", "--out", str(out)])
    with pytest.raises(SystemExit, match="decoded different work"):  # its two runs decoded 36 and 30 rows
        bench._run(args, tmp_path)
    sd15 = json.loads(out.read_text())["models"]["sd15"]
    assert sd15["errors"] == {"authors": "RuntimeError: CUDA out of memory"}
    assert sd15["measurements"]["authors"]["runs"] == 2
    assert sd15["checks"] == {"same_decoded_token_rows": False, "decoded_token_rows": {"authors": [30, 36]}}


def test_runs_that_decoded_different_work_are_flagged_with_their_rows():
    bench = _bench_module()
    same = {"authors": [{"decoded_token_rows": 36}], "auditor-default": [{"decoded_token_rows": 36, "answers": {}}]}
    assert bench.check_same_work(same) == {"same_decoded_token_rows": True}
    differ = {"authors": [{"decoded_token_rows": 36}], "auditor-default": [{"decoded_token_rows": 30}]}
    assert bench.check_same_work(differ) == {
        "same_decoded_token_rows": False, "decoded_token_rows": {"authors": [36], "auditor-default": [30]},
    }  # fmt: skip


def test_generation_split_per_image_and_not_for_compiled_runs():
    bench = _bench_module()

    def run(generate, unet, vae):
        return {"images_generated": 10, "phases": {"generate": generate}, "generation_split_s": {"unet": unet, "vae_decode": vae}}  # fmt: skip

    runs = [run(10.0, 6.0, 2.0), run(12.0, 7.0, 2.0), run(20.0, 8.0, 4.0)]
    # per image: unet .6 .7 .8, vae .2 .2 .4, rest .2 .3 .8 -> medians
    assert bench.generation_split(runs) == {"unet": 0.7, "vae_decode": 0.2, "rest": 0.3}
    assert bench.generation_split([*runs, {**runs[0], "generation_split_s": None}]) is None


@pytest.mark.parametrize("argv", [["--sets", "6"], ["--sets", "29"], ["--sets", "12", "--warmup-sets", "10"]])
def test_set_counts_that_leave_an_axis_one_counterfactual_are_refused(argv, capsys):
    """A plan leaves out an axis with one counterfactual, the authors' loop would not: the sides would differ."""
    bench = _bench_module()
    with pytest.raises(SystemExit):
        bench.parse_args(["--tiny", *argv])
    assert "not 6, 10, 14, 18, 22, 26, 29" in capsys.readouterr().err
    for sets in (5, 7, 28, 30, 31):  # every axis of these has 2 counterfactuals or more
        assert bench.parse_args(["--tiny", "--sets", str(sets)]).sets == sets


@pytest.mark.parametrize(
    ("auditor_rows", "calls"),
    [([30] * 4, 2), ([36, 30, 30, 30], 4)],  # the warm-ups differ; the warm-ups agree, the first runs do not
)
def test_different_decoded_work_stops_the_session_at_once(tmp_path, monkeypatch, auditor_rows, calls):
    bench = _bench_module()
    out = tmp_path / "result.json"
    rows = {"authors": iter([36] * 4), "auditor-default": iter(auditor_rows)}
    called = []

    def measure(setup, name, sets, workdir):
        called.append(name)
        return {"wall_s": 1.0, "phases": {"generate": 0.5, "perceive": 0.5}, "images_generated": 6, "pairs": 12,
                "decoded_token_rows": next(rows[name]), "gpu_idle_share": None, "peak_memory_gib": None,
                "batch_size": 4, "optimizations": [], "answers": {}}  # fmt: skip

    monkeypatch.setattr(bench, "Setup", _FakeSetup)
    monkeypatch.setattr(bench, "measure", measure)
    args = bench.parse_args(["--tiny", "--only", "authors", "auditor-default", "--repeats", "3", "--out", str(out)])
    with pytest.raises(SystemExit, match="decoded different work"):
        bench._run(args, tmp_path)
    assert len(called) == calls  # not the 8 runs of the whole session
    checks = json.loads(out.read_text())["models"]["sd15"]["checks"]
    assert checks == {"same_decoded_token_rows": False, "decoded_token_rows": {"authors": [36], "auditor-default": [30]}}


def test_a_model_alone_that_fails_is_recorded_and_the_timed_runs_go_on(tmp_path, monkeypatch):
    bench = _bench_module()
    out = tmp_path / "result.json"

    def fail(error):
        def measurement(*args):
            raise error

        return measurement

    monkeypatch.setattr(bench, "Setup", _FakeSetup)
    monkeypatch.setattr(bench, "unet_throughput", fail(RuntimeError("no kernel image\nfor this GPU")))
    monkeypatch.setattr(bench, "vqa_throughput", fail(ValueError("bad shape")))
    monkeypatch.setattr(bench, "measure", _measure_then(KeyboardInterrupt(), last_rows=36))
    bench._run(bench.parse_args(["--tiny", "--only", "authors", "unet", "vqa", "--repeats", "2",
                                        "--out", str(out)]), tmp_path)  # fmt: skip
    sd15 = json.loads(out.read_text())["models"]["sd15"]
    assert sd15["errors"] == {"unet": "RuntimeError: no kernel image", "vqa": "ValueError: bad shape"}
    assert list(sd15["measurements"]) == ["authors"] and sd15["measurements"]["authors"]["runs"] == 2


def test_the_idle_share_says_why_it_was_not_measured():
    bench = _bench_module()
    with bench.IdleSampler(False) as sampler:  # a CPU run
        pass
    assert sampler.idle_share is None and sampler.missing == "not measured: no GPU"
    with bench.IdleSampler(True) as sampler:  # no CUDA and no NVML here: torch.cuda.utilization raises
        pass
    assert sampler.idle_share is None and sampler.missing.startswith("not measured: ")
    assert sampler.missing != "not measured: no GPU"  # the error torch.cuda.utilization raised, in one line
    run = {"wall_s": 1.0, "phases": {"generate": 0.5, "perceive": 0.5}, "images_generated": 6, "pairs": 12,
           "decoded_token_rows": 36, "gpu_idle_share": None, "gpu_idle_share_note": "not measured: no GPU",
           "peak_memory_gib": None}  # fmt: skip
    summary = bench.summarise([run, run], "authors")
    assert summary["gpu_idle_share"] == [None, None] and summary["gpu_idle_share_note"] == "not measured: no GPU"


def test_the_released_loop_repeats_its_generation_call_images_over_8_times(tmp_path):
    out = tmp_path / "result.json"
    result = subprocess.run(
        [sys.executable, str(BENCH), "--tiny", "--models", str(tmp_path / "models"), "--out", str(out),
         "--only", "authors-6x", "--images", "16", "--answer-tokens", "1"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    sd15 = json.loads(out.read_text())["models"]["sd15"]
    released = sd15["measurements"]["authors-6x"]
    assert released["repeat_calls"] == 2 and sd15["runs"]["authors-6x"][0]["repeat_calls"] == 2
    assert released["images_generated"] == 3 * 16 * 2  # 3 sets, 16 images per call, 2 calls
    assert released["vqa_pairs"] == 3 * 16 * sd15["questions_per_image"]  # the first call's images are asked about
    assert released["audit_images_per_s"] is None and "2x the images it audits" in released["rate_notes"]["audit_images_per_s"]
    assert "authors as released (x2 at 16 images)" in result.stdout


def test_the_vqa_sweep_calls_the_backend_with_as_many_images_as_the_audit_does(tmp_path, monkeypatch):
    from auditor.executors.perception import images_per_vqa_call
    from auditor.perception import registry

    bench = _bench_module()
    calls: dict[int, list[int]] = {}

    class Backend:
        settings = None

        def answer(self, images, questions, caption):
            calls.setdefault(self.settings.batch_size, []).append(len(images))

    monkeypatch.setattr(registry.VQA_BACKENDS, "load", lambda spec, **options: Backend())
    setup = _FakeSetup(None, "sd15", tmp_path)
    setup.vqa, setup.device = tmp_path / "vqa", "cpu"
    result = bench.vqa_throughput(setup, [2, 16, 32], 20)
    assert images_per_vqa_call(2) == 8 and images_per_vqa_call(16) == 16 and images_per_vqa_call(32) == 32
    # a warm-up call, then the 20 pictures as the audit sends them; at 32 rows a call takes 32 pictures, and 20
    # would leave its batches part empty, so that size is asked about 32
    assert calls == {2: [8, 8, 8, 4], 16: [16, 16, 4], 32: [32, 32]}
    by_size = result["by_batch_size"].values()
    assert [(size["images_per_call"], size["images"]) for size in by_size] == [(8, 20), (16, 20), (32, 32)]
    assert [size["pairs"] for size in by_size] == [40, 40, 64]  # 2 questions each (the gender one and the caption)


def test_the_compiled_unet_is_timed_on_the_graphs_its_warm_up_traced(tiny_models, monkeypatch):
    """The UNet figure times the call the pipeline makes (same arguments, a contiguous inference tensor): a timed
    forward that traced a new graph would time a recompile, and on a GPU spend minutes of autotuning again."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    from auditor.generation.diffusers_backend import DiffusersTextToImage

    bench = _bench_module()
    traced_by_warm_up: list[int] = []
    compile_with_warm_up = DiffusersTextToImage.compile

    def compile_and_count(backend):
        outcome = compile_with_warm_up(backend)
        traced_by_warm_up.append(counters["stats"]["unique_graphs"])
        return outcome

    monkeypatch.setattr(DiffusersTextToImage, "compile", compile_and_count)
    setup = argparse.Namespace(t2i=tiny_models.t2i, device="cpu", size=bench._pipeline_size(tiny_models.t2i), steps=2)
    torch._dynamo.reset()
    counters.clear()
    try:
        result = bench.unet_throughput(setup, "2", compile_models=True, iterations=2)
        if result["compile_fallback"] is not None:
            pytest.skip(f"torch.compile does not work here: {result['compile_fallback']}")
        assert traced_by_warm_up and counters["stats"]["unique_graphs"] == traced_by_warm_up[0]
        assert result["compile_seconds"] > 0 and result["flops_per_forward"] > 0 and result["unet_batch"] == 4
    finally:
        torch._dynamo.reset()


def _session_with_benchmark(tmp_path: Path, benchmark: str) -> Path:
    """A checkout holding benchmarks/gpu-session.sh and, as its benchmarks/on-device.sh, ``benchmark`` (a shell
    script body): the session's own logic under test, without a GPU."""
    folder = tmp_path / "checkout" / "benchmarks"
    folder.mkdir(parents=True)
    (folder / "gpu-session.sh").write_text((BENCHMARKS / "gpu-session.sh").read_text())
    (folder / "on-device.sh").write_text(f"#!/usr/bin/env bash\n{benchmark}\n")
    (folder / "on-device.sh").chmod(0o755)
    return folder.parent


def _run_session(checkout: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    out.mkdir(exist_ok=True)
    return subprocess.run(
        ["bash", "benchmarks/gpu-session.sh", *args], cwd=checkout, env={"PATH": "/usr/bin:/bin", "OUT": str(out)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_gpu_session_runs_its_parts_in_order_each_into_its_own_files(tmp_path):
    benchmark = 'echo "$@" >> "$OUT/calls.txt"; echo "table of $*"; case "$*" in *--compile*) exit 3;; esac'
    checkout = _session_with_benchmark(tmp_path, benchmark)
    result = _run_session(checkout, tmp_path / "out", "models", "550", "--tiny")
    assert result.returncode == 3, result.stderr  # the worst part's status, after every part has run
    calls = (tmp_path / "out" / "calls.txt").read_text().splitlines()
    out = tmp_path / "out"
    assert calls == [
        f"--models /tmp/bench-models --out {out}/sd15-eager.json --t2i sd15 --only unet vqa --no-compile --tiny",
        f"--models /tmp/bench-models --out {out}/sd15-compiled.json --t2i sd15 --only unet --compile --tiny",
        f"--models /tmp/bench-models --out {out}/sd21-eager.json --t2i sd21 --only unet --no-compile --tiny",
    ]
    assert {p.name for p in out.iterdir()} == {"calls.txt", "gpu.txt", "sd15-eager.log", "sd15-compiled.log",
                                               "sd21-eager.log"}  # fmt: skip
    assert "sd15-compiled: exit 3 at" in result.stdout and "table of --models" in result.stdout  # the logs' ends
    compare = _run_session(checkout, tmp_path / "out2", "compare")
    assert "--only authors auditor-overlapped --sets 31 --images 8 --repeats 1 --no-compile" in compare.stdout


def test_a_gpu_session_leaves_out_the_parts_that_have_no_minute_left(tmp_path):
    checkout = _session_with_benchmark(tmp_path, "sleep 5")
    result = _run_session(checkout, tmp_path / "out", "models", "59")
    assert result.returncode == 0, result.stderr
    assert [line.split(" (")[0] for line in result.stdout.splitlines()[:3]] == [
        "sd15-eager: left out", "sd15-compiled: left out", "sd21-eager: left out",
    ]  # fmt: skip
    unknown = _run_session(checkout, tmp_path / "out", "everything")
    assert unknown.returncode == 2 and "unknown plan 'everything'" in unknown.stderr
