"""Intervals and adjusted p-values in records, `auditor score`, the reports, and the sentences they gate."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from auditor.records import ScoringSettings, load_record
from auditor.reporting import report_json, write_html_report
from auditor.reporting.prompt_audit import build_view
from auditor.scoring.intervals import score_run
from auditor.scoring.tibet import record_concepts
from tests.clitools import run_auditor
from tests.test_prompt_audit import PROMPT, tiny_args
from tests.test_score_command import tibet_result_of_four

FIXTURES = Path(__file__).parent / "fixtures"


def _rescored(record, **settings):
    scoring = ScoringSettings.model_validate({**record.config.scoring.model_dump(), **settings})
    return score_run(record, scoring)


def test_a_prompt_audit_records_intervals_and_auditor_score_reproduces_them(tiny_models, tmp_path):
    result = run_auditor(
        "prompt", PROMPT, *tiny_args(tiny_models, images=4), "--bootstrap", "200", "--ci-seed", "7", "--quiet",
        "--name", "boot",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "runs" / "boot"
    record = load_record(run_dir / "record.json")
    scores = record.scores
    assert scores.intervals.resamples == 200 and scores.intervals.seed == 7 and scores.intervals.seeds == 4
    assert record.config.scoring.bootstrap == 200 and record.config.scoring.ci_seed == 7
    for axis in scores.axes:
        assert axis.bav is None or axis.bav_ci is not None
        assert all(cf.cas is None or cf.cas_ci is not None for cf in axis.counterfactuals)
    assert scores.correction in ("holm", "none")

    rescored = run_auditor("score", str(run_dir), "--json")
    assert rescored.returncode == 0, rescored.stderr
    axes = json.loads(rescored.stdout)["axes"]
    for axis in scores.axes:
        assert axes[axis.axis]["cas_ci"] == [cf.cas_ci.bounds() if cf.cas_ci else None for cf in axis.counterfactuals]
        assert axes[axis.axis]["bav_ci"] == (axis.bav_ci.bounds() if axis.bav_ci else None)
        assert axes[axis.axis]["cas"] == pytest.approx([cf.cas for cf in axis.counterfactuals])


def test_the_bootstrap_leaves_point_estimates_alone_and_one_seed_gives_one_interval():
    record = load_record(FIXTURES / "records" / "prompt_audit_v1.json")
    record = record.model_copy(update={"concepts": record_concepts(record)})
    off, first, again, other = (
        _rescored(record, bootstrap=0),
        _rescored(record, bootstrap=300, ci_seed=1),
        _rescored(record, bootstrap=300, ci_seed=1),
        _rescored(record, bootstrap=300, ci_seed=2),
    )
    assert off.intervals is None and all(axis.bav_ci is None for axis in off.axes)
    for a, b in zip(off.axes, first.axes):
        assert [cf.cas for cf in a.counterfactuals] == [cf.cas for cf in b.counterfactuals] and a.bav == b.bav
    assert first == again
    assert first != other


def test_version_1_records_get_intervals_on_auditor_score(tmp_path):
    path = tmp_path / "record.json"
    shutil.copy(FIXTURES / "records" / "prompt_audit_v1.json", path)
    assert load_record(path).config.scoring.bootstrap == 0  # version 1 computed none
    result = run_auditor("score", str(path), "--json", "--bootstrap", "100")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["intervals"]["resamples"] == 100
    for axis in data["axes"].values():
        assert len(axis["cas_ci"]) == len(axis["cas"]) and all(len(ci) == 2 for ci in axis["cas_ci"])
        assert len(axis["bav_ci"]) == 2 and "lean_ci" in axis
    default = json.loads(run_auditor("score", str(path), "--json").stdout)
    assert default["intervals"]["resamples"] == 1000  # a run without intervals gets the default on rescoring


def test_auditor_score_gives_intervals_for_the_authors_files_with_a_seed(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(tibet_result_of_four()))
    runs = [
        json.loads(run_auditor("score", str(path), "--json", "--bootstrap", "50", "--ci-seed", seed).stdout)
        for seed in ("3", "3", "4")
    ]
    assert runs[0] == runs[1] and runs[0]["axes"] != runs[2]["axes"]
    gender = runs[0]["axes"]["gender"]
    assert len(gender["cas_ci"]) == 2 and all(low <= high for low, high in gender["cas_ci"])
    assert runs[0]["intervals"] == {"resamples": 50, "level": 0.95, "method": "percentile", "seed": 3, "seeds": 4}
    off = json.loads(run_auditor("score", str(path), "--json", "--bootstrap", "0").stdout)
    assert off["intervals"] is None and off["axes"]["gender"]["cas_ci"] == [None, None]
    bca = run_auditor("score", str(path), "--json", "--bootstrap", "50", "--ci-method", "bca")
    assert bca.returncode == 0 and json.loads(bca.stdout)["intervals"]["method"] == "bca"
    # The terminal points at the difference to compare counterfactuals by where a file's reader finds it (auditor
    # report reads runs, not files): each axis's spread in --json, with its interval.
    said = " ".join(run_auditor("score", str(path), "--bootstrap", "50").stdout.split())
    assert "compare counterfactuals through their difference: each axis's spread, with its interval, in --json" in said
    assert runs[0]["axes"]["gender"]["spread"]["ci"] is not None


def test_auditor_score_says_which_intervals_are_not_what_the_method_line_says(tmp_path):
    """BCa asked for: where it cannot be used the percentile interval stands in, and each one is named."""
    from auditor.reporting.sentences import interval_notes

    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES / "runs" / "pharmacist-sd15", runs / "pharmacist-sd15")
    bca = run_auditor("score", "pharmacist-sd15", "--ci-method", "bca", "--json")
    assert bca.returncode == 0, bca.stderr
    notes = json.loads(bca.stdout)["interval_notes"]
    fallback = "age: the BAV interval is a percentile interval (BCa could not be used: every resample is equal)"
    assert fallback in notes and f"note: {fallback}" in " ".join(bca.stderr.split())
    terminal = run_auditor("score", "pharmacist-sd15", "--ci-method", "bca", env={"COLUMNS": "200"})
    assert "95% bca intervals (percentile where noted)" in terminal.stdout
    plain = run_auditor("score", "pharmacist-sd15", "--json")
    assert json.loads(plain.stdout)["interval_notes"] == []  # percentile asked for: nothing stands in

    scores = load_record(runs / "pharmacist-sd15" / "record.json").scores
    gender = scores.axes[0]
    partial = scores.model_copy(deep=True)
    partial.axes[0].lean_ci = gender.lean_ci.model_copy(update={"defined": 0.9})
    assert interval_notes(partial) == [
        f"{gender.axis}: the lean interval is over the 90% of resamples in which the number exists"
    ]
    partial.axes[0].lean_ci = gender.lean_ci.model_copy(update={"defined": 0.9996})  # never "100%"
    assert interval_notes(partial) == [
        f"{gender.axis}: the lean interval is over the 99.9% of resamples in which the number exists"
    ]


def test_terminal_and_json_show_intervals_and_without_them_nothing_is_claimed():
    record = load_record(FIXTURES / "runs" / "pharmacist-sd15" / "record.json")
    data = report_json(record)
    gender = next(axis for axis in data["axes"] if axis["name"] == "gender")
    assert all(len(cf["cas_ci"]) == 2 for cf in gender["counterfactuals"]) and len(gender["bav_ci"]) == 2
    assert len(gender["lean_ci"]) == 2 and data["uncertainty"].startswith("95% percentile intervals")
    human = run_auditor("report", str(FIXTURES / "runs" / "pharmacist-sd15"), env={"COLUMNS": "100"})
    assert human.returncode == 0, human.stderr
    cas = next(cf for cf in record.scores.axes[0].counterfactuals)
    assert f"{cas.cas:.2f} [{cas.cas_ci.low:.2f}, {cas.cas_ci.high:.2f}]" in human.stdout
    # beside every CAS interval, the page and the terminal say what it cannot show (README: read them with care)
    assert data["cas_caveat"].startswith("A single CAS is biased low at small sizes")
    assert f"{data['uncertainty']}. {data['cas_caveat']}" in " ".join(human.stdout.replace("│", " ").split())

    bare = record.model_dump(mode="json")
    bare["scores"]["intervals"] = None
    for axis in bare["scores"]["axes"]:
        axis.update(bav_ci=None, spread=None, lean_ci=None, relative_bav_ci=None)
    view = build_view(type(record).model_validate(bare))
    assert view.headline.startswith("The axis with the largest BAV is age") and "no ranking is claimed" in view.headline
    assert all("no difference is claimed" in axis.finding for axis in view.axes)
    assert "no interval was computed" in next(a for a in view.axes if a.name == "gender").lean_sentence
    # two axes tied at the largest BAV, without intervals: both named, neither put first
    gender = next(axis for axis in bare["scores"]["axes"] if axis["axis"] == "gender")
    age = next(axis for axis in bare["scores"]["axes"] if axis["axis"] == "age")
    gender.update(bav=age["bav"], relative_bav=age["relative_bav"])
    view = build_view(type(record).model_validate(bare))
    assert view.headline == (
        f"The axes with the largest BAV are gender and age ({age['bav']:.4f} each); no interval was computed, so no "
        "ranking is claimed."
    )
    from auditor.reporting.sentences import top_axis_phrase

    assert top_axis_phrase(view.axes) == "one of the axes with the largest BAV (tied with age; no interval was " \
        "computed, so no ranking is claimed)"  # fmt: skip


def test_t2iat_directions_need_a_holm_adjusted_p_below_alpha():
    record = load_record(FIXTURES / "runs" / "pharmacist-sd15" / "record.json")
    data = record.model_dump(mode="json")
    gender = next(axis for axis in data["scores"]["axes"] if axis["axis"] == "gender")

    def sentence(p: float, p_adjusted: float, alpha: float = 0.05) -> str:
        gender["association"].update(p_value=p, p_adjusted=p_adjusted)
        data["scores"]["alpha"] = alpha
        view = build_view(type(record).model_validate(data))
        return next(a for a in view.axes if a.name == "gender").association.sentence

    assert "lean towards 'a photo of a male pharmacist'" in sentence(0.01, 0.03)
    claimless = sentence(0.01, 0.06)  # significant alone, not after Holm across the axes
    assert claimless.startswith("No clear lean") and "Holm-adjusted p = 0.06" in claimless
    assert sentence(0.01, 0.03, alpha=0.01).startswith("No clear lean")


def test_holm_adjusts_the_association_p_values_across_the_axes():
    from auditor.records import AssociationResult
    from auditor.scoring.intervals import with_adjusted_p_values

    record = load_record(FIXTURES / "runs" / "pharmacist-sd15" / "record.json")
    base = AssociationResult(association=0.1, effect_size=0.5, effect_label="medium", p_value=0.02, exact=True,
                             permutations=10, n_x=3, n_y=6)  # fmt: skip
    axes = [
        axis.model_copy(update={"association": base.model_copy(update={"p_value": p})})
        for axis, p in zip(record.scores.axes, (0.02, 0.04, 0.01))
    ]
    scores = record.scores.model_copy(update={"axes": axes})
    adjusted = with_adjusted_p_values(scores, alpha=0.05)
    # sorted .01 .02 .04 times 3 2 1 = .03 .04 .04 (running max)
    assert [axis.association.p_adjusted for axis in adjusted.axes] == pytest.approx([0.04, 0.04, 0.03])
    assert adjusted.correction == "holm" and adjusted.alpha == 0.05


def test_embedding_intervals_in_the_live_audit(tiny_models, tmp_path):
    result = run_auditor(
        "prompt", PROMPT, *tiny_args(tiny_models, images=4), "--bootstrap", "100", "--quiet", "--name", "emb"
    )
    assert result.returncode == 0, result.stderr
    record = load_record(tmp_path / "runs" / "emb" / "record.json")
    similarities = [cf for axis in record.scores.axes for cf in axis.counterfactuals if cf.embedding_similarity]
    assert similarities and all(cf.embedding_similarity_ci is not None for cf in similarities)
    associations = [axis.association for axis in record.scores.axes if axis.association]
    assert all(a.p_adjusted is not None and a.association_ci is not None for a in associations)
    assert np.all([a.p_adjusted >= a.p_value for a in associations])


def test_compare_gives_each_change_an_interval_paired_over_shared_seeds(tmp_path):
    runs = tmp_path / "runs"
    for run_id in ("pharmacist-sd15", "pharmacist-sd21"):
        shutil.copytree(FIXTURES / "runs" / run_id, runs / run_id)
    shutil.copytree(FIXTURES / "runs" / "pharmacist-sd15", runs / "again")
    same = json.loads(run_auditor("compare", "pharmacist-sd15", "again", "--json", "--bootstrap", "200").stdout)
    gender = next(axis for axis in same["axes"] if axis["axis"] == "gender")
    assert gender["delta"] == 0 and gender["delta_ci"] == [0.0, 0.0]  # paired: the same run resampled the same way
    assert all(cf["delta_ci"] == [0.0, 0.0] for cf in gender["counterfactuals"])
    assert any("paired over their shared seeds" in note and "(--ci-seed 0)" in note for note in same["notes"])
    assert same["intervals"] == {
        "resamples": 200, "level": 0.95, "method": "percentile", "seed": 0, "fully_paired": True, "paired_seeds": 6,
        "paired_by": "seed",
    }  # fmt: skip

    # sd21's third axis is another (setting, not geography): asked as sd15's is, the runs ask the same questions
    # (runs asking other questions are not comparable)
    sd15, sd21 = (json.loads((runs / run / "record.json").read_text()) for run in ("pharmacist-sd15", "pharmacist-sd21"))
    sd21["plan"]["axes"][2]["question"] = sd15["plan"]["axes"][2]["question"]
    (runs / "pharmacist-sd21" / "record.json").write_text(json.dumps(sd21))
    other = json.loads(run_auditor("compare", "pharmacist-sd15", "pharmacist-sd21", "--json").stdout)
    # Seeds 0-5 against 0-3: the 4 shared seeds take one draw, A's seeds 4 and 5 one of their own.
    assert any("paired over the 4 seeds they share, the other seeds (2 of run A) independently" in note
               for note in other["notes"])  # fmt: skip
    assert other["intervals"]["fully_paired"] is False and other["intervals"]["paired_seeds"] == 4  # not fully paired
    _fixture_with_seeds(runs, "one-apart", lambda seed: seed + 100 if seed == 5 else seed)
    one_apart = json.loads((runs / "one-apart" / "record.json").read_text())
    one_apart["config"]["seeds"] = [0, 1, 2, 3, 4, 105]
    (runs / "one-apart" / "record.json").write_text(json.dumps(one_apart))
    apart = json.loads(run_auditor("compare", "pharmacist-sd15", "one-apart", "--json").stdout)
    # Seed 5 against seed 105: each alone in its stratum would never vary, so each run is resampled alone.
    assert any("independently (pairing over the 5 seeds they share would leave a single seed" in note
               for note in apart["notes"])  # fmt: skip
    assert apart["intervals"]["fully_paired"] is False and apart["intervals"]["paired_seeds"] == 0
    shared = [cf for axis in other["axes"] for cf in axis["counterfactuals"] if cf["only_in"] is None]
    assert shared and all(cf["delta"] is None or cf["delta_ci"][0] <= cf["delta_ci"][1] for cf in shared)
    off = json.loads(run_auditor("compare", "pharmacist-sd15", "pharmacist-sd21", "--json", "--bootstrap", "0").stdout)
    assert all(axis["delta_ci"] is None for axis in off["axes"]) and "no change is claimed" in off["notes"][-1]
    assert off["intervals"] is None


def _write_run(runs: Path, run_id: str, data: dict) -> None:
    """A copy of the fixture run's folder under ``run_id`` with ``data`` as its record."""
    shutil.copytree(FIXTURES / "runs" / "pharmacist-sd15", runs / run_id)
    (runs / run_id / "record.json").write_text(json.dumps(data | {"run_id": run_id}))


def _fixture_with_seeds(runs: Path, run_id: str, seed_of: Callable[[int | None], int | None]) -> None:
    """The fixture run under ``run_id`` with each image's seed mapped by ``seed_of``."""
    data = json.loads((FIXTURES / "runs" / "pharmacist-sd15" / "record.json").read_text())
    for prompt_set in data["prompt_sets"]:
        for image in prompt_set["images"]:
            image["seed"] = seed_of(image["seed"])
    _write_run(runs, run_id, data)


def _unseeded_copy(runs: Path, run_id: str, seeds: list[int]) -> None:
    """The fixture run as a backend that takes no seed records it (an images API, a folder): its images keep no
    seed, whatever ``--seed`` (``seeds``) said."""
    _fixture_with_seeds(runs, run_id, lambda seed: None)
    data = json.loads((runs / run_id / "record.json").read_text())
    data["config"]["seeds"] = seeds
    (runs / run_id / "record.json").write_text(json.dumps(data))


def test_compare_pairs_runs_without_seeds_by_image_position_and_never_with_a_seeded_run(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES / "runs" / "pharmacist-sd15", runs / "seeded")
    _unseeded_copy(runs, "api", [0, 1, 2, 3, 4, 5])
    _unseeded_copy(runs, "api-reseeded", [11, 10, 9, 8, 7, 6])  # --seed ignored by the backend: the same images

    same = json.loads(run_auditor("compare", "api", "api-reseeded", "--json", "--bootstrap", "200").stdout)
    cis = [cf["delta_ci"] for axis in same["axes"] for cf in axis["counterfactuals"]]
    assert all(ci in (None, [0.0, 0.0]) for ci in cis + [axis["delta_ci"] for axis in same["axes"]])
    assert cis.count([0.0, 0.0]) >= 2  # the same images: every change that has an interval is [0, 0]
    assert any("paired over their shared image positions (their backends take no seed)" in n for n in same["notes"])
    assert same["intervals"]["paired_by"] == "image position" and same["intervals"]["paired_seeds"] == 6

    mixed = json.loads(run_auditor("compare", "seeded", "api", "--json", "--bootstrap", "200").stdout)
    assert any("independently (run B's backend takes no seed" in note for note in mixed["notes"])
    assert mixed["intervals"]["fully_paired"] is False and mixed["intervals"]["paired_seeds"] == 0
    assert mixed["intervals"]["paired_by"] is None  # nothing pairs a seeded run's images with an unseeded one's
    assert mixed["a"]["initial_labels"] == [f"seed {i}" for i in range(6)]
    assert mixed["b"]["initial_labels"] == [f"image {i}" for i in range(6)]


def test_the_compare_page_lines_up_images_made_alike_and_only_those(tmp_path):
    runs, page = tmp_path / "runs", tmp_path / "compare.html"

    def grid(a: str, b: str) -> str:
        assert run_auditor("compare", a, b, "--html", str(page)).returncode == 0
        return page.read_text().split("<h2>Initial images</h2>")[1].split("<h2>")[0]

    shutil.copytree(FIXTURES / "runs" / "pharmacist-sd15", runs / "seeded")  # seeds 0-5
    _fixture_with_seeds(runs, "shifted", lambda seed: seed + 1)
    lined_up = grid("seeded", "shifted")  # a column per seed of either run, A's first, each row blank where it lacks one
    assert [f'<th scope="col">seed {s}</th>' in lined_up for s in range(7)] == [True] * 7
    assert lined_up.count("<td></td>") == 2 and lined_up.count("<img ") == 12
    _unseeded_copy(runs, "api", [0, 1, 2, 3, 4, 5])
    _unseeded_copy(runs, "api-reseeded", [11, 10, 9, 8, 7, 6])
    assert '<th scope="col">image 0</th>' in grid("api", "api-reseeded")  # no seeds: by position
    _fixture_with_seeds(runs, "far", lambda seed: seed + 100)
    for other in ("api", "far"):  # an unseeded run, or one that shares no seed: two plain rows
        apart = grid("seeded", other)
        assert "share no seed, so their images are not lined up" in apart and 'scope="col"' not in apart
    _fixture_with_seeds(runs, "repeated", lambda seed: min(seed, 1))  # an old record could repeat a seed: 0 1 1 1 1 1
    shutil.copytree(FIXTURES / "runs" / "pharmacist-sd21", runs / "sd21")
    both = grid("repeated", "sd21")
    assert '<th scope="col">seed 1 (#5)</th>' in both and both.count("<img ") == 6 + 4  # no image dropped


def test_a_run_without_seeds_reports_image_positions(tmp_path):
    _unseeded_copy(tmp_path / "runs", "api", [0, 1, 2, 3, 4, 5])
    unseeded = load_record(tmp_path / "runs" / "api" / "record.json")
    report = build_view(unseeded)
    assert report.seeding.startswith("no seeds (the backend takes none") and not report.seeded
    assert report.seeds == "none"  # as --json has it; a seeded run's reads "0-5 (6 seeds)"
    assert build_view(load_record(FIXTURES / "runs" / "pharmacist-sd15" / "record.json")).seeds == "0-5 (6 seeds)"
    assert "resamples of the 6 image positions" in report.uncertainty
    scored = run_auditor("score", "api", env={"AUDITOR_RUNS_DIR": str(tmp_path / "runs"), "COLUMNS": "200"})
    assert scored.returncode == 0, scored.stderr
    assert "resamples of the 6 image positions" in scored.stdout and "6 seeds" not in scored.stdout  # as the report
    page = write_html_report(unseeded, tmp_path / "runs" / "api").read_text()
    assert "seed None" not in page and '<th class="num">image 0</th>' in page and "column i holds" in page
    assert "uses the same seed" not in page and "separate draws" in page


def test_paired_draws_share_one_draw_over_the_shared_seeds_and_keep_each_runs_size():
    from auditor.metrics.bootstrap import resample_weights
    from auditor.scoring.comparison import paired_draws

    same = paired_draws([0, 1, 2, 3], [0, 1, 2, 3], 50, 7)
    assert np.array_equal(same.a, resample_weights(4, 50, 7)) and np.array_equal(same.b, same.a)
    assert (same.shared, same.unshared, same.common) == (4, (0, 0), 4)

    reordered = paired_draws([0, 1, 2, 3], [3, 2, 1, 0], 50, 7)  # a seed's column follows the seed, not its position
    assert np.array_equal(reordered.b, reordered.a[:, ::-1])

    nested = paired_draws(list(range(6)), [4, 0, 2], 200, 1)  # B drew 3 of A's 6 seeds
    assert np.array_equal(nested.b, nested.a[:, [4, 0, 2]])
    assert (nested.a.sum(axis=1) == 6).all() and (nested.b.sum(axis=1) == 3).all()  # each run keeps its size
    assert (nested.a[:, [0, 2, 4]].sum(axis=1) == 3).all()  # the shared stratum is drawn as one
    assert (nested.shared, nested.unshared, nested.common) == (3, (3, 0), 3)

    apart = paired_draws([0, 1, 2], [10, 11], 200, 1)  # no seed shared: two draws of their own
    assert np.array_equal(apart.a, resample_weights(3, 200, 2)) and np.array_equal(apart.b, resample_weights(2, 200, 3))
    assert (apart.shared, apart.unshared, apart.common) == (0, (3, 2), 0)

    # One seed alone in a stratum would be drawn exactly once in every resample (its share of the variance lost):
    # the runs are resampled apart instead, each with all of its seeds.
    for seeds_b, common in (([0, 1, 2], 3), ([0, 9], 1)):  # A's seed 3 alone; the shared seed 0 alone
        lone = paired_draws([0, 1, 2, 3], seeds_b, 200, 1)
        assert (lone.shared, lone.unshared, lone.common) == (0, (4, len(seeds_b)), common)
        assert np.array_equal(lone.a, resample_weights(4, 200, 2))
        assert np.array_equal(lone.b, resample_weights(len(seeds_b), 200, 3))

    # A seed repeated (records from before repeats were refused) pairs occurrence by occurrence.
    repeated = paired_draws([0, 0, 1, 1], [0, 1, 0, 1], 100, 3)
    assert np.array_equal(repeated.b, repeated.a[:, [0, 2, 1, 3]]) and (repeated.a.sum(axis=1) == 4).all()
    assert (repeated.shared, repeated.unshared) == (4, (0, 0))


def test_a_run_without_intervals_points_to_what_prints_them_and_says_it_stores_nothing(tmp_path):
    run_dir = tmp_path / "runs" / "plain"
    shutil.copytree(FIXTURES / "runs" / "pharmacist-sd15", run_dir)
    record = load_record(run_dir / "record.json")
    record = record.model_copy(update={"scores": _rescored(record, bootstrap=0)})
    (run_dir / "record.json").write_text(record.model_dump_json())
    hint = build_view(record).uncertainty
    assert hint.startswith("no intervals (`auditor score RUN` prints them; it does not store them in the run)")

    scored = run_auditor("score", "plain", "--json", env={"AUDITOR_RUNS_DIR": str(tmp_path / "runs")})
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["intervals"] is not None  # printed...
    assert load_record(run_dir / "record.json").scores.intervals is None  # ...and not stored


def test_the_report_json_has_every_interval_field_the_readme_lists_as_score_json_has_them():
    from auditor.reporting.scores import scores_summary

    record = load_record(FIXTURES / "runs" / "pharmacist-sd15" / "record.json")
    record = record.model_copy(update={"scores": _rescored(record, bootstrap=200)})  # the fixture has no bav_mad_ci
    scored = scores_summary(record.scores, source="run", kind="record", prompt=None)["axes"]
    for axis in report_json(record)["axes"]:
        score = scored[axis["name"]]
        for field in ("cas_ci", "bav_ci", "bav_mad_ci", "relative_bav_ci", "lean_ci", "spread", "ranks_first"):
            assert field in axis or field in axis["counterfactuals"][0], field
        assert axis["spread"] == score["spread"] and axis["spread"]["ci"]["low"] is not None
        assert axis["bav_mad_ci"] is not None and list(axis["bav_mad_ci"]) == score["bav_mad_ci"]


def _first_images(record, images: int):
    """``record`` cut to its first ``images`` images per prompt set, as an ``--images N`` run records it."""
    data = record.model_dump(mode="json")
    data["config"].update(images_per_prompt=images, seeds=data["config"]["seeds"][:images])
    for prompt_set in data["prompt_sets"]:
        prompt_set["images"] = prompt_set["images"][:images]
    data["answers"] = {pid: answers[:images] for pid, answers in data["answers"].items()}
    return type(record).model_validate(data)


@pytest.mark.parametrize(
    ("images", "why"),
    [
        (1, "one image per prompt set: no other seed to resample"),
        # a resample of 3 seeds draws one of them 3 times 1 time in 9: the 95% interval's ends would be one seed's
        (3, "3 images per prompt set, fewer than the 4 an interval needs: a resample draws one seed alone 1 time in 9"),
    ],
)
def test_too_few_images_per_set_get_no_interval_and_no_claim(tmp_path, images, why):
    record = _first_images(load_record(FIXTURES / "runs" / "pharmacist-sd15" / "record.json"), images)
    scores = score_run(record)
    assert scores.intervals is None and any(warning.startswith(why) for warning in scores.warnings)
    assert all(axis.bav_ci is None and axis.spread is None and axis.lean_ci is None for axis in scores.axes)
    view = build_view(record.model_copy(update={"scores": scores}))
    assert "no ranking is claimed" in view.headline
    assert all("no difference is claimed" in axis.finding or "nothing to compare" in axis.finding for axis in view.axes)
    assert view.uncertainty.startswith(f"no intervals ({why})")

    runs = tmp_path / "runs"
    for name in ("one", "again"):
        (runs / name).mkdir(parents=True)
        (runs / name / "record.json").write_text(record.model_copy(update={"scores": scores}).model_dump_json())
    compared = run_auditor("compare", "one", "again", "--json", env={"AUDITOR_RUNS_DIR": str(runs)})
    assert compared.returncode == 0, compared.stderr
    data = json.loads(compared.stdout)
    assert data["intervals"] is None and all(axis["delta_ci"] is None for axis in data["axes"])
    assert any(f"run A and B: {why}" in note for note in data["notes"])
