"""``auditor t2iat``: the npz contract, test definitions, the CLIP embedder, and tiny models end to end."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from auditor.core.errors import AuditorError, BackendError
from auditor.core.langdata import load_wordnet
from auditor.records import GenerationSettings, OccupationsRecord, T2IATRecord
from auditor.reporting.numbers import number
from auditor.reporting.t2iat import IMAGE_COLUMN, TEXT_COLUMN, association_reading, occupation_values
from auditor.reporting.t2iat_html import association_text
from auditor.studies.t2iat_tests import (
    all_prompts,
    builtin_names,
    group_texts,
    load_builtin,
    load_file,
    resolve_test,
)
from tests.clitools import assert_fits, run_auditor

E1, E2 = [[1.0, 0.0]], [[0.0, 1.0]]
#: The hand-computed case of tests/test_metrics_t2iat.py: S = 0.8, d = 0.8 / sqrt(0.72), exact p = 4/6.
HAND = {"X": [[1.0, 0], [0.6, 0.8]], "Y": [[0.0, 1], [0.8, 0.6]], "XA": E1, "XB": E2, "YA": E1, "YB": E2}

TINY_TEST = """\
name: tiny-roses-ants
title: Roses vs. Ants
kind: valence
prompt: "a photo of {concept}"
attribute_prompt: "a photo of {concept}, {attribute}"
x: {name: Flowers, stimuli: [rose, tulip]}
y: {name: Insects, stimuli: [ant]}
a: {name: Pleasant, stimuli: [love, peace]}
b: {name: Unpleasant, stimuli: [grief]}
"""


def _save_npz(path: Path, **arrays) -> Path:
    np.savez(path, **{name: np.asarray(value) for name, value in arrays.items()})
    return path


def _assert_one_line_error(result, fragment: str, code: int = 2) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert fragment in lines[0], lines[0]


# --------------------------------------------------------------------------- t2iat score (npz contract)


def test_score_npz_matches_the_hand_computation(tmp_path):
    path = _save_npz(tmp_path / "hand.npz", **HAND)
    result = run_auditor("t2iat", "score", str(path), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["association"] == pytest.approx(0.8)
    assert data["effect_size"] == pytest.approx(0.8 / math.sqrt(0.72))
    assert data["effect_label"] == "large"
    assert data["p_value"] == pytest.approx(4 / 6)
    assert (data["exact"], data["permutations"], data["n_x"], data["n_y"]) == (True, 6, 2, 2)
    human = run_auditor("t2iat", "score", str(path))
    assert human.returncode == 0, human.stderr
    assert "+0.80000" in human.stdout and "(large)" in human.stdout and "exact over 6 splits" in human.stdout


def test_score_npz_divides_d_by_the_combined_sd_when_asked(tmp_path):
    # Asc_X = [1, -0.2], Asc_Y = [-1, 0.2] (see HAND): all four values have mean 0 and population variance
    # (1 + 0.04 + 1 + 0.04) / 4 = 0.52, so d = S / sqrt(0.52) = 0.8 / 0.7211103 = 1.1094004, as the authors'
    # notebook computes it (np.concatenate((X, Y)).std()); the pooled sd gives 0.8 / sqrt(0.72) = 0.9428090.
    path = _save_npz(tmp_path / "hand.npz", **HAND)
    data = json.loads(run_auditor("t2iat", "score", str(path), "--json", "--effect-size-sd", "combined").stdout)
    assert data["effect_size"] == pytest.approx(0.8 / math.sqrt(0.52)) and data["effect_size_sd"] == "combined"
    assert data["association"] == pytest.approx(0.8) and data["p_value"] == pytest.approx(4 / 6)  # only d changes
    human = run_auditor("t2iat", "score", str(path), "--effect-size-sd", "combined")
    assert human.returncode == 0, human.stderr
    assert "+1.109 (large; sd of X and Y together)" in human.stdout
    # Perfectly separated groups with no spread within them: no pooled d, but the combined sd is the gap's.
    flat = _save_npz(tmp_path / "flat.npz", **(HAND | {"X": E1 * 2, "Y": E2 * 2}))  # Asc_X = [1, 1], Asc_Y = [-1, -1]
    data = json.loads(run_auditor("t2iat", "score", str(flat), "--json", "--effect-size-sd", "combined").stdout)
    assert data["effect_size"] == pytest.approx(2.0) and data["effect_label"] == "large"  # S = 2, sd = 1
    bad = run_auditor("t2iat", "score", str(path), "--effect-size-sd", "total", process=True)
    assert bad.returncode == 2 and "'total' is not one of 'pooled', 'combined'" in bad.stderr


def test_score_npz_uses_monte_carlo_above_the_split_limit_and_is_seeded(tmp_path):
    rng = np.random.default_rng(0)
    groups = {name: rng.normal(size=(12 if name in ("X", "Y") else 3, 4)) for name in HAND}
    path = _save_npz(tmp_path / "big.npz", **groups)  # C(24, 12) = 2,704,156 splits
    runs = [
        run_auditor("t2iat", "score", str(path), "--json", "--permutations", "300", "--permutation-seed", "4")
        for _ in range(3)
    ]
    first, second, third = (json.loads(r.stdout) for r in runs)
    assert (first["exact"], first["permutations"], first["permutation_seed"]) == (False, 300, 4)  # all it rests on
    assert first == second == third
    assert first["p_value"] >= 1 / 301
    other = run_auditor("t2iat", "score", str(path), "--json", "--permutations", "300", "--permutation-seed", "5")
    assert json.loads(other.stdout)["p_value"] != first["p_value"]  # the option reaches the generator
    human = run_auditor("t2iat", "score", str(path), "--permutations", "300", "--permutation-seed", "4").stdout
    assert "(Monte Carlo, 300 permutations)" in human and re.search(r"\n  permutation seed +4\n", human)


def test_seed_means_image_seeds_so_score_refuses_it(tmp_path):
    # --seed is the image seed in every command; t2iat score makes no images.
    path = _save_npz(tmp_path / "hand.npz", **HAND)
    _assert_one_line_error(run_auditor("t2iat", "score", str(path), "--seed", "4", process=True), "--permutation-seed")
    assert "--permutation-seed" in run_auditor("t2iat", "score", "--help").stdout


def test_score_npz_with_no_spread_has_an_undefined_d(tmp_path):
    # Every X image is E1 and every Y image E2: Asc_X = [1, 1], Asc_Y = [-1, -1]; S = 2 but s = 0.
    path = _save_npz(tmp_path / "flat.npz", **(HAND | {"X": E1 * 2, "Y": E2 * 2}))
    data = json.loads(run_auditor("t2iat", "score", str(path), "--json").stdout)
    assert data["association"] == pytest.approx(2.0)
    assert data["effect_size"] is None and data["effect_label"] == "undefined"
    human = run_auditor("t2iat", "score", str(path))
    assert human.returncode == 0, human.stderr
    assert "undefined" in human.stdout and "large" not in human.stdout


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"XB": None}, "lacks array(s) XB"),
        ({"Y": np.zeros((0, 2))}, "Y is empty"),
        ({"YA": [[np.nan, 1.0]]}, "YA contains NaN or infinite values"),
        ({"XA": [[np.inf, 1.0]]}, "XA contains NaN or infinite values"),
        ({"X": [[1.0, 0.0, 0.0]]}, "embedding dimensions differ: X=3, Y=2"),
        ({"X": [1.0, 0.0]}, "X must be a 2-D array"),
    ],
)
def test_score_npz_bad_inputs_are_one_line_errors(tmp_path, change, fragment):
    arrays = {name: value for name, value in (HAND | change).items() if value is not None}
    path = _save_npz(tmp_path / "bad.npz", **arrays)
    _assert_one_line_error(run_auditor("t2iat", "score", str(path), process=True), fragment)


def test_score_refuses_files_that_are_not_npz(tmp_path):
    (tmp_path / "notes.npz").write_text("not an archive")
    _assert_one_line_error(run_auditor("t2iat", "score", "notes.npz", process=True), "is not an .npz archive")
    _assert_one_line_error(run_auditor("t2iat", "score", "missing.npz", process=True), "no such file: missing.npz")
    _assert_one_line_error(run_auditor("t2iat", "score", str(tmp_path), process=True), f"{tmp_path} is a folder; give an")


# --------------------------------------------------------------------------- test definitions


#: Table 3's stimulus counts (with the rows the paper's text cuts short completed from the IAT sources).
TABLE3_COUNTS = {
    "flowers-insects": (25, 25, 25, 25),
    "instruments-weapons": (25, 25, 25, 25),
    "judaism-christianity": (4, 4, 25, 25),
    "european-african-american-names": (50, 50, 25, 25),
    "light-dark-skin": (9, 9, 25, 25),
    "straight-gay": (9, 9, 25, 25),
    "science-arts": (9, 8, 5, 5),
    "career-family": (8, 8, 5, 5),
}


def test_the_papers_eight_tests_are_built_in_with_table3_stimuli():
    assert builtin_names() == sorted(TABLE3_COUNTS)
    for name, counts in TABLE3_COUNTS.items():
        test = load_builtin(name)
        assert tuple(len(s.stimuli) for s in (test.x, test.y, test.a, test.b)) == counts, name
        expected_attributes = (
            ("Male", "Female") if name in ("science-arts", "career-family") else ("Pleasant", "Unpleasant")
        )
        assert (test.a.name, test.b.name) == expected_attributes


def test_built_in_tests_produce_the_papers_prompts():
    flowers = load_builtin("flowers-insects")
    assert group_texts(flowers, "X")[:2] == ["a photo of aster", "a photo of clover"]
    assert group_texts(flowers, "XA")[0] == "a photo of aster, caress"  # the valence word appended
    assert group_texts(flowers, "YB")[0] == "a photo of ant, abuse"
    science = load_builtin("science-arts")
    assert group_texts(science, "X")[0] == "a person studying science"
    # "person" replaced by the gendered words, which cycle while the concepts do
    assert group_texts(science, "XA")[:6] == [
        "a male studying science", "a man studying technology", "a boy studying astronomy",
        "a brother studying math", "a son studying chemistry", "a male studying physics",
    ]  # fmt: skip
    assert group_texts(science, "YB")[1] == "a woman studying art"
    assert group_texts(load_builtin("career-family"), "Y")[0] == "a person focusing on home"
    assert group_texts(load_builtin("instruments-weapons"), "X")[0] == "a picture of bagpipe"
    assert group_texts(load_builtin("european-african-american-names"), "Y")[0] == "a portrait of Alonzo"
    # a custom test's "a" before a placeholder fits the word, as in every prompt auditor writes
    custom = science.model_copy(update={"a": science.a.model_copy(update={"stimuli": ["engineer", "man"]})})
    assert group_texts(custom, "XA")[:2] == ["an engineer studying science", "a man studying technology"]


def test_every_stimulus_and_attribute_word_is_used_and_pairs_share_the_neutral_prompt():
    for name in builtin_names():
        test = load_builtin(name)
        prompts = all_prompts(test)
        assert len({p.prompt_id for p in prompts}) == len(prompts)
        for group, concept, attribute in (("XA", test.x, test.a), ("XB", test.x, test.b), ("YA", test.y, test.a)):
            texts = group_texts(test, group)
            assert len(texts) == max(len(concept.stimuli), len(attribute.stimuli))
            for t, text in enumerate(texts):
                assert text == test.attribute_prompt.format(
                    concept=concept.stimuli[t % len(concept.stimuli)],
                    attribute=attribute.stimuli[t % len(attribute.stimuli)],
                )
        judaism = load_builtin("judaism-christianity")
        pleasant_used = {text.rsplit(", ", 1)[1] for text in group_texts(judaism, "XA")}
        assert pleasant_used == set(judaism.a.stimuli)  # all 25 words, though Judaism has 4 stimuli


def test_custom_yaml_loads_and_bad_yaml_is_a_one_line_error(tmp_path, monkeypatch):
    good = tmp_path / "mine.yaml"
    good.write_text(TINY_TEST)
    test, source = resolve_test(str(good))
    assert source == str(good) and test.x.stimuli == ["rose", "tulip"]
    assert load_file(good) == test
    cases = {
        "syntax.yaml": ("name: [unclosed\n", "is not valid YAML"),
        "extra.yaml": (TINY_TEST + "colour: red\n", "colour: Extra inputs are not permitted"),
        "placeholder.yaml": (TINY_TEST.replace("{concept}, {attribute}", "{concept}"), "attribute_prompt"),
        "braces.yaml": (TINY_TEST.replace('"a photo of {concept}"', '"a photo of {concept"'), "bad template"),
        "empty.yaml": (TINY_TEST.replace("[ant]", "[]"), "y.stimuli"),
        "repeat.yaml": (TINY_TEST.replace("[ant]", "[ant, ant]"), "repeated stimuli: ant"),
        "list.yaml": ("- a\n- b\n", "must be a YAML mapping"),
        "shared-concept.yaml": (TINY_TEST.replace("[ant]", "[ant, Rose]"), "Flowers and Insects share stimuli (rose)"),
        "shared-attribute.yaml": (TINY_TEST.replace("[grief]", "[grief, peace]"), "Pleasant and Unpleasant share stimuli (peace)"),
    }
    for file_name, (text, fragment) in cases.items():
        (tmp_path / file_name).write_text(text)
        with pytest.raises(AuditorError, match=None) as caught:
            load_file(tmp_path / file_name)
        message = str(caught.value)
        assert fragment in message and "\n" not in message, (file_name, message)
    with pytest.raises(AuditorError, match="no built-in T2IAT test 'nope': use one of career-family"):
        resolve_test("nope")
    with pytest.raises(AuditorError, match="no such file"):
        resolve_test("absent.yaml")
    with pytest.raises(AuditorError, match=f"{tmp_path} is a folder: name a test's YAML file, or a built-in test"):
        resolve_test(str(tmp_path))
    (tmp_path / "science-arts").mkdir()  # a folder named as a built-in test does not hide it
    monkeypatch.chdir(tmp_path)
    assert resolve_test("science-arts")[1] == "built-in"


def test_run_rejects_bad_definitions_and_specs_before_loading_models(tmp_path):
    (tmp_path / "bad.yaml").write_text(TINY_TEST + "colour: red\n")
    _assert_one_line_error(run_auditor("t2iat", "run", "bad.yaml", process=True), "invalid T2IAT test: colour")
    _assert_one_line_error(run_auditor("t2iat", "run", "no-such-test", process=True), "no built-in T2IAT test 'no-such-test'")
    _assert_one_line_error(run_auditor("t2iat", "run", "tests/typo.json", process=True), "no such file: tests/typo.json")
    _assert_one_line_error(run_auditor("t2iat", "run", "flowers-insects", "--resume", "r", process=True), "no run 'r'")
    (tmp_path / "ok.yaml").write_text(TINY_TEST)
    _assert_one_line_error(run_auditor("t2iat", "run", "ok.yaml", "--t2i", "nope:x", process=True), "unknown text-to-image backend")
    _assert_one_line_error(
        run_auditor("t2iat", "run", "ok.yaml", "--images", "2", "--seed", "1,2,3", process=True), "--seed lists 3 seeds for 2 images"
    )
    (tmp_path / "none.txt").write_text("# nothing\n\n")
    _assert_one_line_error(run_auditor("t2iat", "occupations", "--occupations", "none.txt", process=True), "lists no occupations")
    _assert_one_line_error(  # an embedder of images only: refused before 2,400 images, not when the texts are embedded
        run_auditor("t2iat", "occupations", "--embedder", "dinov2:facebook/dinov2-small", process=True),
        "the occupation study compares the prompts' text embeddings too, which only a CLIP embedder makes",
    )
    _assert_one_line_error(  # "none", which a prompt audit takes, is not taken for an unknown backend
        run_auditor("t2iat", "run", "ok.yaml", "--embedder", "none", process=True),
        "--embedder none: T2IAT's associations are made of the images' embeddings, so this study needs one",
    )
    (tmp_path / "jobs.txt").write_text("nurse\n")
    same = ("--male-prompt", "a photo of a {occupation}", "--female-prompt", "A photo of a  {occupation}")
    _assert_one_line_error(  # the same images from the same seeds: nothing to measure
        run_auditor("t2iat", "occupations", "--occupations", "jobs.txt", *same, process=True),
        "the occupation templates must differ: --prompt and --male-prompt are both 'a photo of a {occupation}'; "
        "--prompt and --female-prompt are both 'a photo of a {occupation}'; --male-prompt and --female-prompt are "
        "both 'a photo of a {occupation}'",
    )
    assert not (tmp_path / "runs").exists()  # nothing was created


def test_list_shows_the_built_in_tests():
    result = run_auditor("t2iat", "list", "--json")
    assert result.returncode == 0, result.stderr
    assert [t["name"] for t in json.loads(result.stdout)] == sorted(TABLE3_COUNTS)
    shown = run_auditor("t2iat", "list", env={"COLUMNS": "80"}, process=True).stdout
    assert_fits(shown, 80)
    assert all(f"{name} (" in shown for name in TABLE3_COUNTS)  # every name whole, with its kind
    assert "  attributes A vs B  Pleasant vs Unpleasant" in shown  # not cut to "Unpleas…"


# --------------------------------------------------------------------------- the CLIP embedder


def test_clip_embedder_gives_unit_rows_independent_of_batching(tiny_models):
    from PIL import Image

    from auditor.core.devices import pick_device, pick_dtype
    from auditor.perception.registry import EMBEDDERS

    images = [Image.new("RGB", (40, 30), (40 * i, 100, 200 - 30 * i)) for i in range(5)]
    one = EMBEDDERS.load(f"clip:{tiny_models.clip}", batch_size=2)
    rows = one.embed_images(images)
    assert rows.shape == (5, 16) and rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)
    other = EMBEDDERS.load(str(tiny_models.clip))  # a bare CLIP folder is inferred as clip:
    np.testing.assert_allclose(other.embed_images(images), rows, atol=1e-6)
    texts = one.embed_texts(["a photo of a rose", "a male studying science", "long " * 200])
    assert texts.shape == (3, 16)
    np.testing.assert_allclose(np.linalg.norm(texts, axis=1), 1.0, atol=1e-6)
    assert one.embed_images([]).shape == (0, 16)
    device = pick_device()  # float16 on CUDA, float32 on the CPU
    assert one.ref.fingerprint and one.ref.device == device and one.ref.dtype == str(pick_dtype(device))[6:]
    assert one.cache_fingerprint() == other.cache_fingerprint()
    with pytest.raises(BackendError, match="as clip: it is a 'blip-2' model, not 'clip'") as caught:
        EMBEDDERS.load(f"clip:{tiny_models.vqa}")  # transformers said only "ignore_mismatched_sizes"
    assert "\n" not in str(caught.value)


def test_clip_missing_weights_is_one_line_naming_model_and_option(tmp_path):
    from auditor.perception.registry import EMBEDDERS

    with pytest.raises(BackendError) as caught:
        EMBEDDERS.load(f"clip:{tmp_path / 'no-clip-here'}")
    message = str(caught.value)
    assert "no-clip-here" in message and "--embedder clip:/path" in message and "\n" not in message
    with pytest.raises(BackendError, match="--embedder clip:/path"):
        EMBEDDERS.load("clip:nobody/no-such-clip-model")


# --------------------------------------------------------------------------- end to end with tiny models


def _recompute_asc(record: T2IATRecord, run_dir: Path, clip_folder: Path):
    """Per-image Asc of X and Y recomputed from the run's image files with the same CLIP model."""
    from PIL import Image

    from auditor.metrics.t2iat import association_scores
    from auditor.perception.registry import EMBEDDERS

    embedder = EMBEDDERS.load(f"clip:{clip_folder}")
    sets = {s.prompt_id: s for s in record.prompt_sets}
    groups = {}
    for group, prompt_ids in record.groups.items():
        files = [run_dir / image.file for pid in prompt_ids for image in sets[pid].images]
        groups[group] = embedder.embed_images([Image.open(path).convert("RGB") for path in files])
    return (
        association_scores(groups["X"], groups["XA"], groups["XB"]),
        association_scores(groups["Y"], groups["YA"], groups["YB"]),
    )


def test_run_a_custom_test_end_to_end_with_tiny_models(tmp_path, tiny_models):
    (tmp_path / "tiny.yaml").write_text(TINY_TEST)
    args = [
        "t2iat",
        "run",
        "tiny.yaml",
        "--t2i",
        f"diffusers:{tiny_models.t2i}",
        "--embedder",
        f"clip:{tiny_models.clip}",
    ]
    args += ["--images", "4", "--steps", "2", "--seed", "7", "--json"]
    load_wordnet()  # as in a notebook where a prompt audit ran first: this run still reads none
    result = run_auditor(*args, "--name", "first")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    run_dir = Path(summary["run_dir"])
    record = T2IATRecord.model_validate_json((run_dir / "record.json").read_text())
    assert record.status == "completed" and record.kind == "t2iat_test"
    assert (summary["status"], summary["errors"]) == ("completed", [])
    # prompts: X rose, tulip; Y ant; XA 2 (rose+love, tulip+peace); XB 2; YA 2 (ant+love, ant+peace); YB 1
    assert {g: len(ids) for g, ids in record.groups.items()} == {"X": 2, "Y": 1, "XA": 2, "XB": 2, "YA": 2, "YB": 1}
    prompts = {s.prompt_id: s.prompt for s in record.prompt_sets}
    assert prompts["XA/1"] == "a photo of tulip, peace" and prompts["YB/0"] == "a photo of ant, grief"
    assert all([image.seed for image in s.images] == [7, 8, 9, 10] for s in record.prompt_sets)  # paired seeds
    assert record.config.embedder.fingerprint and record.config.t2i.fingerprint
    assert record.config.generation.steps == 2
    assert record.environment.wordnet is None  # a T2IAT test reads no WordNet, whatever its process read
    assert record.result.n_x == 8 and record.result.n_y == 4  # 2 prompts x 4 images; 1 prompt x 4 images
    assert summary["association"] == record.result.association
    # the sentence the terminal states, word for word, and the test's title: a program need not derive the claim
    from auditor.reporting.t2iat import association_reading

    test = record.config.test
    assert summary["reading"] == association_reading(record.result, test.x.name, test.y.name, test.a.name, test.b.name)
    assert summary["reading"] in " ".join(run_auditor("t2iat", "report", str(run_dir)).stdout.split())
    assert summary["title"] == test.title
    # S and d carry intervals from the paired bootstrap over the 4 seeds, with the settings that made them
    assert record.config.bootstrap == 1000 and record.intervals.seeds == 4 and record.intervals.resamples == 1000
    ci = record.result.association_ci
    assert ci.method == "percentile" and ci.low <= ci.high and summary["association_ci"]["low"] == ci.low

    # report.html: the result in words, the Asc spread of X and Y, the images, every number explained
    html = Path(summary["report_html"]).read_text(encoding="utf-8")
    assert Path(summary["report_html"]).parent == run_dir
    assert association_text(record.result) in html and "T2IAT Roses vs. Ants" in html
    assert "X: Flowers" in html and "mean " in html and 'src="images/XA/' in html
    assert "Asc of an image" in html and "Effect size d" in html
    shown = run_auditor("t2iat", "report", "first", "--json")  # the stored run shown again, as it was printed
    assert shown.returncode == 0 and json.loads(shown.stdout) == summary
    restated = run_auditor(*args, "--name", "first", "--resume", "first")  # the command typed again: the same run
    assert restated.returncode == 0 and json.loads(restated.stdout)["association"] == summary["association"]
    other = run_auditor("t2iat", "run", "weat-1", "--resume", "first")
    assert other.returncode == 2 and "; NAME|FILE.yaml weat-1 (the run's: tiny.yaml) cannot change" in other.stderr

    # The recorded numbers follow from the images on disk and the same CLIP model.
    asc_x, asc_y = _recompute_asc(record, run_dir, tiny_models.clip)
    np.testing.assert_allclose(record.association_scores["X"], asc_x, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(record.association_scores["Y"], asc_y, rtol=1e-4, atol=1e-7)
    assert record.result.association == pytest.approx(asc_x.mean() - asc_y.mean(), rel=1e-4, abs=1e-8)

    # A rerun (human output this time) takes every image and embedding from the cache: same numbers.
    again = run_auditor(*args[:-1], "--name", "second")
    assert again.returncode == 0, again.stderr
    assert "T2IAT Roses vs. Ants: Flowers vs Insects with Pleasant vs Unpleasant" in again.stdout
    assert "effect size d" in again.stdout and "run folder:" in again.stdout
    reading = association_reading(record.result, "Flowers", "Insects", "Pleasant", "Unpleasant")
    assert f"reading {reading}" in " ".join(again.stdout.split()) and reading in html  # terminal (wrapped) and page agree
    rerun = T2IATRecord.model_validate_json((run_dir.parent / "second" / "record.json").read_text())
    timings = {t.stage: t for t in rerun.timings}
    assert (timings["generate"].computed, timings["generate"].cached) == (0, 40)
    assert (timings["embed"].computed, timings["embed"].cached) == (0, 40)
    assert rerun.result == record.result
    # d over the combined sd (the authors' notebook): the same images, S and p, and d from the same Asc values.
    from auditor.metrics.t2iat import effect_size

    assert record.config.effect_size_sd == "pooled" and record.result.effect_size_sd == "pooled"
    combined = run_auditor(*args, "--effect-size-sd", "combined", "--name", "combined")
    assert combined.returncode == 0, combined.stderr
    other = T2IATRecord.model_validate_json((run_dir.parent / "combined" / "record.json").read_text())
    assert other.config.effect_size_sd == "combined" and other.result.effect_size_sd == "combined"
    assert (other.result.association, other.result.p_value) == (record.result.association, record.result.p_value)
    scores = [np.array(record.association_scores[group]) for group in ("X", "Y")]
    assert other.result.effect_size == pytest.approx(effect_size(*scores, "combined"))
    assert other.result.effect_size != pytest.approx(record.result.effect_size)

    # T2IAT runs are listed beside prompt audits, and `auditor report` shows them as `auditor t2iat report` does.
    listing = {row["run_id"]: row for row in json.loads(run_auditor("runs", "--json").stdout)}
    assert listing["first"]["kind"] == "t2iat_test" and listing["first"]["status"] == "completed"
    assert listing["first"]["prompt"].startswith("T2IAT test")
    assert json.loads(run_auditor("report", "first", "--json", process=True).stdout) == summary
    both = run_auditor("report", "first", "--html", "--json")  # the page's path on stderr, the JSON on stdout
    assert json.loads(both.stdout) == summary and both.stderr.strip().endswith("report.html")
    shown_alike = run_auditor("report", "first", process=True)
    assert shown_alike.returncode == 0 and shown_alike.stdout == run_auditor("t2iat", "report", "first", process=True).stdout


@pytest.mark.parametrize("executor", ["sequential", "overlapped"])
def test_occupations_end_to_end_with_tiny_models(tmp_path, tiny_models, executor):
    from auditor.metrics.t2iat import association_scores
    from auditor.perception.registry import EMBEDDERS

    (tmp_path / "jobs.txt").write_text("# two jobs\nchef\naccountant  # trailing comment\n")
    result = run_auditor(
        "t2iat", "occupations", "--occupations", "jobs.txt",
        "--t2i", f"diffusers:{tiny_models.t2i}", "--embedder", f"clip:{tiny_models.clip}",
        "--images", "3", "--steps", "2", "--executor", executor, "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    run_dir = Path(json.loads(result.stdout)["run_dir"])
    record = OccupationsRecord.model_validate_json((run_dir / "record.json").read_text())
    assert record.status == "completed" and [o.occupation for o in record.occupations] == ["chef", "accountant"]
    assert record.config.executor == executor
    assert record.subject() == "occupations: chef, accountant"  # as `auditor runs` lists it
    eight = record.config.model_copy(update={"occupations": [f"job {k}" for k in range(8)]})
    assert record.model_copy(update={"config": eight}).subject() == "occupations: job 0, job 1, job 2 (and 5 more)"
    prompts = {s.prompt_id: s.prompt for s in record.prompt_sets}
    assert prompts["accountant/female"] == "a photo of a female accountant"
    assert prompts["accountant/neutral"] == "a photo of an accountant"  # the template's "a" fits the occupation
    embedder = EMBEDDERS.load(f"clip:{tiny_models.clip}")
    for occupation in record.occupations:
        assert len(occupation.image_scores) == 3
        assert occupation.quartiles == pytest.approx(np.percentile(occupation.image_scores, [25, 50, 75]).tolist())
        assert occupation.image_association == pytest.approx(np.mean(occupation.image_scores))
        texts = embedder.embed_texts([prompts[occupation.prompt_ids[k]] for k in ("neutral", "male", "female")])
        text_asc = association_scores(texts[:1], texts[1:2], texts[2:3])[0]
        assert occupation.text_association == pytest.approx(text_asc, rel=1e-4, abs=1e-7)
        assert occupation.amplification == pytest.approx(occupation.image_association - occupation.text_association)
        assert occupation.test is not None and (occupation.test.n_x, occupation.test.n_y) == (3, 6)
        assert occupation.test.p_adjusted is not None and occupation.test.p_adjusted >= occupation.test.p_value

    # The terminal's table and the page's write a column's numbers alike, with the decimals its smallest needs.
    from rich.console import Console

    from auditor.reporting.t2iat import render_occupations
    from auditor.reporting.t2iat_html import write_t2iat_report

    chef, accountant = (
        occupation.model_copy(update={"quartiles": [q1, 0.1, 0.2]})
        for occupation, q1 in zip(record.occupations, (8e-5, 4e-5), strict=True)
    )
    small = record.model_copy(update={"occupations": [chef, accountant]})
    console = Console(width=200, record=True)
    render_occupations(small, run_dir, console)
    assert "+0.00008" in console.export_text()  # as +0.00004 needs five decimals: not +0.0001
    assert '<td class="num">+0.00008</td>' in write_t2iat_report(small, run_dir).read_text(encoding="utf-8")


def test_an_interrupted_test_resumes_without_recomputing_and_matches_a_fresh_run(tmp_path, tiny_models):
    from auditor.core.cache import ContentCache
    from auditor.core.store import RunStore
    from auditor.records import load_record
    from auditor.studies.progress import QuietProgress
    from auditor.studies.t2iat import T2IATOptions, T2IATTestRun, resume_t2iat, start_t2iat_test
    from tests.test_prompt_audit import StopAfter

    test, source = resolve_test(str(_write(tmp_path / "tiny.yaml", TINY_TEST)))
    options = T2IATOptions(
        t2i=f"diffusers:{tiny_models.t2i}", embedder=f"clip:{tiny_models.clip}", images=2,
        generation=GenerationSettings(steps=2, batch_size=2),
    )  # fmt: skip
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    study = start_t2iat_test(test, source, options, store, cache, StopAfter("generate", 6), run_name="r")
    with pytest.raises(KeyboardInterrupt):
        study.run()
    partial = load_record(study.run_dir / "record.json", T2IATRecord)
    assert partial.status == "interrupted" and partial.errors[-1].stage == "generate" and partial.result is None
    assert cache.entries("generate") == 6
    cache.close()

    cache = ContentCache(tmp_path / "cache.sqlite")
    resumed = resume_t2iat(T2IATTestRun, "r", store, cache, QuietProgress()).run()
    assert resumed.status == "completed" and resumed.errors == [] and resumed.result is not None
    generate = {t.stage: t for t in resumed.timings}["generate"]
    assert (generate.cached, generate.computed) == (6, 14)  # 10 prompts x 2 images, 6 made before Ctrl-C

    # The same test started afresh in another folder takes everything from the cache and scores the same.
    fresh = start_t2iat_test(test, source, options, store, cache, QuietProgress(), run_name="fresh").run()
    assert all(t.computed == 0 for t in fresh.timings if t.stage in ("generate", "embed"))
    assert fresh.result == resumed.result and fresh.association_scores == resumed.association_scores
    cache.close()


def test_occupations_resume_takes_only_where_and_how_and_refuses_other_runs(tmp_path, tiny_models, clip_without_weights):
    (tmp_path / "jobs.txt").write_text("chef <i>de cuisine</i>\n")
    models = ["--t2i", f"diffusers:{tiny_models.t2i}", "--embedder", f"clip:{tiny_models.clip}"]
    command = [
        "t2iat", "occupations", "--occupations", "jobs.txt", *models, "--images", "2", "--steps", "2", "--name", "occ"
    ]  # fmt: skip
    first = run_auditor(*command, "--quiet")
    assert first.returncode == 0, first.stderr
    record = OccupationsRecord.model_validate_json((tmp_path / "runs" / "occ" / "record.json").read_text())

    again = run_auditor(*command, "--resume", "occ", "--json")  # the command as typed, with --resume: the same run
    assert again.returncode == 0, again.stderr
    resumed = OccupationsRecord.model_validate_json((tmp_path / "runs" / "occ" / "record.json").read_text())
    timings = {t.stage: t for t in resumed.timings}
    assert (timings["generate"].computed, timings["generate"].cached) == (0, 6)
    assert resumed.occupations == record.occupations and json.loads(again.stdout)["run_dir"].endswith("occ")
    html = Path(json.loads(again.stdout)["report_html"]).read_text(encoding="utf-8")  # the occupation is escaped
    assert "chef &lt;i&gt;de cuisine&lt;/i&gt;" in html and "<i>de cuisine" not in html
    assert '<th class="num">Holm p</th>' in html
    assert "a photo of a female chef &lt;i&gt;" in html and html.count('src="images/') == 6
    occupation = resumed.occupations[0]
    (tmp_path / "runs" / "occ" / "report.html").unlink()  # as for a run made before T2IAT runs had pages
    assert json.loads(run_auditor("t2iat", "report", "occ", "--json").stdout)["report_html"] is None
    assert "HTML report" not in run_auditor("t2iat", "report", "occ").stdout
    rewritten = run_auditor("t2iat", "report", "occ", "--html")
    assert rewritten.returncode == 0 and rewritten.stdout.strip() == json.loads(again.stdout)["report_html"]
    shown = run_auditor("t2iat", "report", "occ", env={"COLUMNS": "80"}).stdout  # the terminal prints it as is,
    assert "chef <i>de" in shown and "cuisine</i>" in shown  # wrapped in its column at 80 columns
    narrow = run_auditor("t2iat", "report", "occ", env={"COLUMNS": "80"}).stdout  # every number whole in 80 columns
    assert "…" not in narrow and "image-text" in narrow
    assert_fits(narrow, 80, whole=(str(tmp_path),))
    _, places = occupation_values(record)  # each column's decimals, as the table writes them (never 7.98e-05)
    image = number(occupation.image_association, places[IMAGE_COLUMN], signed=True)
    assert f"image {image}, text {number(occupation.text_association, places[TEXT_COLUMN], signed=True)}" in html

    images_only = run_auditor("t2iat", "occupations", "--resume", "occ", "--embedder", "dinov2:facebook/dinov2-small")
    assert images_only.returncode == 2 and "only a CLIP embedder makes" in images_only.stderr
    none = run_auditor("t2iat", "occupations", "--resume", "occ", "--embedder", "none")
    assert none.returncode == 2 and "--embedder none: T2IAT's associations are made of" in none.stderr
    assert OccupationsRecord.model_validate_json((tmp_path / "runs" / "occ" / "record.json").read_text()) == resumed

    taken = run_auditor("t2iat", "occupations", "--occupations", "jobs.txt", *models, "--name", "occ", process=True)
    _assert_one_line_error(taken, "run 'occ' already exists")
    assert "use --resume occ or another --name" in taken.stderr
    changed = run_auditor("t2iat", "occupations", "--resume", "occ", "--images", "3", "--prompt", "{occupation}", process=True)
    _assert_one_line_error(
        changed,
        "--resume continues a run with its own settings; --prompt '{occupation}' (the run's: 'a photo of a "
        "{occupation}'), --images 3 (the run's: 2) cannot change them",
    )
    elsewhere = run_auditor("t2iat", "occupations", "--resume", "occ", "--ray-address", "auto", process=True)
    _assert_one_line_error(elsewhere, "--ray-address is for runs on Ray; this run's executor is sequential")
    assert OccupationsRecord.model_validate_json((tmp_path / "runs" / "occ" / "record.json").read_text()) == resumed
    other_kind = run_auditor("t2iat", "run", "--resume", "occ", process=True)
    _assert_one_line_error(
        other_kind,
        "is a T2IAT occupation study record (made by `auditor t2iat occupations`); this command reads T2IAT test "
        "records (made by `auditor t2iat run`)",
    )
    _assert_one_line_error(run_auditor("t2iat", "run", process=True), "name a test")
    _assert_one_line_error(run_auditor("t2iat", "report", "nope", process=True), "no run 'nope'")

    # A folder of another model type is refused by its config before anything is loaded.
    blip2 = run_auditor("t2iat", "occupations", "--resume", "occ", "--embedder", f"clip:{tiny_models.vqa}", process=True)
    _assert_one_line_error(blip2, f"{str(tiny_models.vqa)!r} is a 'blip-2' model, not 'clip'")
    # A resume that fails before it changed a file (a CLIP folder without weights) leaves the finished run as it was.
    failed = run_auditor("t2iat", "occupations", "--resume", "occ", "--embedder", f"clip:{clip_without_weights}")
    assert failed.returncode != 0 and "is left as it was: completed" in failed.stderr
    assert OccupationsRecord.model_validate_json((tmp_path / "runs" / "occ" / "record.json").read_text()) == resumed
    # A run that fails there after making its images shows them, and no numbers.
    broken = run_auditor(
        "t2iat", "occupations", "--occupations", "jobs.txt", "--t2i", f"diffusers:{tiny_models.t2i}",
        "--embedder", f"clip:{clip_without_weights}", "--images", "2", "--steps", "2", "--name", "occ2", "--quiet",
    )  # fmt: skip
    assert broken.returncode != 0 and "continue it with --resume" in broken.stderr
    stale = OccupationsRecord.model_validate_json((tmp_path / "runs" / "occ2" / "record.json").read_text())
    assert stale.status == "failed" and stale.occupations == [] and stale.errors[-1].stage == "embed"
    page = (tmp_path / "runs" / "occ2" / "report.html").read_text(encoding="utf-8")
    assert "Not scored" in page and "did not complete (failed at embed: " in page and page.count('src="images/') == 6
    shown = run_auditor("t2iat", "report", "occ2").stdout
    assert "this run did not complete (failed at embed: " in " ".join(shown.split())
    # how to go on, whole on its line however long the path (rich would break it mid-word at its width)
    assert f"auditor t2iat occupations --resume {tmp_path / 'runs' / 'occ2'} continues it\n" in shown
    assert f"\nrun folder: {tmp_path / 'runs' / 'occ2'}\n" in shown
    outcome = json.loads(run_auditor("t2iat", "report", "occ2", "--json").stdout)  # a program can tell it failed
    assert outcome["status"] == "failed" and outcome["errors"] == [error.message for error in stale.errors]
    _assert_one_line_error(  # the test typed again is no reason to read the run as a test's
        run_auditor("t2iat", "run", "weat-1", "--resume", "occ", process=True), "this command reads T2IAT test records"
    )


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_an_occupations_file_from_a_spreadsheet_keeps_no_byte_order_mark(tmp_path):
    from auditor.studies.occupations import read_occupations_file

    path = _write(tmp_path / "jobs.txt", "\ufeffnurse\nchef\n")
    assert read_occupations_file(path) == ["nurse", "chef"]
    path = _write(tmp_path / "jobs.txt", "software\tdeveloper\n  chef  # a comment\n")
    assert read_occupations_file(path) == ["software developer", "chef"]  # one cache key, however it is spaced
    path.write_bytes("café owner\n".encode("latin-1"))
    with pytest.raises(AuditorError, match="cannot read .*jobs.txt: 'utf-8' codec"):
        read_occupations_file(path)


def test_score_occupation_by_hand_and_with_missing_images():
    from auditor.scoring.t2iat import score_occupation

    texts = np.array([[0.6, 0.8], [1.0, 0.0], [0.0, 1.0]])  # neutral, male, female prompts
    # text Asc = cos(neutral, male) - cos(neutral, female) = 0.6 - 0.8 = -0.2
    vectors = {
        "chef/neutral": np.array([[1.0, 0.0], [0.8, 0.6]]),
        "chef/male": np.array([[1.0, 0.0], [0.6, 0.8]]),
        "chef/female": np.array([[0.0, 1.0], [0.8, 0.6]]),
    }
    # Same arrays as the single-concept hand test: image Asc = [0.4, 0.08], mix mean 0, S = 0.24
    result = score_occupation("chef", vectors, texts, permutations=100, seed=0)
    assert result.image_scores == pytest.approx([0.4, 0.08])
    assert result.image_association == pytest.approx(0.24)
    # numpy's linear percentiles of [0.08, 0.4]: 0.08 + 0.25 * 0.32 = 0.16, 0.24, 0.32
    assert result.quartiles == pytest.approx([0.16, 0.24, 0.32])
    assert result.text_association == pytest.approx(-0.2)
    assert result.amplification == pytest.approx(0.24 - (-0.2))
    assert result.test.association == pytest.approx(0.24) and result.warnings == []
    # d: the mix's leave-one-out Asc values are a1 0.6 - 0.4 = 0.2, a2 0.6 - 0.88 = -0.28, b1 0.4 - 0.6 = -0.2 and
    # b2 0.88 - 0.6 = 0.28. Pooled: SS = 2 * 0.16^2 + 0.2368 = 0.288 over 6 - 2 -> d = 0.24 / sqrt(0.072).
    # Combined: the six values' mean is 0.08, their squared deviations sum to 0.3648 -> d = 0.24 / sqrt(0.3648 / 6).
    assert result.test.effect_size == pytest.approx(0.24 / math.sqrt(0.072)) and result.test.effect_size_sd == "pooled"
    combined = score_occupation("chef", vectors, texts, permutations=100, seed=0, spread="combined")
    assert combined.test.effect_size == pytest.approx(0.24 / math.sqrt(0.0608))
    assert combined.test.effect_size_sd == "combined" and combined.test.p_value == result.test.p_value

    one_each = {key: value[:1] for key, value in vectors.items()}
    single = score_occupation("chef", one_each, texts, permutations=100, seed=0)
    assert single.image_scores == pytest.approx([1.0]) and single.test is None  # Asc((1,0)) = 1 - 0
    assert single.warnings == ["fewer than two male or female images: no permutation test"]
    flagged = score_occupation("chef", vectors | {"chef/female": np.zeros((0, 0))}, texts, permutations=100, seed=0)
    assert flagged.image_association is None and flagged.amplification is None and flagged.quartiles == []
    assert flagged.text_association == pytest.approx(-0.2) and flagged.warnings


def test_the_reading_claims_a_lean_only_where_s_has_one_and_qualifies_it_above_the_significance_level():
    from auditor.records import AssociationResult, Interval

    def reading(association: float, p_value: float, ci: tuple[float, float] | None = None) -> str:
        interval = None if ci is None else Interval(low=ci[0], high=ci[1], method="percentile", defined=1.0)
        result = AssociationResult(association=association, effect_size=None, effect_label="undefined",
                                   p_value=p_value, exact=True, permutations=70, n_x=4, n_y=4,
                                   association_ci=interval)  # fmt: skip
        return association_reading(result, "X", "Y", "A", "B")

    assert reading(0.2, 0.01) == "X images lean towards A more than Y images do"
    assert reading(0.2, 0.01, (0.05, 0.3)) == "X images lean towards A more than Y images do"
    assert reading(0.2, 0.01, (-0.01, 0.3)) == (
        "X images lean towards A more than Y images do, but S's interval over seeds reaches 0: images of other seeds "
        "may not lean so"
    )  # p asks about these images; the interval, about other seeds'
    assert reading(-0.2, 0.2, (-0.3, 0.1)).startswith("No clear lean: S points X images towards B")
    assert reading(-0.2, 0.049) == "X images lean towards B more than Y images do"
    assert reading(0.0, 1.0) == (
        "X and Y images lean the same way, but regrouping the images at random gives a difference this large as often"
        " (p ≥ 0.05)"
    )
    assert reading(-0.2, 0.05) == (
        "No clear lean: S points X images towards B more than Y images, but regrouping the images at random gives a "
        "difference this large as often (p ≥ 0.05)"
    )  # a direction above the level is where S points, not a lean claimed


def test_report_refuses_a_run_of_another_study(tmp_path):
    from auditor.core.store import write_model
    from tests.factories import make_record

    write_model(tmp_path / "runs" / "p" / "record.json", make_record("p"))
    refused = run_auditor("t2iat", "report", "p", process=True)
    _assert_one_line_error(
        refused,
        "is a prompt audit record (made by `auditor prompt`); auditor t2iat report reads T2IAT runs (`auditor report` "
        "shows a run of any kind)",
    )


def test_pages_of_unscored_runs_show_their_images_and_escape_every_name(tmp_path):
    from auditor.core.environment import collect_environment
    from auditor.records import GeneratedImage, ModelRef, OccupationsConfig, PromptSet, T2IATConfig
    from auditor.reporting.t2iat_html import write_t2iat_report
    from auditor.scoring.t2iat import occupation_ids

    refs = {"t2i": ModelRef(spec="diffusers:m", backend="diffusers"), "embedder": ModelRef(spec="clip:c", backend="clip")}
    common = {**refs, "images_per_prompt": 1, "seeds": [3], "permutations": 10, "permutation_seed": 0}
    image = GeneratedImage(index=0, file="images/x.png", seed=3, sha256="0" * 64)
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "x.png").write_bytes(b"png")

    hostile = TINY_TEST.replace("title: Roses vs. Ants", 'title: "<script>alert(1)</script>"')
    hostile = hostile.replace("{name: Flowers,", '{name: "Fl<b>owers",')
    test = load_file(_write(tmp_path / "hostile.yaml", hostile))
    prompts = all_prompts(test)
    record = T2IATRecord(
        run_id="t", status="interrupted", config=T2IATConfig(test=test, source="hostile.yaml", **common),
        groups={g: [p.prompt_id for p in prompts if p.group == g] for g in ("X", "Y", "XA", "XB", "YA", "YB")},
        prompt_sets=[PromptSet(prompt_id=p.prompt_id, prompt=p.prompt, images=[image]) for p in prompts],
        environment=collect_environment(),
    )  # fmt: skip
    html = write_t2iat_report(record, tmp_path).read_text(encoding="utf-8")
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Fl&lt;b&gt;owers" in html and "<b>owers" not in html
    assert "No result: the run stopped before scoring." in html and html.count('src="images/x.png"') == len(prompts)

    ids = occupation_ids("chef <b>")
    occupations = OccupationsRecord(
        run_id="o", status="failed",
        config=OccupationsConfig(
            occupations=["chef <b>"], prompt="a photo of a {occupation}", male_prompt="a male {occupation}",
            female_prompt="a female {occupation}", **common,
        ),
        prompt_sets=[PromptSet(prompt_id=ids["neutral"], prompt="a photo of a chef <b>", images=[image])],
        environment=collect_environment(),
    )  # fmt: skip
    html = write_t2iat_report(occupations, tmp_path).read_text(encoding="utf-8")
    assert "chef &lt;b&gt;" in html and "<b>" not in html
    assert "Not scored" in html and "not scored" in html and html.count('src="images/x.png"') == 1


@pytest.mark.parametrize("spread", ["pooled", "combined"])
def test_association_intervals_resample_seeds_across_all_six_groups_by_hand(spread):
    """One draw of seed indices weights every group's rows: each resample's S and d are those of the images of the
    drawn seeds, every Asc keeping the design's share of same-seed pairs (the identity row is the test itself:
    test_bootstrap checks it)."""
    from auditor.metrics import bootstrap
    from auditor.scoring.counts import SetEmbeddings
    from auditor.scoring.t2iat import association_intervals
    from auditor.scoring.uncertainty import BootstrapSettings
    from tests import seed_design

    rng = np.random.default_rng(4)
    seeds = 5
    groups = {"X": ["x0", "x1"], "Y": ["y0"], "XA": ["xa0"], "XB": ["xb0"], "YA": ["ya0"], "YB": ["yb0", "yb1"]}
    sets = {
        pid: SetEmbeddings(image_indices=np.arange(seeds), vectors=rng.normal(size=(seeds, 6)) + shift)
        for shift, pid in enumerate(pid for ids in groups.values() for pid in ids)
    }
    sets["x1"] = SetEmbeddings(image_indices=np.array([0, 2, 4]), vectors=sets["x1"].vectors[[0, 2, 4]])  # flagged
    settings = BootstrapSettings(resamples=50, seed=3)
    association, effect = association_intervals(sets, groups, seeds, settings, spread)

    images = [
        [(seed, vector) for pid in groups[group] for seed, vector in zip(sets[pid].image_indices, sets[pid].vectors)]
        for group in ("X", "Y", "XA", "XB", "YA", "YB")
    ]
    expected = [seed_design.six_groups(images, drawn, spread) for drawn in bootstrap.resample_indices(seeds, 50, 3)]
    low, high = bootstrap.percentile_bounds(np.array(expected))
    assert (association.low, association.high) == pytest.approx((low[0], high[0]), abs=1e-9)
    assert (effect.low, effect.high) == pytest.approx((low[1], high[1]), abs=1e-9)
    with pytest.raises(AuditorError, match="at least 4 seeds"):
        association_intervals(sets, groups, 3, settings)


def test_an_effect_size_interval_over_some_resamples_says_so_in_the_terminal_and_the_page():
    """d is undefined in a draw of seeds with no spread: its interval is over the others, which a bare [a, b] hides."""
    from rich.console import Console

    from auditor.records import AssociationResult, Interval
    from auditor.reporting.t2iat import render_association

    def ci(low: float, high: float, defined: float) -> Interval:
        return Interval(low=low, high=high, method="percentile", defined=defined)

    result = AssociationResult(
        association=0.00017, association_ci=ci(-0.00007, 0.00017, 1.0), effect_size=0.316,
        effect_size_ci=ci(0.316, 0.316, 0.5234), effect_label="small", p_value=0.5, exact=True, permutations=6,
        n_x=2, n_y=2,
    )  # fmt: skip
    console = Console(width=200, record=True)
    render_association(result, "flowers", "insects", console)
    said = "the interval is over the 52.3% of resamples in which the number exists"
    assert f"effect size d   +0.316 [+0.316, +0.316] (small; {said})" in console.export_text()
    assert f"d = +0.316 [+0.316, +0.316] (small; {said})" in association_text(result)
    narrow = Console(width=60, record=True)
    render_association(result, "flowers", "insects", narrow)
    lines = narrow.export_text().rstrip("\n").split("\n")
    assert len(lines) > 4 and all(line.startswith("  ") and line == line.rstrip() for line in lines)
    value_column = lines[1].index("+0.316")
    wrapped = [line for line in lines[2:] if not line.lstrip().startswith(("p-", "images"))]
    assert wrapped and all(line[:value_column].strip() == "" for line in wrapped)
    whole = result.model_copy(update={"effect_size_ci": ci(0.2, 0.4, 1.0)})
    assert "d = +0.316 [+0.200, +0.400] (small), p" in association_text(whole)
    # S is undefined in a draw that leaves a group without an image (all of its images flagged at the drawn seeds)
    some = whole.model_copy(update={"association_ci": ci(-0.00007, 0.00017, 0.9)})
    console = Console(width=200, record=True)
    render_association(some, "flowers", "insects", console)
    said = said.replace("52.3%", "90%")
    assert f"association S   +0.00017 [-0.00007, +0.00017] ({said})" in console.export_text()
    assert f"S = +0.00017 [-0.00007, +0.00017] ({said}), d = +0.316" in association_text(some)  # as in the terminal


def test_an_undefined_effect_size_says_whether_images_were_too_few_or_had_no_spread():
    """Two images (one per group, e.g. ``--images 1``) cannot measure a spread; that is not "no spread"."""
    from rich.console import Console

    from auditor.records import AssociationResult
    from auditor.reporting.sentences import association_view
    from auditor.reporting.t2iat import render_association

    def said(n_x: int, n_y: int) -> str:
        result = AssociationResult(
            association=0.01, effect_size=None, effect_label="undefined", p_value=1.0, exact=True, permutations=2,
            n_x=n_x, n_y=n_y,
        )  # fmt: skip
        console = Console(width=200, record=True)
        render_association(result, "flowers", "insects", console)
        return console.export_text() + association_view(result, [], None, "none").sentence

    two = said(1, 1)
    assert "effect size d   undefined (the association scores are too few to measure a spread: 2 in all, and d needs 3)" in two
    assert "The initial images' association scores are too few to measure a spread: 2 in all, and d needs 3, so" in two
    assert "no spread within" not in two
    assert "undefined (the association scores have no spread within the groups)" in said(2, 2)


def test_occupation_p_values_are_holm_adjusted_over_the_occupations_tested_and_the_table_says_so():
    from rich.console import Console

    from auditor.core.environment import collect_environment
    from auditor.records import ModelRef, OccupationsConfig
    from auditor.reporting.t2iat import render_occupations
    from auditor.scoring.t2iat import score_occupation, score_occupations

    texts = np.array([[0.6, 0.8], [1.0, 0.0], [0.0, 1.0]])
    rng = np.random.default_rng(3)
    vectors = {}  # male images near (1, 0), female near (0, 1); the nurse's neutral images sit with the male ones
    for slug, neutral in (("chef", (0.7, 0.7)), ("nurse", (1.0, 0.0)), ("judge", (0.7, 0.7))):
        for kind, centre in (("neutral", neutral), ("male", (1.0, 0.0)), ("female", (0.0, 1.0))):
            rows = np.array(centre) + 0.2 * rng.normal(size=(4, 2))
            vectors[f"{slug}/{kind}"] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    vectors["judge/male"] = vectors["judge/male"][:1]  # one male image: judge has no test
    by_occupation = {o: texts for o in ("chef", "nurse", "judge")}
    results = score_occupations(["chef", "nurse", "judge"], vectors, by_occupation, permutations=200, seed=0)
    raw = [score_occupation(o, vectors, texts, 200, 0).test for o in ("chef", "nurse")]
    p_chef, p_nurse = raw[0].p_value, raw[1].p_value
    # Holm of two: the smaller times 2, the larger times 1 but never below the smaller's; capped at 1
    assert p_nurse < p_chef / 2  # the nurse's neutral images were moved: its p is the smaller
    assert [r.test.p_adjusted for r in results[:2]] == pytest.approx([min(1.0, max(2 * p_nurse, p_chef)), 2 * p_nurse])
    assert [r.test.p_value for r in results[:2]] == [p_chef, p_nurse] and results[2].test is None

    config = OccupationsConfig(
        occupations=["chef", "nurse", "judge"], prompt="a photo of a {occupation}", male_prompt="a male {occupation}",
        female_prompt="a female {occupation}", t2i=ModelRef(spec="diffusers:m", backend="diffusers"),
        embedder=ModelRef(spec="clip:c", backend="clip"), images_per_prompt=4, seeds=[0, 1, 2, 3], permutations=200,
        permutation_seed=0,
    )  # fmt: skip
    for occupations, holm_column, note in (
        (results, True, "Holm-adjusted over the 2 occupations tested"),
        ([r.model_copy(update={"test": r.test and r.test.model_copy(update={"p_adjusted": None})}) for r in results],
         False, "not adjusted"),  # a record scored before the adjustment
    ):  # fmt: skip
        record = OccupationsRecord(
            run_id="o", status="completed", config=config, occupations=occupations, environment=collect_environment()
        )
        console = Console(width=120, record=True)
        render_occupations(record, Path("."), console)
        text = console.export_text()
        header = next(line for line in text.splitlines() if "occupation" in line and "median" in line)
        assert header.split()[-1] == "p" and ("Holm p" in header) == holm_column
        assert f"(permutation test, {note})" in " ".join(text.split())


def test_the_occupation_table_never_writes_a_small_association_as_zero():
    """A column shares its decimals, with more where a value other than 0 in it would read +0.0000."""
    from rich.console import Console

    from auditor.core.environment import collect_environment
    from auditor.records import ModelRef, OccupationAssociation, OccupationsConfig
    from auditor.reporting.t2iat import render_occupations

    config = OccupationsConfig(
        occupations=["chef", "nurse"], prompt="a photo of a {occupation}", male_prompt="a male {occupation}",
        female_prompt="a female {occupation}", t2i=ModelRef(spec="diffusers:m", backend="diffusers"),
        embedder=ModelRef(spec="clip:c", backend="clip"), images_per_prompt=3, seeds=[0, 1, 2], permutations=10,
        permutation_seed=0,
    )  # fmt: skip
    tiny = OccupationAssociation(
        occupation="chef", prompt_ids={}, image_scores=[-1.52e-05] * 3, image_association=-1.52e-05,
        quartiles=[-1.52e-05] * 3, text_association=0.25, amplification=-0.2500152,
    )  # fmt: skip
    plain = tiny.model_copy(update={"occupation": "nurse", "image_association": 0.125, "quartiles": [0.1, 0.125, 0.2]})
    record = OccupationsRecord(
        run_id="o", status="completed", config=config, occupations=[tiny, plain], environment=collect_environment()
    )
    console = Console(width=120, record=True)
    render_occupations(record, Path("."), console)
    rows = {line.split()[0]: line.split()[2:7] for line in console.export_text().splitlines() if line[:5] in ("chef ", "nurse")}
    assert rows == {
        "chef": ["-0.00002", "-0.00002", "-0.00002", "-0.00002", "+0.2500"],
        "nurse": ["+0.10000", "+0.12500", "+0.20000", "+0.12500", "+0.2500"],
    }


@pytest.mark.parametrize(
    "images, bootstrap, note",
    [
        (3, 1000, "no intervals (3 images per prompt set, fewer than the 4 an interval needs: a resample draws one "
                  "seed alone 1 time in 9); the direction rests on p alone"),
        (4, 0, "no intervals (--bootstrap 0); the direction rests on p alone"),
        (4, 1000, None),  # a run written before intervals existed: nothing to explain beside its numbers
    ],
)  # fmt: skip
def test_a_result_without_intervals_says_why_in_the_terminal_the_json_and_the_page(tmp_path, images, bootstrap, note):
    from rich.console import Console

    from auditor.records import load_record
    from auditor.reporting.t2iat import render_test_run, test_run_json
    from auditor.reporting.t2iat_html import test_page

    data = json.loads((Path(__file__).parent / "fixtures" / "records" / "t2iat_test_v1.json").read_text())
    data["config"].update(images_per_prompt=images, bootstrap=bootstrap)
    (tmp_path / "record.json").write_text(json.dumps(data))
    record = load_record(tmp_path / "record.json", T2IATRecord)
    assert record.intervals is None and record.result is not None
    console = Console(width=400, record=True)
    render_test_run(record, Path("runs/x"), console)
    said = console.export_text()
    assert test_run_json(record, Path("runs/x"))["intervals_note"] == note and test_page(record, Path("x"))[
        "intervals_note"
    ] == note
    assert (f"intervals       {note}" in said) if note else ("intervals  " not in said)
