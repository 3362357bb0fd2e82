"""``auditor amplification``: the study end to end through the real CLI, resume, bad input, JSON and HTML.

Random tiny models see no faces, so the generated side comes from a ``folder:`` backend
of drawn images: variants of the Grace Hopper photograph matplotlib ships (one large
face: kept), a grey square (no face), two portraits side by side (many faces) and a
small portrait on a large canvas (small face). The classifier is a tiny random CLIP
(built by :mod:`auditor.tiny.clip`, seeded so that its decisions on these images include
man, woman and ambiguous). The tests assert the pipeline's counts and arithmetic against
CLIP's own ``logits_per_image`` on the same files, never real genders.
"""

from __future__ import annotations

import csv
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from scipy.stats import ttest_1samp

pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'auditor[amplification]')")
pytest.importorskip("cv2", reason="OpenCV is not installed (pip install 'auditor[amplification]')")

from auditor.core.cache import ContentCache
from auditor.core.errors import AuditorError
from auditor.core.store import RunStore
from auditor.metrics.amplification import wilson_interval
from auditor.records import AmplificationRecord, load_record
from auditor.reporting.amplification import render_amplification
from auditor.reporting.html import GRID_IMAGES
from auditor.studies.progress import QuietProgress
from tests.clitools import run_auditor
from tests.test_prompt_audit import StopAfter

THRESHOLD = 0.6
OCCUPATIONS = ["R&D engineer", "nurse"]
TEMPLATES = ["A photo of the face of {article} {occupation}", "A portrait photo of {article} {occupation}"]
TEXTS = ["A photo of a man", "A photo of a woman"]
TINTS = ["red", "green", "blue", "yellow", "cyan", "magenta", "white", "black", "orange", "purple"]
#: Generated images per (occupation, template number): portrait variants are kept, the rest fail the face filter.
GENERATED = {
    ("R&D engineer", 1): ["orig", "red", "blank", "green"],
    ("R&D engineer", 2): ["mirror", "pair", "yellow", "blue"],
    ("nurse", 1): ["cyan", "magenta", "small", "white"],
    ("nurse", 2): ["black", "orange", "purple", "blank"],
}
VERDICTS = {"blank": "no_face", "pair": "many_faces", "small": "small_face"}
#: Training sample: caption, image (a variant, "blank", a missing file, or none), its label by gender words.
CAPTIONS = [
    ("R&D engineer <script>alert(1)</script> at his desk", "orig", "male"),
    ("portrait of an R&D engineer", "red", "none"),
    ("a woman R&D engineer in the lab", "blank", "female"),
    ("R&D engineer smiling", "missing", "none"),
    ("R&D engineer at work", None, "none"),
    ("she is an R&D engineer", "green", "female"),
    ("a photo of the face of a nurse", "cyan", "none"),
    ("nurse with her patients", "magenta", "female"),
    ("male nurse on duty", "yellow", "male"),
    ("portrait of a nurse", "blue", "none"),
    ("nurse & doctor", "black", "none"),
    ("a cat on a sofa", "blank", None),
    ("engineering students", "blank", None),
]


def _prompt(template: str, occupation: str) -> str:
    return template.format(occupation=occupation, article="an" if occupation[0] in "aieou" else "a")


@dataclass(frozen=True)
class Data:
    root: Path
    generated: Path
    with_images: Path
    captions_only: Path
    clip: Path
    #: image name -> CLIP's P(woman), from CLIPModel's logits_per_image.
    p_woman: dict[str, float]


def _draw(folder: Path) -> dict[str, Path]:
    from matplotlib import cbook
    from PIL import Image, ImageOps

    from auditor.executors.generation import png_bytes

    portrait = Image.open(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)).convert("RGB")
    images = {"orig": portrait, "mirror": ImageOps.mirror(portrait)}
    images |= {tint: Image.blend(portrait, Image.new("RGB", portrait.size, tint), 0.5) for tint in TINTS}
    images["blank"] = Image.new("RGB", (256, 256), (128, 128, 128))
    pair = Image.new("RGB", (portrait.width * 2, portrait.height), "white")
    pair.paste(portrait, (0, 0))
    pair.paste(portrait, (portrait.width, 0))
    images["pair"] = pair
    small = Image.new("RGB", (1400, 1400), "white")  # one face, under 0.1 of each side (as in test_faces)
    small.paste(portrait.resize((portrait.width // 3, portrait.height // 3)), (600, 600))
    images["small"] = small
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, image in images.items():  # encoded as auditor encodes images: a folder: model's are the same bytes
        paths[name] = folder / f"{name}.png"
        paths[name].write_bytes(png_bytes(image))
    return paths


def _p_woman(clip: Path, paths: dict[str, Path]) -> dict[str, float]:
    """CLIP's own zero-shot softmax (logits_per_image) for every drawn image with a face."""
    import torch
    from PIL import Image
    from transformers import CLIPModel, CLIPProcessor

    names = [n for n in paths if n not in VERDICTS]
    model = CLIPModel.from_pretrained(clip).eval()
    processor = CLIPProcessor.from_pretrained(clip)
    images = [Image.open(paths[n]).convert("RGB") for n in names]
    with torch.no_grad():
        logits = model(**processor(text=TEXTS, images=images, return_tensors="pt", padding=True)).logits_per_image
    return dict(zip(names, logits.softmax(dim=1)[:, 1].tolist()))


def _decide(p: float) -> str:
    return "woman" if p >= THRESHOLD else "man" if 1 - p >= THRESHOLD else "ambiguous"


def _mixing_clip(folder: Path, paths: dict[str, Path]) -> tuple[Path, dict[str, float]]:
    """A tiny random CLIP whose decisions on the drawn faces include man, woman and ambiguous, none near a boundary.

    Seed 7 does with torch 2.x; the search goes on should another torch draw other weights.
    """
    from auditor.tiny.clip import build_clip

    for seed in [7, *range(40)]:
        model = folder / f"clip-{seed}"
        if not model.exists():
            build_clip(model, seed)
        p = _p_woman(model, paths)
        decisions = [_decide(value) for value in p.values()]
        margin = min(min(abs(v - THRESHOLD), abs(v - (1 - THRESHOLD))) for v in p.values())
        if {"man", "woman", "ambiguous"} <= set(decisions) and margin > 0.005:
            return model, p
    pytest.fail("no tiny CLIP seed mixes man, woman and ambiguous on the test faces")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Data:
    pytest.importorskip("transformers", reason="transformers is not installed")
    root = tmp_path_factory.mktemp("amplification")
    paths = _draw(root / "drawn")
    generated = root / "generated"
    generated.mkdir()
    manifest = {
        _prompt(TEMPLATES[k - 1], occupation): [f"../drawn/{name}.png" for name in names]
        for (occupation, k), names in GENERATED.items()
    }
    (generated / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with_images = root / "captions.csv"
    with with_images.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["caption", "image"])
        for caption, image, _ in CAPTIONS:
            value = "" if image is None else ("drawn/no-such-file.png" if image == "missing" else f"drawn/{image}.png")
            writer.writerow([caption, value])
    captions_only = root / "captions.jsonl"
    captions_only.write_text("".join(json.dumps({"TEXT": c}) + "\n" for c, _, _ in CAPTIONS), encoding="utf-8")
    clip, p_woman = _mixing_clip(root, paths)
    return Data(root, generated, with_images, captions_only, clip, p_woman)


def _env(data: Data, name: str) -> dict[str, str]:
    return {
        "AUDITOR_RUNS_DIR": str(data.root / name / "runs"),
        "AUDITOR_CACHE_PATH": str(data.root / name / "cache.sqlite"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def _run_args(data: Data, *extra: str) -> list[str]:
    occupations = [arg for o in OCCUPATIONS for arg in ("--occupation", o)]
    return [
        "amplification", "run", "--t2i", f"folder:{data.generated}", *occupations, "--template", "1", "--template", "2",
        "--images", "4", "--embedder", f"clip:{data.clip}", "--threshold", str(THRESHOLD), "--per-occupation", "10",
        "--bootstrap", "500", "--name", "amp", "--json", *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def image_run(data):
    """The study on the caption file with images, every method, two templates: (its --json, its record, env)."""
    env = _env(data, "images")
    result = run_auditor(*_run_args(data, "--captions", str(data.with_images), "--image-column", "image"), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    output = json.loads(result.stdout)
    record = load_record(Path(output["run_dir"]) / "record.json", AmplificationRecord)
    return output, record, env


@pytest.fixture(scope="module")
def proxy_run(data):
    """The study on the caption file without images (caption proxy), keyword and no-indicator."""
    env = _env(data, "proxy")
    args = _run_args(data, "--captions", str(data.captions_only), "--method", "keyword", "--method", "no-indicator")
    result = run_auditor(*args, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    output = json.loads(result.stdout)
    return output, load_record(Path(output["run_dir"]) / "record.json", AmplificationRecord), env


# --------------------------------------------------------------------------- what the test expects, by hand


def _share(women: int, total: int) -> float | None:
    return None if total == 0 else 100.0 * women / total


def _expected_g(data: Data) -> dict[tuple[str, int], dict]:
    expected = {}
    for (occupation, k), names in GENERATED.items():
        verdicts = [VERDICTS.get(n, "kept") for n in names]
        decisions = [_decide(data.p_woman[n]) for n in names if n not in VERDICTS]
        counts = {v: verdicts.count(v) for v in ("kept", "no_face", "many_faces", "small_face")}
        counts |= {d: decisions.count(d) for d in ("man", "woman", "ambiguous")}
        expected[occupation, k] = counts | {"g": _share(counts["woman"], counts["man"] + counts["woman"])}
    return expected


def _rows(occupation: str, method: str) -> list[tuple]:
    """The training rows a method selects (every match fits --per-occupation 10, so keyword and nn take all)."""
    matched = [row for row in CAPTIONS if row[2] is not None and occupation.lower() in row[0].lower()]
    return matched if method in ("keyword", "nn") else [row for row in matched if row[2] == "none"]


def _expected_t_images(data: Data, occupation: str, method: str) -> dict:
    rows = _rows(occupation, method)
    faces = [image for _, image, _ in rows if image not in (None, "missing")]
    decisions = [_decide(data.p_woman[i]) for i in faces if i not in VERDICTS]
    counts = {
        "images": len(rows),
        "no_image": sum(image is None for _, image, _ in rows),
        "missing": sum(image == "missing" for _, image, _ in rows),
        "no_face": sum(i == "blank" for i in faces),
        "kept": len(decisions),
    } | {d: decisions.count(d) for d in ("man", "woman", "ambiguous")}
    return counts | {"t": _share(counts["woman"], counts["man"] + counts["woman"])}


def _expected_t_proxy(occupation: str, method: str) -> dict:
    labels = [label for _, _, label in _rows(occupation, method)]
    counts = {label: labels.count(label) for label in ("male", "female", "both", "none")}
    return counts | {"n_selected": len(labels), "t": _share(counts["female"], counts["male"] + counts["female"])}


def _a(g: float | None, t: float | None) -> float | None:
    return None if g is None or t is None else abs(g - 50) - abs(t - 50)


# --------------------------------------------------------------------------- the study with training images


@pytest.mark.slow
def test_generated_side_counts_match_the_face_filter_and_clip(data, image_run):
    _, record, _ = image_run
    expected = _expected_g(data)
    assert record.status == "completed" and record.kind == "amplification" and record.basis == "images"
    assert [(g.occupation, g.template) for g in record.generated] == list(GENERATED)
    for side in record.generated:
        want = expected[side.occupation, side.template]
        counts = side.counts.model_dump()
        assert {key: counts[key] for key in want if key != "g"} == {k: v for k, v in want.items() if k != "g"}
        assert side.share.percent == pytest.approx(want["g"]) if want["g"] is not None else side.share.percent is None
        for image, name in zip(side.images, GENERATED[side.occupation, side.template]):
            if name not in VERDICTS:
                assert image.p_woman == pytest.approx(data.p_woman[name], abs=1e-5)
    # The record names the detector and the classifier's settings.
    config = record.config
    assert config.face_detector.name == "haar:haarcascade_frontalface_default.xml"
    assert config.face_detector.settings["min_neighbors"] == 5 and config.face_detector.min_face_share == 0.1
    assert config.classifier.texts == TEXTS and config.classifier.threshold == THRESHOLD
    assert config.classifier.logit_scale == pytest.approx(np.exp(2.6592), rel=1e-3)
    assert config.embedder.fingerprint and config.text_embedder.backend == "minilm"


@pytest.mark.slow
def test_training_side_and_amplification_arithmetic(data, image_run):
    _, record, _ = image_run
    expected_g = _expected_g(data)
    sides = {(t.occupation, t.method, t.template): t for t in record.training}
    # keyword and no-indicator once per occupation; the nn methods once per template's prompt.
    assert len(record.training) == 2 * (1 + 2 + 1 + 2)
    for (occupation, method, template), side in sides.items():
        want = _expected_t_images(data, occupation, method)
        counts = side.images.model_dump()
        assert {key: counts[key] for key in want if key != "t"} == {k: v for k, v in want.items() if k != "t"}
        assert side.basis == "images" and side.selected == len(_rows(occupation, method))
        assert (side.share.percent is None) == (want["t"] is None)
        if want["t"] is not None:
            assert side.share.percent == pytest.approx(want["t"])
        assert side.prompt == (None if template is None else _prompt(TEMPLATES[template - 1], occupation))
    rows = record.amplification
    assert len(rows) == 4 * 2 * 2  # methods x templates x occupations
    for row in rows:
        g = expected_g[row.occupation, row.template]["g"]
        t = _expected_t_images(data, row.occupation, row.method)["t"]
        if _a(g, t) is None:
            assert row.amplification is None and row.note
        else:
            assert row.amplification == pytest.approx(_a(g, t))
            assert row.flipped == ((g - 50) * (t - 50) < 0)
            assert row.amplification_ci.low <= row.amplification_ci.high
    # The summaries: mean over occupations with the paper's t-test, per template and over both.
    for summary in record.summary:
        mine = [r for r in rows if r.method == summary.method and r.amplification is not None]
        if summary.template is not None:
            values = [r.amplification for r in mine if r.template == summary.template]
        else:
            values = [
                np.mean([r.amplification for r in mine if r.occupation == o])
                for o in OCCUPATIONS
                if sum(r.occupation == o for r in mine) == 2
            ]
        assert summary.occupations == len(values)
        if values:
            assert summary.mean == pytest.approx(np.mean(values))
        if len(values) >= 2 and np.ptp(values) > 0:
            assert summary.p_value == pytest.approx(ttest_1samp(values, 0.0).pvalue)
    # Stage bookkeeping: what was computed in this first run.
    timing = {t.stage: t for t in record.timings}
    assert timing["generate"].computed == 16 and timing["select"].computed == 12
    # The training images are drawn ones the model "generated" too: each distinct image is looked at once.
    assert timing["faces"].computed == len({name for names in GENERATED.values() for name in names})
    assert timing["embed_captions"].computed == 4 + 11  # four prompts, eleven matching captions


@pytest.mark.slow
def test_run_json_contract(data, image_run):
    output, record, _ = image_run
    assert set(output) >= {"run_dir", "report_html", "basis", "occupations", "templates", "methods", "settings",
                           "generated", "training", "amplification", "summary", "warnings", "metrics"}  # fmt: skip
    assert output["basis"] == "images" and output["caption_proxy"] is None
    assert output["methods"] == ["keyword", "nn", "no-indicator", "nn+no-indicator"]
    assert output["settings"]["face_detector"] == "haar:haarcascade_frontalface_default.xml"
    row = output["amplification"][0]
    assert set(row) == {"occupation", "method", "template", "g", "g_ci", "g_n", "t", "t_ci", "t_n", "basis", "a",
                        "a_ci", "flipped", "note"}  # fmt: skip
    first = record.amplification[0]
    assert (row["g"], row["t"], row["a"]) == (first.generated.percent, first.training.percent, first.amplification)
    assert [s["template"] for s in output["summary"][:3]] == [1, 2, "all"]
    assert all(s["finding"] for s in output["summary"])
    examples = [
        json.loads(line) for line in (Path(output["run_dir"]) / "training_examples.jsonl").read_text().splitlines()
    ]
    assert len(examples) == sum(t.selected for t in record.training)
    assert {e["face"] for e in examples} == {"kept", "no_face", "missing", "no_image"}
    lost = "image column: 1 training image missing or not decodable, left out of T (counted as missing): "
    assert lost + "'drawn/no-such-file.png'" in output["warnings"]


@pytest.mark.slow
def test_html_report_has_the_scatter_diagonal_and_escapes_text(image_run):
    output, record, _ = image_run
    page = Path(output["report_html"]).read_text(encoding="utf-8")
    scatters = re.findall(r'<svg class="chart scatter".*?</svg>', page, flags=re.DOTALL)
    assert len(scatters) == 4 * 2  # a scatter per method and template
    for svg in scatters:
        assert re.search(r'<line class="diagonal" x1="48.0" y1="324.0" x2="348.0" y2="24.0"/>', svg)  # G = T
        assert re.search(r'<line class="diagonal" x1="48.0" y1="24.0" x2="348.0" y2="324.0"/>', svg)  # G = 100 - T
    keyword_1 = [
        r for r in record.amplification if r.method == "keyword" and r.template == 1 and r.amplification is not None
    ]
    assert scatters[0].count("<circle") == len(keyword_1)
    # red or blue only where A's interval lies wholly on one side of 0; grey where it holds 0
    def colour(row) -> str:
        low, high = row.amplification_ci.low, row.amplification_ci.high
        return "#b71c1c" if low > 0 else "#1565c0" if high < 0 else "#757575"

    assert sorted(re.findall(r'<circle [^>]*fill="(#[0-9a-f]{6})"', scatters[0])) == sorted(map(colour, keyword_1))
    assert "holding 0 (no direction shown)" in page
    # each thumbnail says what the face filter made of it, without hovering
    captions = set(re.findall(r'width="96" height="96" loading="lazy">\n<br><span class="meta">([^<]+)</span>', page))
    assert {"no face", "several faces"} <= captions and captions & {"woman", "man", "ambiguous"}
    # Occupations and captions are escaped everywhere, SVG included; no script ever reaches the page.
    assert "R&amp;D engineer" in page and "R&D engineer" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script" not in page
    assert "caption proxy" not in page.replace("T as a caption proxy", "")  # T came from images


@pytest.mark.slow
def test_report_command_shows_the_stored_run(image_run):
    output, _, env = image_run
    shown = run_auditor("amplification", "report", "amp", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "Mean amplification A" in shown.stdout and "R&D engineer" in shown.stdout
    assert "T: the selected examples' images" in shown.stdout
    # the house table shape, no box, and G, T and A to one decimal as on the page, within 80 columns
    assert not set("│┃─━┏┡") & set(shown.stdout)
    rows = [line for line in shown.stdout.splitlines() if line.startswith(("occupation ", "nurse ", "R&D engineer "))]
    assert rows and all(len(line.rstrip()) <= 80 for line in rows), rows
    assert all(len(re.findall(r"\d\.\d \[[+-]?\d+\.\d, [+-]?\d+\.\d\]", line)) == 3 for line in rows[1:3]), rows
    again = run_auditor("amplification", "report", "amp", "--json", env=env)
    assert json.loads(again.stdout)["summary"] == output["summary"]
    general = run_auditor("report", "amp", "--json", env=env)  # `auditor report` shows any run, this one too
    assert general.returncode == 0 and json.loads(general.stdout) == json.loads(again.stdout)


@pytest.mark.slow
def test_cli_resume_of_a_finished_run_recomputes_nothing(data, image_run):
    output, _, env = image_run
    refused = run_auditor("amplification", "run", "--resume", "amp", "--images", "3", env=env, process=True)
    _one_line(refused, "--resume continues a run with its own settings; --images 3 (the run's: 4) cannot change them")
    unknown = run_auditor("amplification", "run", "--resume", "amp", "--executor", "nope", env=env, process=True)
    _one_line(unknown, "unknown executor 'nope' for --executor")
    none = run_auditor("amplification", "run", "--resume", "amp", "--embedder", "none", env=env, process=True)
    _one_line(none, "--embedder none: the zero-shot gender classifier is a CLIP model, so this study needs one")
    no_text = run_auditor("amplification", "run", "--resume", "amp", "--text-embedder", "none", env=env, process=True)
    _one_line(no_text, "--text-embedder none: the nn methods (nn, nn+no-indicator) rank captions by their sentence")
    # a run may move between executors: they compute the same images, so nothing is redone; the command that started
    # it, typed again with --resume, restates its settings (lists included)
    again = _run_args(data, "--captions", str(data.with_images), "--image-column", "image", "--resume", "amp")
    resumed = run_auditor(*again, "--executor", "overlapped", env=env)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout)["summary"] == output["summary"]
    record = load_record(Path(output["run_dir"]) / "record.json", AmplificationRecord)
    assert record.config.executor == "overlapped"
    timing = {t.stage: t for t in record.timings}
    assert {
        s: timing[s].computed for s in ("select", "embed_captions", "generate", "faces", "classify")
    } == dict.fromkeys(("select", "embed_captions", "generate", "faces", "classify"), 0)
    assert timing["generate"].cached == 16 and timing["select"].cached == 12


# --------------------------------------------------------------------------- the caption proxy


@pytest.mark.slow
def test_caption_proxy_is_labelled_everywhere(data, proxy_run):
    output, record, env = proxy_run
    assert record.basis == "caption proxy" and output["basis"] == "caption proxy"
    assert "caption proxy" in output["caption_proxy"] and any("caption proxy" in w for w in output["warnings"])
    for side in record.training:
        want = _expected_t_proxy(side.occupation, side.method)
        assert side.basis == "caption proxy" and side.images is None
        assert side.labels.model_dump() == {k: want[k] for k in ("male", "female", "both", "none")}
        assert side.share.percent == (pytest.approx(want["t"]) if want["t"] is not None else None)
    expected_g = _expected_g(data)
    for row in record.amplification:
        t = _expected_t_proxy(row.occupation, row.method)["t"]
        assert row.basis == "caption proxy"
        if row.method == "no-indicator":  # no gendered caption by construction
            assert row.amplification is None and "caption proxy" in row.note
        else:
            assert row.amplification == pytest.approx(_a(expected_g[row.occupation, row.template]["g"], t))
    assert all(s["basis"] == "caption proxy" for s in output["training"] + output["amplification"] + output["summary"])
    assert all("caption proxy" in s["finding"] for s in output["summary"])
    page = Path(output["report_html"]).read_text(encoding="utf-8")
    assert "T is a caption proxy:</strong> the % female among" in page and "T (caption proxy)" in page
    left_out = [row for row in record.amplification if row.method == "no-indicator" and row.template == 1]
    occupations, note = ", ".join(row.occupation for row in left_out), left_out[0].note  # one reason, said once
    assert {row.note for row in left_out} == {note} and len(left_out) > 1
    assert f"Not drawn, without an A: {occupations} ({note})</p>" in html.unescape(page)
    shown = run_auditor("amplification", "report", "amp", env=env)
    assert shown.returncode == 0 and "T is a caption proxy: the % female among" in shown.stdout
    noted = [row for row in record.amplification if row.note and row.template == 1]
    assert noted and all(f"  {row.occupation}: {row.note}" in shown.stdout for row in noted)  # why A is missing


# --------------------------------------------------------------------------- the training side alone


@pytest.mark.slow
def test_captions_command_json_contract(data, tmp_path):
    base = [
        "amplification",
        "captions",
        str(data.captions_only),
        "--occupation",
        "R&D engineer",
        "--occupation",
        "nurse",
    ]
    one = run_auditor(*base, "--method", "keyword", "--json")
    assert one.returncode == 0, one.stderr
    found = json.loads(one.stdout)
    assert set(found) == {"basis", "occupations"} and found["basis"] == "caption proxy"
    for occupation in OCCUPATIONS:
        want = _expected_t_proxy(occupation, "keyword")
        entry = found["occupations"][occupation]
        low, high = wilson_interval(want["female"], want["male"] + want["female"], 0.95)
        # every match fits --per-occupation, so all that matched were taken
        assert entry == {"method": "keyword", "matched": want["n_selected"], "n_selected": want["n_selected"],
                         "male": want["male"], "female": want["female"], "both": 0, "none": want["none"],
                         "pct_female": pytest.approx(want["t"]),
                         "pct_female_ci": pytest.approx([100 * low, 100 * high])}  # fmt: skip
    several = run_auditor(*base, "--method", "all", "--json")
    assert several.returncode == 0, several.stderr
    by_method = json.loads(several.stdout)
    assert set(by_method) == {"basis", "methods"}
    assert list(by_method["methods"]) == ["keyword", "nn", "no-indicator", "nn+no-indicator"]
    # Each method's object reads exactly like the single-method output.
    assert by_method["methods"]["keyword"]["occupations"] == found["occupations"]
    assert by_method["methods"]["no-indicator"]["occupations"]["nurse"]["pct_female"] is None
    assert by_method["methods"]["no-indicator"]["occupations"]["nurse"]["pct_female_ci"] is None
    terminal = run_auditor(*base, "--method", "keyword")
    assert terminal.returncode == 0 and "caption proxy" in terminal.stdout
    assert "no-indicator" not in terminal.stdout  # no note on a method that was not asked for


# --------------------------------------------------------------------------- bad input


def _one_line(result, fragment: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--caption-column", "text"], "has no caption column 'text'; its columns: caption, image"),
        (["--method", "keyword", "--method", "nearest"], "unknown selection method 'nearest'"),
        (["--occupations", "EMPTY"], "lists no occupations"),
        (["--occupation", " "], "an occupation cannot be empty"),
        (["--occupation", "***"], "the occupation '***' has no word in it"),
        (["--image-column", "picture"], "has no image column 'picture'"),
        (["--template", "9"], "the paper has templates 1 to 4"),
        (["--template", "{occupation} {article.x}"], "may only use {occupation} and {article}, as they are"),
        (["--template", "a {occupation.title}"], "(not {occupation.title})"),
        (["--embedder", "dinov2:/models/dino"], "--embedder must be a CLIP model"),
        (["--embedder", "none"], "--embedder none: the zero-shot gender classifier is a CLIP model"),
        (["--method", "nn", "--text-embedder", "none"], "--text-embedder none: the nn methods (nn) rank captions by"),
        (["--face-detector", "haar:JUNK"], "not a cascade XML file"),  # a resume would fail the same way
        (["--bootstrap", "0"], "intervals and tests are read off the resamples and cannot be turned off"),
    ],
)
def test_bad_input_is_one_line_and_creates_no_run(tmp_path, extra, fragment):
    captions = tmp_path / "captions.csv"
    captions.write_text("caption,image\na nurse,x.png\n", encoding="utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing here\n\n", encoding="utf-8")
    junk = tmp_path / "junk.xml"
    junk.write_text("<opencv_storage></opencv_storage>", encoding="utf-8")
    extra = [str(empty) if value == "EMPTY" else value.replace("JUNK", str(junk)) for value in extra]
    occupations = [] if any(a.startswith("--occupation") for a in extra) else ["--occupation", "nurse"]
    result = run_auditor(
        "amplification", "run", "--t2i", f"folder:{tmp_path}", "--captions", str(captions), *occupations, *extra, process=True
    )
    _one_line(result, fragment)
    assert not (tmp_path / "runs").exists()


def test_captions_command_bad_input(tmp_path):
    captions = tmp_path / "captions.jsonl"
    captions.write_text('{"body": "a nurse"}\n', encoding="utf-8")
    _one_line(
        run_auditor("amplification", "captions", str(captions), "--occupation", "nurse", process=True),
        "has no caption column",
    )
    _one_line(
        run_auditor("amplification", "captions", str(tmp_path / "none.csv"), "--occupation", "nurse", process=True),
        "no such caption file or folder",
    )
    _one_line(run_auditor("amplification", "run", "--occupation", "nurse", process=True), "--captions FILE is required")
    no_text = run_auditor("amplification", "captions", str(captions), "--occupation", "nurse", "--method", "nn",
                          "--text-embedder", "none", process=True)  # fmt: skip
    _one_line(no_text, "--text-embedder none: the nn methods (nn) rank captions by their sentence embeddings, so they")


# --------------------------------------------------------------------------- resume



#: Interrupted stage -> (progress units before Ctrl-C, the cache stage whose entries count the finished work).
STOPS = {"select": (4, "embed_captions"), "generate": (4, "generate"), "faces": (5, "faces"), "classify": (2, "embed")}


@pytest.mark.slow
@pytest.mark.parametrize("stage", list(STOPS))
def test_resume_after_an_interruption_recomputes_nothing(data, tmp_path, monkeypatch, stage, minilm):
    from auditor.studies import amplification
    from auditor.studies.amplification import resume_amplification, start_amplification
    from auditor.studies.amplification_options import AmplificationOptions

    monkeypatch.setattr(amplification, "EMBED_BATCH_SIZE", 2)  # several CLIP batches, so Ctrl-C can fall between them
    options = AmplificationOptions(
        t2i=f"folder:{data.generated}", captions=str(data.with_images), occupations=OCCUPATIONS,
        occupations_source="test", templates=TEMPLATES, methods=["keyword", "nn"], image_column="image",
        embedder=f"clip:{data.clip}", threshold=THRESHOLD, per_occupation=10, images=4, bootstrap=200, batch_rows=2,
    )  # fmt: skip
    options.generation.batch_size = 2
    store = RunStore(tmp_path / "runs")
    count, cache_stage = STOPS[stage]
    cache = ContentCache(tmp_path / "cache.sqlite")
    study = start_amplification(options, store, cache, StopAfter(stage, count), "r")
    with pytest.raises(KeyboardInterrupt):
        study.run()
    partial = load_record(study.run_dir / "record.json", AmplificationRecord)
    assert partial.status == "interrupted" and partial.errors[-1].stage == stage
    # Its page and report say how it ended and the command that continues it; the page shows the images drawn.
    page = (study.run_dir / "report.html").read_text(encoding="utf-8")
    resume = partial.resume_command(study.run_dir)
    assert f"this run did not complete (interrupted at {stage}" in page.lower() and resume in page
    drawn = sum(len(prompt_set.images) for prompt_set in partial.prompt_sets)
    assert page.count('<img src="images/') == min(drawn, GRID_IMAGES * len(partial.prompt_sets))
    console = Console(width=80, record=True)
    render_amplification(partial, study.run_dir, console)
    assert resume in console.export_text()
    done = cache.entries(cache_stage)
    cache.close()

    cache = ContentCache(tmp_path / "cache.sqlite")
    record = resume_amplification("r", store, cache, QuietProgress()).run()
    assert record.status == "completed" and record.errors == []
    timing = {t.stage: t for t in record.timings}
    timed = "embed_captions" if stage == "select" else stage
    total = timing[timed].computed + timing[timed].cached
    assert 0 < done < total and timing[timed].cached == done and timing[timed].computed == total - done
    assert cache.entries(cache_stage) == total
    cache.close()

    # Once finished, a resume takes everything from the cache: no image, face, embedding or selection is computed.
    cache = ContentCache(tmp_path / "cache.sqlite")
    again = resume_amplification("r", store, cache, QuietProgress()).run()
    computed = {t.stage: t.computed for t in again.timings if t.stage in ("select", "generate", "faces", "classify")}
    assert computed == {"select": 0, "generate": 0, "faces": 0, "classify": 0}
    assert sum(cache.misses[s] for s in ("select", "generate", "faces", "embed", "embed_text", "embed_captions")) == 0
    assert again.amplification == record.amplification and again.summary == record.summary
    cache.close()


def test_a_resume_stopped_before_it_changed_a_file_leaves_the_finished_run_as_it_was(data, tmp_path):
    """Ctrl-C while a resume of a finished study reads its faces again: nothing in the folder changed, so its record
    (numbers, status) is the finished one, not an interrupted run without numbers."""
    from auditor.studies.amplification import resume_amplification, start_amplification
    from auditor.studies.amplification_options import AmplificationOptions

    options = AmplificationOptions(
        t2i=f"folder:{data.generated}", captions=str(data.with_images), occupations=OCCUPATIONS,
        occupations_source="test", templates=TEMPLATES, methods=["keyword"], embedder=f"clip:{data.clip}", images=4,
        bootstrap=10,
    )  # fmt: skip
    store = RunStore(tmp_path / "runs")
    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        finished = start_amplification(options, store, cache, QuietProgress(), "r").run()
        assert finished.status == "completed" and finished.amplification and finished.summary
        attempt = resume_amplification("r", store, cache, StopAfter("faces", 1))
        with pytest.raises(KeyboardInterrupt):
            attempt.run()
    finally:
        cache.close()
    assert attempt.left_as_it_was
    assert load_record(store.root / "r" / "record.json", AmplificationRecord) == finished


def test_a_resumed_run_refuses_a_changed_training_sample(data, tmp_path, monkeypatch):
    from auditor.core.errors import AuditorError
    from auditor.studies.amplification import resume_amplification, start_amplification
    from auditor.studies.amplification_options import AmplificationOptions

    captions = tmp_path / "captions.csv"
    captions.write_bytes(data.with_images.read_bytes())
    options = AmplificationOptions(  # the captions as a relative path (the tests run in tmp_path)
        t2i=f"folder:{data.generated}", captions="captions.csv", occupations=OCCUPATIONS, occupations_source="test",
        templates=TEMPLATES, methods=["keyword"], embedder=f"clip:{data.clip}", images=4, bootstrap=10,
    )  # fmt: skip
    store = RunStore(tmp_path / "runs")
    cache = ContentCache(tmp_path / "cache.sqlite")
    study = start_amplification(options, store, cache, StopAfter("generate", 1), "r")
    with pytest.raises(KeyboardInterrupt):
        study.run()
    assert load_record(study.run_dir / "record.json", AmplificationRecord).config.captions == str(captions)
    with captions.open("a", encoding="utf-8") as handle:
        handle.write("a nurse at night,\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the recorded path still finds the file, which has changed
    with pytest.raises(AuditorError, match="is not what this run started with"):
        resume_amplification("r", store, cache, QuietProgress()).run()
    assert load_record(study.run_dir / "record.json", AmplificationRecord).status == "failed"
    listed = run_auditor("runs", "--json", "--runs-dir", str(store.root))
    assert "resume" not in json.loads(listed.stdout)[0]  # a resume would meet the changed file again
    cache.close()


def test_a_completed_run_is_left_as_it_was_when_its_training_sample_changed(data, tmp_path):
    """Resuming a finished study after its caption file changed is refused before anything is redone: its record,
    numbers and page stay as they were."""
    from auditor.studies.amplification import resume_amplification, start_amplification
    from auditor.studies.amplification_options import AmplificationOptions

    captions = tmp_path / "captions.csv"
    captions.write_bytes(data.with_images.read_bytes())
    options = AmplificationOptions(
        t2i=f"folder:{data.generated}", captions=str(captions), occupations=OCCUPATIONS, occupations_source="test",
        templates=TEMPLATES, methods=["keyword"], embedder=f"clip:{data.clip}", images=4, bootstrap=50,
    )  # fmt: skip
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    done = start_amplification(options, store, cache, QuietProgress(), "r").run()
    assert done.status == "completed" and done.amplification
    files = [store.resolve("r") / name for name in ("record.json", "report.html")]
    before = [(path.read_bytes(), path.stat().st_mtime_ns) for path in files]
    with captions.open("a", encoding="utf-8") as handle:
        handle.write("a nurse at night,\n")
    attempt = resume_amplification("r", store, cache, QuietProgress())
    with pytest.raises(AuditorError, match="put the files it read back to continue it, or start a new run"):
        attempt.run()
    assert attempt.left_as_it_was and attempt.record == done
    assert [(path.read_bytes(), path.stat().st_mtime_ns) for path in files] == before
    cache.close()
