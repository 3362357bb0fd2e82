"""benchmarks/bench_audit.py in its tiny CPU mode: every measurement runs and both sides do the same work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_audit.py"


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
    sd15 = report["models"]["sd15"]
    assert sd15["errors"] == {}
    assert sd15["checks"] == {"same_decoded_token_rows": True, "executors_same_answers": True}
    measured = sd15["measurements"]
    names = ["authors", "authors-6x", "auditor-default", "auditor-sequential", "auditor-overlapped"]
    assert list(measured) == [*names, "unet"]
    images = sd15["prompt_sets"] * sd15["images_per_set"]  # 3 sets x 2 images
    for name in names:
        m = measured[name]
        assert m["runs"] == 1 and m["wall_s"]["min"] <= m["wall_s"]["median"] <= m["wall_s"]["max"]
        assert m["vqa_pairs"] == images * sd15["questions_per_image"]
        # Every answer decoded to its full budget on both sides: the same work.
        assert m["decoded_token_rows"] == m["vqa_pairs"] * sd15["answer_tokens"]
        assert m["images_per_s"] > 0 and m["vqa_pairs_per_s"] > 0
    assert measured["authors"]["images_generated"] == images
    assert measured["auditor-sequential"]["batch_size"] == 4  # --batch-size auto on a CPU
    unet = measured["unet"]
    assert unet["flops_per_forward"] > 0 and unet["achieved_tflops"] > 0 and unet["unet_batch"] == 8
    assert "sd15" in result.stdout and "auditor-overlapped" in result.stdout
