"""Reports from stored run records: terminal (80 columns), JSON, HTML, escaping, failed runs, compare."""

from __future__ import annotations

import io
import json
import math
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from auditor.core.store import write_model
from auditor.records import (
    INITIAL_PROMPT_ID,
    ChatMessage,
    Difference,
    GenerationSettings,
    Interval,
    RunError,
    RunRecord,
    load_record,
)
from auditor.reporting import render_terminal, report_json, write_html_report
from auditor.reporting.compare import (
    compare_records,
    render_comparison_terminal,
    write_comparison_html,
)
from auditor.reporting.html import Bar, bar_chart
from auditor.reporting.prompt_audit import build_view
from auditor.reporting.sentences import axis_finding, error_line, lean_sentence, unfinished_note, unstated_errors
from auditor.reporting.wording import describe_seeds, prompt_label, prompt_segments
from auditor.scoring.intervals import score_run
from auditor.scoring.tibet import record_concepts
from tests.clitools import assert_fits, run_auditor
from tests.fixtures.build_fixtures import build_all

FIXTURES = Path(__file__).parent / "fixtures" / "runs"
HOSTILE = "<script>alert(1)</script> [bold red]loud[/bold red] :smile:"


def copy_fixture(run_id: str, tmp_path: Path) -> Path:
    """A writable copy of a stored fixture run folder."""
    target = tmp_path / "runs" / run_id
    shutil.copytree(FIXTURES / run_id, target)
    return target


def fixture(run_id: str = "pharmacist-sd15") -> RunRecord:
    return load_record(FIXTURES / run_id / "record.json")


def hostile_record(record: RunRecord) -> RunRecord:
    """``record`` with markup and a script in the prompt, a counterfactual, VQA text, concepts and the LLM reply."""
    data = record.model_dump(mode="json")
    data["config"]["prompt"] = data["plan"]["prompt"] = f"a photo of a pharmacist {HOSTILE}"
    gender = data["scores"]["axes"][[a["axis"] for a in data["scores"]["axes"]].index("gender")]
    gender["counterfactuals"][1]["prompt"] = f"a photo of a female pharmacist {HOSTILE}"
    data["plan"]["axes"][0]["counterfactuals"][1] = gender["counterfactuals"][1]["prompt"]
    data["prompt_sets"][0]["prompt"] = data["config"]["prompt"]
    data["answers"]["initial"][0]["answers"]["gender"] = HOSTILE
    data["answers"]["initial"][0]["caption"] = HOSTILE
    data["scores"]["top_concepts"]["initial"][0]["concept"] = HOSTILE
    data["plan"]["transcript"].append(ChatMessage(role="assistant", content=HOSTILE).model_dump())
    data["errors"] = [RunError(stage="report", type="ValueError", message=HOSTILE).model_dump()]
    return RunRecord.model_validate(data)


def failed_record(record: RunRecord) -> RunRecord:
    """``record`` as a run that stopped while perceiving: plan and some images, no answers or scores."""
    return record.model_copy(
        update={
            "status": "failed",
            "scores": None,
            "concepts": {},
            "answers": {},
            "prompt_sets": record.prompt_sets[:2],
            "errors": [RunError(stage="perceive", type="BackendError", message="CUDA out of memory")],
        }
    )


def flagged_record(record: RunRecord, *prompt_ids: str) -> RunRecord:
    """``record`` rescored from its answers after the safety checker blacked out every image of ``prompt_ids``."""
    data = record.model_dump(mode="json")
    for prompt_set in data["prompt_sets"]:
        if prompt_set["prompt_id"] in prompt_ids:
            for image in prompt_set["images"]:
                image["flagged_nsfw"] = True
    flagged = RunRecord.model_validate(data)
    return flagged.model_copy(update={"concepts": record_concepts(flagged), "scores": score_run(flagged)})


def terminal_text(record: RunRecord, width: int = 80) -> str:
    console = Console(width=width, file=io.StringIO(), force_terminal=True, color_system="truecolor", record=True)
    render_terminal(record, None, console)
    return console.export_text(styles=False)


# --------------------------------------------------------------------------- the fixtures


def test_stored_fixtures_match_their_builder():
    """The committed run folders load as records and are what the builder script makes (fields added
    later with defaults do not make them stale; rerun ``python -m tests.fixtures.build_fixtures`` anyway)."""
    for run_id, (record, files) in build_all().items():
        folder = FIXTURES / run_id
        assert load_record(folder / "record.json") == record, f"{run_id} is stale: rerun the builder"
        assert {p.relative_to(folder).as_posix() for p in folder.rglob("*.png")} == set(files)
        for relative, data in files.items():
            assert (folder / relative).read_bytes() == data


# --------------------------------------------------------------------------- the report view


def test_prompt_segments_mark_only_the_changed_words():
    segments = prompt_segments("a photo of a pharmacist", "A photo of a female pharmacist in Asia.")
    assert "".join(s.text for s in segments) == "A photo of a female pharmacist in Asia."
    assert [s.text for s in segments if s.changed] == ["female", "in Asia."]
    assert prompt_label("a cat", "a cat") == "a cat"


def test_a_label_leaves_out_the_article_that_only_follows_the_added_word():
    initial = "a photo of a pharmacist"
    assert prompt_label(initial, "a photo of an elderly pharmacist") == "elderly"
    assert prompt_label("an image of an engineer", "an image of a young engineer") == "young"
    assert prompt_label(initial, "a photo of the pharmacist") == "the"  # another article is a change
    assert prompt_label("a photo of an pharmacist", "a photo of a pharmacist") == "a"  # the article alone changed
    segments = prompt_segments(initial, "A photo of an elderly pharmacist")
    assert [s.text for s in segments if s.changed] == ["elderly"]


def test_describe_seeds():
    assert describe_seeds(list(range(48))) == "0-47 (48 seeds)"
    assert describe_seeds([3, 1]) == "3, 1"
    assert describe_seeds(list(range(0, 40, 2))).endswith("… (20 seeds)")
    assert describe_seeds([]) == "none recorded"


def test_findings_claim_a_difference_only_where_its_interval_excludes_zero():
    record = fixture()
    gender = next(a for a in record.scores.axes if a.axis == "gender")
    male, female = gender.counterfactuals
    spread = gender.spread
    assert spread.ci.low > 0
    assert axis_finding(record.config.prompt, "gender", gender) == (
        f"Images for 'a photo of a pharmacist' resemble 'a photo of a male pharmacist' (CAS {male.cas:.2f}) "
        f"more than 'a photo of a female pharmacist' ({female.cas:.2f}; difference {spread.value:+.2f}, "
        f"percentile interval [{spread.ci.low:+.2f}, {spread.ci.high:+.2f}])."
    )
    unclear = gender.model_copy(update={"spread": spread.model_copy(update={"ci": Interval(
        low=-0.01, high=0.05, method="percentile", defined=1.0)})})  # fmt: skip
    assert axis_finding("p", "gender", unclear) == (
        f"No clear difference between 'a photo of a male pharmacist' ({male.cas:.2f}) and 'a photo of a female "
        f"pharmacist' ({female.cas:.2f}): difference {spread.value:+.2f}, percentile interval [-0.01, +0.05]."
    )
    unmeasured = gender.model_copy(update={"spread": None})
    finding = axis_finding("p", "gender", unmeasured)
    assert "no interval was computed, so no difference is claimed" in finding and "resemble" not in finding


def test_a_small_difference_is_never_written_as_zero_beside_a_claim():
    gender = next(a for a in fixture().scores.axes if a.axis == "gender")
    tiny = Interval(low=0.001, high=0.008, method="percentile", defined=1.0)
    small = gender.model_copy(update={
        "spread": gender.spread.model_copy(update={"value": 0.004, "ci": tiny}), "lean": 0.004, "lean_ci": tiny,
    })  # fmt: skip
    assert axis_finding("p", "gender", small).endswith("(0.74; difference +0.004, percentile interval [+0.001, +0.008]).")
    assert lean_sentence(small) == "+0.004 [+0.001, +0.008]: the images look more like the male version"
    crossing = Interval(low=-0.003, high=0.1, method="percentile", defined=1.0)
    assert lean_sentence(small.model_copy(update={"lean": 0.05, "lean_ci": crossing})) == (
        "+0.050 [-0.003, +0.100]: no clear lean towards either version"
    )


def test_three_counterfactuals_claim_only_the_pair_their_interval_tests_and_name_ties():
    age = next(a for a in fixture().scores.axes if a.axis == "age")
    young, middle, old = (cf.model_copy(update={"cas": cas}) for cf, cas in zip(age.counterfactuals, (0.8, 0.5, 0.5)))
    spread = Difference(first=young.prompt_id, second=old.prompt_id, value=0.3, ci=Interval(
        low=0.15, high=0.45, method="percentile", defined=1.0))  # fmt: skip
    finding = axis_finding("p", "age", age.model_copy(update={"counterfactuals": [young, middle, old], "spread": spread}))
    assert finding == (
        f"Images for 'p' resemble '{young.prompt}' (CAS 0.80, the highest) more than '{old.prompt}' (0.50, the lowest "
        f"with '{middle.prompt}') of the 3 age counterfactuals (difference +0.30, percentile interval [+0.15, +0.45])."
    )


def test_three_counterfactuals_without_a_clear_difference_name_ties_and_no_highest_when_all_tie():
    age = next(a for a in fixture().scores.axes if a.axis == "age")
    unclear = Interval(low=-0.1, high=0.2, method="percentile", defined=1.0)

    def finding(*cas: float) -> str:
        young, middle, old = (cf.model_copy(update={"cas": c}) for cf, c in zip(age.counterfactuals, cas))
        spread = Difference(first=young.prompt_id, second=old.prompt_id, value=cas[0] - cas[2], ci=unclear)
        scored = age.model_copy(update={"counterfactuals": [young, middle, old], "spread": spread})
        return axis_finding("p", "age", scored)

    young, middle, old = (cf.prompt for cf in age.counterfactuals)
    assert finding(0.8, 0.5, 0.5) == (
        f"No clear difference among the 3 age counterfactuals: between '{young}' (0.80, the highest) and '{old}' "
        f"(0.50, the lowest with '{middle}'), difference +0.30, percentile interval [-0.10, +0.20]."
    )
    assert finding(0.78, 0.78, 0.78) == (
        "No clear difference among the 3 age counterfactuals: all have CAS 0.78 (difference +0.00, percentile "
        "interval [-0.10, +0.20])."
    )  # not a "highest and lowest" of equal values


def test_leans_most_only_when_the_top_bav_interval_is_above_the_others():
    headline = build_view(fixture("pharmacist-sd21")).headline  # gender and age have overlapping intervals
    assert headline.startswith("No single axis leans most: the BAV intervals of gender, age overlap")
    assert build_view(fixture()).headline.startswith("The axis that leans most is age (BAV 0.0294 [0.0147, 0.0441])")


def test_the_intersectionality_section_says_of_axis_a_what_the_headline_says_of_the_top_axis():
    def said_of_a(record: RunRecord) -> str:
        flat = " ".join(terminal_text(record, 100).split())
        return flat[flat.index("A = ") : flat.index(". A = ")]

    assert said_of_a(fixture()).startswith("A = the axis that leans most;")
    tied = said_of_a(fixture("pharmacist-sd21"))  # the headline: no single axis leans most
    assert "leans most;" not in tied and "interval overlaps that of age: not clearly the one that leans most" in tied
    data = fixture().model_dump(mode="json")
    for axis in data["scores"]["axes"]:
        axis.update(bav=0.0, bav_ci=None, relative_bav=0.0, relative_bav_ci=None)
    flat = RunRecord.model_validate(data)
    assert build_view(flat).headline.startswith("No axis leans")
    assert "no axis leans: every BAV is 0" in said_of_a(flat)


def test_view_ranks_axes_and_sorts_counterfactuals():
    record = fixture()
    view = build_view(record)
    bavs = {a.axis: a.relative_bav for a in record.scores.axes}
    assert [a.name for a in view.axes] == sorted(bavs, key=lambda name: -bavs[name])
    assert [a.rank for a in view.axes] == [1, 2, 3]
    for axis in view.axes:
        cas = [cf.cas for cf in axis.counterfactuals]
        assert cas == sorted(cas)
        assert [c.prompt_id for c in axis.overall_concepts][0] == "initial"
    gender = next(a for a in view.axes if a.name == "gender")
    assert gender.association.toward == "a photo of a male pharmacist"
    assert gender.lean == pytest.approx(gender.counterfactuals[1].cas - gender.counterfactuals[0].cas, abs=1e-4)
    assert {m.key for m in view.metrics} >= {"cas", "bav", "relative_bav", "embedding_similarity", "p_value"}


def test_intersection_tables_keep_the_prompt_sets_names_at_80_columns_when_answers_are_long():
    """Four long answers wrap in their column instead of pushing the column that names the prompt set out."""
    data = fixture().model_dump(mode="json")
    long = ["button-down shirt", "white lab coat", "business casual attire", "stethoscope necklace"]
    for view in data["scores"]["intersectionality"]:
        for concepts in [view["initial"], *view["counterfactuals"].values()]:
            concepts[:] = [{"concept": concept, "frequency": 0.25} for concept in long]
    text = terminal_text(RunRecord.model_validate(data), 80)
    assert_fits(text, 80)
    table = text[text.index("A = age, B = gender") :]
    for label in ("initial", "young", "middle-aged", "old"):
        assert f"\n  {label} " in table and "button-down shirt 0.25" in table


def test_an_undefined_effect_size_is_never_called_large():
    data = fixture().model_dump(mode="json")
    gender = next(a for a in data["scores"]["axes"] if a["axis"] == "gender")
    gender["association"].update(effect_size=None, effect_label="large")  # as records said before "undefined"
    record = RunRecord.model_validate(data)
    sentence = next(a for a in build_view(record).axes if a.name == "gender").association.sentence
    assert "undefined" in sentence and "large" not in sentence
    assert "lean towards 'a photo" not in sentence  # no direction claimed for an effect of no size
    assert "(large)" not in " ".join(terminal_text(record, 100).split())


def test_the_header_says_when_a_person_edited_the_plan():
    data = fixture().model_dump(mode="json")
    assert "edited" not in " ".join(terminal_text(fixture(), 100).split()[:40])
    data["plan"]["edited"] = True
    text = " ".join(terminal_text(RunRecord.model_validate(data), 100).split())
    assert "planner offline (plan edited by a person)" in text


def test_tied_axes_draw_equal_bars_whatever_the_floating_point_noise():
    from auditor.reporting.terminal import _bar

    def drawn(value: float) -> str:
        console = Console(width=40, file=io.StringIO(), record=True)
        console.print(_bar(value, "red"))
        return console.export_text()

    assert drawn(0.9999999999999998) == drawn(1.0)


def test_a_small_effect_size_is_not_written_as_zero_in_the_axis_sentence():
    data = fixture().model_dump(mode="json")
    gender = next(a for a in data["scores"]["axes"] if a["axis"] == "gender")
    gender["association"].update(effect_size=-0.00264, effect_label="negligible")
    view = build_view(RunRecord.model_validate(data))
    sentence = next(a for a in view.axes if a.name == "gender").association.sentence
    assert "d = -0.003 (negligible)" in sentence and "-0.00 " not in sentence


def test_a_lean_whose_interval_over_seeds_reaches_0_says_other_seeds_may_not_show_it():
    """The permutation p asks about these images; S's interval, about other seeds' images: a lean p claims while the
    interval reaches 0 is said with that caveat, one whose interval excludes 0 without it."""
    from auditor.records import Interval

    data = fixture().model_dump(mode="json")
    gender = next(a for a in data["scores"]["axes"] if a["axis"] == "gender")
    association = gender["association"]

    def sentence(low: float, high: float) -> str:
        association["association_ci"] = Interval(low=low, high=high, method="percentile", defined=1.0).model_dump()
        view = build_view(RunRecord.model_validate(data))
        return next(a for a in view.axes if a.name == "gender").association.sentence

    assert association["association"] > 0 and "lean towards 'a photo" in sentence(0.001, 0.1)
    assert "reaches 0" not in sentence(0.001, 0.1)
    caveat = " But S's interval over seeds reaches 0: images of other seeds may not lean so."
    assert sentence(-0.001, 0.1).endswith(caveat)


# --------------------------------------------------------------------------- terminal and JSON


def test_terminal_report_fits_80_columns_and_says_what_it_found():
    record = fixture()
    text = terminal_text(record, 80)
    assert_fits(text, 80)
    flat = " ".join(text.split())
    view = build_view(record)
    for axis in view.axes:
        assert " ".join(axis.finding.split()) in flat
    assert flat.index("1. age (societal)") < flat.index("2. geography (incidental)") < flat.index("3. gender (soc")
    gender = flat[flat.index("3. gender (societal)") :]
    gender = gender[gender.index("CAS per counterfactual, lowest first") :]
    assert gender.index("a photo of a female pharmacist") < gender.index("a photo of a male pharmacist")
    assert "How to read these numbers" in flat and "High:" in flat
    assert "T2IAT" in flat and "d = 0.93 (large)" in flat
    assert "█" in text  # bars are drawn
    # the CAS table's narrow "emb." column is named under each table that has it
    assert flat.count("emb.: Mean cosine similarity of the image embeddings") == len(view.axes)


def test_terminal_report_wraps_long_prompts_instead_of_cutting_them():
    record = fixture()
    long = "a photo of a pharmacist " + " ".join(f"word{i}" for i in range(40)) + " finalword"
    data = record.model_dump(mode="json")
    data["scores"]["axes"][0]["counterfactuals"][0]["prompt"] = long
    for width in (80, 60):
        text = terminal_text(RunRecord.model_validate(data), width)
        assert_fits(text, width)
        assert "finalword" in text and "…" not in text.replace("… (", "")


def test_json_report_has_the_terminal_content():
    record = fixture()
    data = report_json(record)
    json.dumps(data)  # plain data only
    assert [a["name"] for a in data["axes"]] == [a.name for a in build_view(record).axes]
    flat = " ".join(terminal_text(record).split())
    assert all(axis["finding"] in flat for axis in data["axes"])
    assert data["metrics"]["cas"]["explanation"].startswith("How much the concepts")
    assert data["metrics"]["bav"]["lower_is_better"] is True
    assert data["initial_concepts"][0] == {"concept": "young", "frequency": 2.0}


def test_report_command_terminal_json_and_html(tmp_path):
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    human = run_auditor("report", "pharmacist-sd15", env={"COLUMNS": "80"}, process=True)
    assert human.returncode == 0, human.stderr
    assert "\x1b[" not in human.stdout
    assert_fits(human.stdout, 80)
    assert "Which axes lean most" in human.stdout
    machine = run_auditor("report", str(run_dir), "--json", process=True)
    assert machine.returncode == 0, machine.stderr
    assert "\x1b[" not in machine.stdout
    shown = json.loads(machine.stdout)
    assert shown == json.loads(json.dumps(report_json(load_record(run_dir / "record.json"), run_dir)))
    # where the run is, first, as `auditor prompt --json` and every other study's JSON say it
    assert list(shown)[:2] == ["run_dir", "report_html"] and shown["run_dir"] == str(run_dir.resolve())
    page = run_auditor("report", "pharmacist-sd15", "--html", "--runs-dir", str(tmp_path / "runs"))
    assert page.returncode == 0, page.stderr
    assert Path(page.stdout.strip()) == run_dir / "report.html"
    assert (run_dir / "report.html").stat().st_size > 10_000
    missing = run_auditor("report", "no-such-run", process=True)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.startswith("error: no run 'no-such-run'")


# --------------------------------------------------------------------------- HTML


def test_the_page_names_what_planned_the_axes(tmp_path):
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    record = load_record(run_dir / "record.json")

    def page(**config) -> str:
        changed = record.model_copy(update={"config": record.config.model_copy(update=config)})
        return write_html_report(changed, run_dir).read_text(encoding="utf-8")

    assert "auditor's offline planner (WordNet and its axis library; no LLM) listed" in page(llm="offline")
    for llm in ("offline", "openai:gpt-4o-mini"):  # --axes asks no LLM, whichever the run names
        assert "auditor's axis library (for the axes given with <code>--axes</code>; no LLM) listed" in page(
            llm=llm, axes=["age"]
        )
    assert "An LLM (<code>openai:gpt-4o-mini</code>) listed" in page(llm="openai:gpt-4o-mini")


def test_an_axis_shows_its_counterfactuals_in_one_order_in_table_images_and_concept_charts():
    """Lowest CAS first everywhere in an axis's section: a reader matching images to concept charts pairs the
    right sets (the charts followed the plan's order)."""
    for axis in build_view(fixture()).axes:
        order = [cf.prompt_id for cf in axis.counterfactuals]
        cas = [cf.cas for cf in axis.counterfactuals if cf.cas is not None]
        assert cas == sorted(cas)
        for columns in (axis.overall_concepts, axis.aligned_concepts):
            assert [column.prompt_id for column in columns] == [INITIAL_PROMPT_ID, *order]


def test_a_bidirectional_control_in_an_llms_text_is_shown_on_the_page_not_obeyed(tmp_path):
    """U+202E in a counterfactual the LLM wrote (or in a VQA answer) would reverse how the rest of its line reads on
    the page, unseen: every page writes such controls as their code points, and keeps right-to-left text as it is."""
    from auditor.reporting.html import template_environment

    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    record = load_record(run_dir / "record.json")
    axis, written = record.plan.axes[0], record.prompt_sets[1]
    assert written.prompt == axis.counterfactuals[0]
    written.prompt = axis.counterfactuals[0] = written.prompt + " \u202eesruN"
    html = write_html_report(record, run_dir).read_text(encoding="utf-8")
    assert "\u202e" not in html and "[U+202E]esruN" in html
    environment = template_environment()
    assert environment.from_string("{{ text }}").render(text="\u05e9\u05dc\u05d5\u05dd \u2067x\u2069") == (
        "\u05e9\u05dc\u05d5\u05dd [U+2067]x[U+2069]"
    )


def test_html_report_is_self_contained(tmp_path):
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    record = load_record(run_dir / "record.json")
    path = write_html_report(record, run_dir)
    assert path == run_dir / "report.html"
    html = path.read_text(encoding="utf-8")
    assert "<script" not in html.lower() and "<link" not in html.lower() and "@import" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert not re.search(r"url\(", html)
    sources = set(re.findall(r'<img src="([^"]+)"', html))
    assert sources == {image.file for s in record.prompt_sets for image in s.images}
    assert all((run_dir / src).is_file() for src in sources)
    for axis in build_view(record).axes:
        assert axis.finding.replace("'", "&#39;") in html
    assert html.count("<svg") >= 1 + 3 * 3  # BAV, and per axis CAS plus concept charts
    assert "stable-diffusion-v1-5/stable-diffusion-v1-5" in html and "0-5 (6 seeds)" in html
    assert "Intersectionality" in html and "T2IAT" in html and "0.93" in html
    assert "not the noise. \nA vision-language model answered" in html  # a sentence ending in a block keeps its space
    # settings read as words, not as Python's reprs
    assert "<td>compile</td><td>no</td>" in html and "<td>steps</td><td>default</td>" in html
    assert "False" not in html and "None" not in html and "[]" not in html
    assert html.count("A single CAS is biased low at small sizes") == 1  # in the header's uncertainty row alone


def test_html_links_only_images_inside_the_run_folder(tmp_path):
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    data = load_record(run_dir / "record.json").model_dump(mode="json")
    data["prompt_sets"][0]["images"][0]["file"] = "../../secret.png"
    data["prompt_sets"][0]["images"][1]["file"] = "images/initial/gone.png"
    (tmp_path / "elsewhere.png").write_bytes(b"private")
    (run_dir / "images" / "initial" / "linked.png").symlink_to(tmp_path / "elsewhere.png")
    data["prompt_sets"][0]["images"][2]["file"] = "images/initial/linked.png"  # a link out of the folder
    html = write_html_report(RunRecord.model_validate(data), run_dir).read_text(encoding="utf-8")
    assert "secret.png" not in html and "gone.png" not in html and "elsewhere.png" not in html
    assert html.count("outside the run folder") >= 2
    assert "outside the run folder" in html and "file missing" in html


@pytest.mark.parametrize(
    "largest, bound",
    [
        (0.0, 0.01), (5e-324, 0.01), (float("nan"), 0.01), (3e-13, 5e-13), (0.00013, 0.0002), (0.0099, 0.01),
        (0.013, 0.02), (0.021, 0.025), (0.3, 0.5), (1.7, 2.0),
    ],
)
def test_range_chart_bounds_round_up_to_one_two_two_and_a_half_or_five(largest, bound):
    from auditor.reporting.html import _nice_bound

    assert _nice_bound(largest) == pytest.approx(bound)


def test_range_chart_geometry_is_symmetric_around_zero():
    from auditor.reporting.html import Spread, range_chart

    chart = range_chart(
        [
            Spread("a", (-0.1, 0.0, 0.2), 0.05, "a", reference=-0.3),  # largest |value| 0.3: the scale is [-0.5, 0.5]
            Spread("b", None, None, "no image"),
        ],
        title="t",
        axis_label="x",
    )
    left, width = chart.label_width, chart.plot_width

    def x(value: float) -> float:
        return pytest.approx(left + (value + 0.5) / 1.0 * width, abs=0.01)

    a, b = chart.rows
    assert chart.zero == x(0.0) and [t.label for t in chart.ticks] == ["-0.5", "-0.25", "0", "+0.25", "+0.5"]
    assert a.box == (x(-0.1), x(0.2)) and a.median == x(0.0) and a.mean == x(0.05) and a.reference == x(-0.3)
    assert (b.box, b.median, b.mean, b.reference) == (None, None, None, None)

    odd = range_chart([Spread("nan", (float("nan"), 0.0, 0.1), None, "?")], title="t", axis_label="x").rows[0]
    assert odd.box is None and odd.median is not None  # a box needs both ends
    empty = range_chart([], title="t", axis_label="x")
    assert empty.rows == [] and empty.ticks == []  # the template says "nothing recorded" instead


def test_bar_chart_geometry():
    chart = bar_chart(
        [Bar("a", 0.5, "0.50"), Bar("b", 2.0, "2.00"), Bar("a long label " * 4, 0.25, "0.25")],
        title="t",
        axis_label="x",
        scale_max=1.0,
    )
    half, clipped, quarter = chart.rows
    assert half.bar_width == pytest.approx(chart.plot_width / 2)
    assert clipped.bar_width == pytest.approx(chart.plot_width)
    assert quarter.bar_width == pytest.approx(chart.plot_width / 4)
    assert len(quarter.lines) > 1 and quarter.height > half.height
    assert [t.label for t in chart.ticks] == ["0", "0.25", "0.5", "0.75", "1"]


# --------------------------------------------------------------------------- hostile text and failed runs


def test_hostile_text_is_escaped_everywhere(tmp_path):
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    record = hostile_record(load_record(run_dir / "record.json"))
    html = write_html_report(record, run_dir).read_text(encoding="utf-8")
    assert "<script" not in html
    # the prompt, a counterfactual, a VQA answer and caption, a concept, the LLM reply, an error
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 6
    text = terminal_text(record)
    assert HOSTILE in " ".join(text.split())
    assert_fits(text, 80)
    assert HOSTILE in json.dumps(report_json(record), ensure_ascii=False)
    write_model(run_dir / "record.json", record)
    view = compare_records(record, record)
    page = write_comparison_html(view, tmp_path / "compare.html", run_dir, run_dir).read_text(encoding="utf-8")
    assert "<script" not in page and "&lt;script&gt;" in page
    console = Console(width=80, file=io.StringIO(), force_terminal=True, record=True)
    render_comparison_terminal(view, console)
    assert HOSTILE in " ".join(console.export_text(styles=False).split())


def test_escape_sequences_in_text_never_reach_the_terminal(tmp_path):
    """An ESC in a prompt or a VQA answer (an LLM's counterfactual, a caption file) would clear, retitle or hide the
    user's terminal: the consoles write the text without it, and keep their own styling."""
    from auditor.core.console import TextOnlyConsole

    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    data = load_record(run_dir / "record.json").model_dump(mode="json")
    data["config"]["prompt"] = data["plan"]["prompt"] = "a photo of a pharmacist\x1b[8m hidden"
    data["scores"]["top_concepts"]["initial"][0]["concept"] = "male\x1b]0;title\x07\x1b[2J"
    data["scores"]["top_concepts"]["initial"][1]["concept"] = "\u202eelam"  # a right-to-left override
    write_model(run_dir / "record.json", RunRecord.model_validate(data))
    shown = run_auditor("report", str(run_dir), env={"COLUMNS": "100"}, process=True)
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "a photo of a pharmacist[8m hidden" in shown.stdout and "male]0;title[2J" in shown.stdout
    assert "\u202e" not in shown.stdout and "elam" in shown.stdout  # it would reverse the rest of its line

    styled = TextOnlyConsole(file=io.StringIO(), force_terminal=True, width=80, markup=False)
    styled.print(Text("loud\x1b[2J\x9b2J", style="bold"))
    assert styled.file.getvalue() == "\x1b[1mloud[2J2J\x1b[0m\n"


def test_how_a_scored_run_that_did_not_complete_ended_is_said_once(tmp_path):
    """The terminal's notes say it, the page's banner says it; neither twice (the notes once carried it too)."""
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    record = load_record(run_dir / "record.json").model_copy(update={"status": "interrupted"})
    assert record.scores is not None
    text = " ".join(terminal_text(record, 100).split())
    page = write_html_report(record, run_dir).read_text(encoding="utf-8")
    assert text.count("This run was interrupted.") == 1 and page.count("This run was interrupted.") == 1
    assert "This run was interrupted." not in report_json(record)["notes"]  # status_phrase says it


def test_failed_run_still_reports_what_it_did(tmp_path):
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    record = failed_record(load_record(run_dir / "record.json"))
    text = " ".join(terminal_text(record).split())
    assert "This run failed at the perceive stage" in text and "CUDA out of memory" in text
    assert "a photo of a female pharmacist" in text  # the plan is shown
    assert "Prompt sets with images: 2 of 9" in text
    data = report_json(record)
    assert data["scored"] is False and data["axes"] == []
    html = write_html_report(record, run_dir).read_text(encoding="utf-8")
    assert "This run failed at the perceive stage" in html and "perceive: CUDA out of memory" in html
    assert "BackendError" not in text + html  # auditor's own error says it all; its class name reads like a traceback
    assert "This run failed." not in html  # the headline says how it ended: the banner lists the error alone
    assert "Images drawn so far" in html and html.count("<img ") == 2 * 6
    assert "no images (the run stopped before this set was drawn)" in html
    bare = record.model_copy(update={"plan": None, "prompt_sets": []})
    assert "No plan was recorded" in terminal_text(bare)
    assert "No plan was recorded" in write_html_report(bare, run_dir).read_text(encoding="utf-8")


def test_an_error_reads_as_its_stage_and_message_with_the_type_only_for_pythons_own():
    said = [
        error_line(RunError(stage="generate", type="KeyboardInterrupt", message="interrupted by the user")),
        error_line(RunError(stage="perceive", type="BackendError", message="the VQA model failed")),
        error_line(RunError(stage=None, type="IndexError", message="list index out of range")),
        error_line(RunError(stage="score", type="SomeLibraryError", message="")),
    ]
    assert said == [
        "generate: interrupted by the user",
        "perceive: the VQA model failed",
        "run: IndexError: list index out of range",  # a bug: its type helps the report of it
        "score: SomeLibraryError",
    ]


def test_a_banner_lists_only_the_errors_its_note_does_not_state(tmp_path):
    record = failed_record(fixture("pharmacist-sd15"))
    note = unfinished_note(record, tmp_path)
    assert note.startswith("this run did not complete (failed at perceive: CUDA out of memory)")
    assert unstated_errors(record, note) == []
    unplaced = record.model_copy(update={"errors": [RunError(type="BackendError", message="no stage")]})
    assert unstated_errors(unplaced, unfinished_note(unplaced, tmp_path)) == unplaced.errors  # the note has no stage
    assert unstated_errors(record, None) == record.errors  # no note beside them: every error is listed


# --------------------------------------------------------------------------- compare


def test_compare_aligns_axes_and_counterfactuals():
    a, b = fixture("pharmacist-sd15"), fixture("pharmacist-sd21")
    view = compare_records(a, b)
    assert sorted(x.axis for x in view.axes) == ["age", "gender"]
    assert [x.axis for x in view.only_a] == ["geography"] and [x.axis for x in view.only_b] == ["setting"]
    cas_a = {(x.axis, cf.prompt): cf.cas for x in a.scores.axes for cf in x.counterfactuals}
    cas_b = {(x.axis, cf.prompt): cf.cas for x in b.scores.axes for cf in x.counterfactuals}
    for axis in view.axes:
        source_a = next(x for x in a.scores.axes if x.axis == axis.axis)
        source_b = next(x for x in b.scores.axes if x.axis == axis.axis)
        shared = {cf.prompt for cf in source_a.counterfactuals} == {cf.prompt for cf in source_b.counterfactuals}
        # BAV is a variance over the axis's counterfactuals: compared only over the same ones
        assert axis.delta == (pytest.approx(source_b.bav - source_a.bav) if shared else None)
        for cf in axis.counterfactuals:
            key = (axis.axis, cf.prompt)
            assert cf.cas_a == cas_a.get(key) and cf.cas_b == cas_b.get(key)
            if cf.only_in is None:
                assert cf.delta == pytest.approx(cas_b[key] - cas_a[key])
    age = next(x for x in view.axes if x.axis == "age")
    only = {cf.prompt: cf.only_in for cf in age.counterfactuals if cf.only_in}
    assert only == {"a photo of a middle-aged pharmacist": "a", "a photo of a teenage pharmacist": "b"}
    console = Console(width=80, file=io.StringIO(), force_terminal=True, record=True)
    render_comparison_terminal(view, console)
    text = console.export_text(styles=False)
    assert_fits(text, 80)
    assert "only in A: geography" in text and "only in B: setting" in text
    assert "(only in B)" in text


def test_compare_shows_the_rescored_change_its_interval_is_about_and_never_colours_no_change():
    from auditor.reporting.compare import _delta
    from auditor.scoring.comparison import change_intervals
    from auditor.scoring.uncertainty import BootstrapSettings

    a = fixture("pharmacist-sd15")
    data = a.model_dump(mode="json")
    data["scores"]["axes"][0]["bav"] += 0.001  # a recorded value the answers do not give (an older scorer's)
    b = RunRecord.model_validate(data)
    view = compare_records(a, b, change_intervals(a, b, BootstrapSettings(resamples=50, seed=1)))
    first = next(x for x in view.axes if x.axis == a.scores.axes[0].axis)
    assert first.delta == 0 and first.delta_ci == (0.0, 0.0)  # the same answers: no change, whatever was recorded
    assert not any(note.startswith("BAV is not compared") for note in view.notes)
    assert _delta(0.0, (1e-18, 2e-18), 4, True).style == ""  # noise never makes a change of 0 a worsening
    assert _delta(0.01, (0.005, 0.02), 4, True).style == "red" and _delta(-0.01, (-0.02, -0.005), 4, True).style == "green"
    assert _delta(0.01, (-0.005, 0.02), 4, True).style == ""


def test_compare_claims_no_change_between_runs_that_make_concepts_differently():
    from auditor.scoring.comparison import change_intervals
    from auditor.scoring.uncertainty import BootstrapSettings

    a, b = fixture("pharmacist-sd15"), fixture("pharmacist-sd21")
    data = b.model_dump(mode="json")
    data["config"]["scoring"]["include_captions"] = False
    b = RunRecord.model_validate(data)
    view = compare_records(a, b, change_intervals(a, b, BootstrapSettings(resamples=50, seed=1)))
    assert any("include_captions yes in A, no in B" in note for note in view.notes)
    assert any(note.startswith("Deltas are B minus A, without intervals, so no change") for note in view.notes)
    assert all(x.delta_ci is None and all(cf.delta_ci is None for cf in x.counterfactuals) for x in view.axes)
    assert any(note.startswith("BAV is not compared on age:") for note in view.notes)


def test_compare_claims_no_change_between_runs_that_ask_other_questions_and_names_other_settings():
    """Every answer makes the concepts, so another question gives other CAS values from the very same images; a
    negative prompt (a mitigation) or other steps may explain a change, so the notes name them."""
    from auditor.scoring.comparison import change_intervals
    from auditor.scoring.uncertainty import BootstrapSettings

    a = fixture("pharmacist-sd15")
    assert all("questions" not in note and "settings" not in note for note in compare_records(a, a).notes)
    data = a.model_dump(mode="json")
    data["plan"]["axes"][0]["question"] = "How old is the person?"
    data["config"]["generation"]["negative_prompt"] = "blurry"
    b = RunRecord.model_validate(data)
    view = compare_records(a, b, change_intervals(a, b, BootstrapSettings(resamples=50, seed=1)))
    said = " ".join(view.notes)
    assert "The runs ask the images other questions (1 question only in A, 1 question only in B)" in said
    assert "Deltas are B minus A, without intervals, so no change is claimed" in said  # not "(--bootstrap 0)"
    assert all(x.delta_ci is None and all(cf.delta_ci is None for cf in x.counterfactuals) for x in view.axes)
    assert "negative_prompt default in A, 'blurry' in B" in " ".join(view.notes)

    # Images read from a folder were made by no setting of the run: not "steps 25 in A, default in B".
    data = a.model_dump(mode="json")
    data["config"]["t2i"] = {"spec": "folder:/data/images", "backend": "folder", "model_id": "/data/images"}
    data["config"]["generation"].update(dict.fromkeys(GenerationSettings.IMAGE_OPTIONS))
    read = " ".join(compare_records(a, RunRecord.model_validate(data)).notes)
    assert "The runs differ in settings that change their images or answers: run B read its images from a folder, " \
        "so how they were made is not recorded." in read
    assert "default in B" not in read


def test_compare_matches_counterfactuals_ignoring_case_and_spacing():
    a = fixture("pharmacist-sd15")
    data = a.model_dump(mode="json")
    data["scores"]["axes"][0]["counterfactuals"][0]["prompt"] = "A photo of a  MALE pharmacist"
    view = compare_records(a, RunRecord.model_validate(data))
    gender = next(x for x in view.axes if x.axis == "gender")
    assert [cf.only_in for cf in gender.counterfactuals] == [None, None]
    assert all(cf.delta == 0 for cf in gender.counterfactuals)


def test_compare_of_runs_sharing_no_counterfactual_says_nothing_is_compared(tmp_path):
    a = fixture("pharmacist-sd15")
    data = a.model_dump(mode="json")
    data["config"]["prompt"] = "a photo of a chef"
    for axis in data["scores"]["axes"]:
        for cf in axis["counterfactuals"]:
            cf["prompt"] = cf["prompt"].replace("pharmacist", "chef")
    view = compare_records(a, RunRecord.model_validate(data))
    names = ", ".join(axis.axis for axis in view.axes)
    assert f"Nothing is compared on {names}: no counterfactual of it is in both runs." in view.notes
    assert view.notes[-1] == "The runs share no counterfactual, so there is no change to measure."
    assert not any(note.startswith(("BAV is not compared", "Deltas are")) for note in view.notes)
    from auditor.scoring.comparison import change_intervals
    from auditor.scoring.uncertainty import BootstrapSettings

    b = RunRecord.model_validate(data)
    assert compare_records(a, b, change_intervals(a, b, BootstrapSettings(resamples=20, seed=0))).intervals is None
    # the title names both prompts, not A's alone; each model's spec is whole on its own line
    b.config.t2i = b.config.t2i.model_copy(update={"spec": "diffusers:/models/" + "a-long-local-folder-" * 4 + "sd21"})
    view = compare_records(a, b)
    console = Console(width=80, file=io.StringIO(), record=True)
    render_comparison_terminal(view, console)
    text = console.export_text()
    assert text.startswith("Comparing runs of 'a photo of a pharmacist' and 'a photo of a chef'\nA pharmacist-sd15 (")
    assert f"\n  text-to-image: {b.config.t2i.spec}\n" in text and f"\n  VQA: {b.config.vqa.spec}\n" in text
    page = write_comparison_html(view, tmp_path / "compare.html", FIXTURES / a.run_id, FIXTURES / a.run_id)
    heading = "<h1>Comparing two audits of “a photo of a pharmacist” and “a photo of a chef”</h1>"
    assert heading in page.read_text()
    # each image row names its run, so two runs of one model (before and after a mitigation) are told apart
    assert f'<th class="set" scope="row">B, run <code>{b.run_id}</code>: {b.config.t2i.spec}</th>' in page.read_text()
    assert compare_records(a, a).prompts == ["a photo of a pharmacist"]


def test_compare_command(tmp_path):
    copy_fixture("pharmacist-sd15", tmp_path)
    copy_fixture("pharmacist-sd21", tmp_path)
    result = run_auditor("compare", "pharmacist-sd15", "pharmacist-sd21", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [x["axis"] for x in data["only_a"]] == ["geography"]
    out = tmp_path / "pages" / "compare.html"
    page = run_auditor("compare", "pharmacist-sd15", "pharmacist-sd21", "--html", str(out))
    assert page.returncode == 0, page.stderr
    html = out.read_text(encoding="utf-8")
    assert "../runs/pharmacist-sd15/images/initial/000.png" in html
    (tmp_path / "link.html").symlink_to(out)  # a link (or a device, /dev/stdout) would be replaced by the page
    for path, why in [(tmp_path / "link.html", "is not a plain file"), (tmp_path / "pages", "is a folder")]:
        refused = run_auditor("compare", "pharmacist-sd15", "pharmacist-sd21", "--html", str(path), process=True)
        assert refused.returncode == 2 and refused.stderr == f"error: --html {path} {why}; give a file name for " + (
            "the comparison page, e.g. compare.html\n" if why == "is a folder" else "the comparison page\n"
        )
    assert (tmp_path / "link.html").is_symlink()
    run_a = tmp_path / "runs" / "pharmacist-sd15"
    for owned in (run_a / "record.json", run_a / "images" / "initial" / "000.png"):
        before = owned.read_bytes()
        refused = run_auditor("compare", "pharmacist-sd15", "pharmacist-sd21", "--html", str(owned), process=True)
        assert refused.returncode == 2 and refused.stderr == (
            f"error: --html {owned} is a file of the run {run_a}: write the comparison page elsewhere, or under a "
            "new name\n"
        )
        assert owned.read_bytes() == before
    for _ in range(2):  # a new page in a run folder is fine, and so is writing it again
        beside = run_auditor("compare", "pharmacist-sd15", "pharmacist-sd21", "--html", str(run_a / "vs-sd21.html"))
        assert beside.returncode == 0 and (run_a / "vs-sd21.html").is_file(), beside.stderr
    (tmp_path / "notes.html").write_text("my notes")  # outside every run, reached from inside one: no run's file
    outside = run_auditor("compare", "pharmacist-sd15", "pharmacist-sd21", "--runs-dir", "..", "--html",
                          "../../notes.html", cwd=run_a)  # fmt: skip
    assert outside.returncode == 0, outside.stderr
    failed = tmp_path / "runs" / "broken"
    shutil.copytree(tmp_path / "runs" / "pharmacist-sd21", failed)
    write_model(failed / "record.json", failed_record(load_record(failed / "record.json")))
    refused = run_auditor("compare", "pharmacist-sd15", "broken", process=True)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "has no scores" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    killed = tmp_path / "runs" / "killed"  # kill -9 mid-run: its record still says running, and no process runs it
    shutil.copytree(tmp_path / "runs" / "pharmacist-sd21", killed)
    write_model(killed / "record.json", load_record(killed / "record.json").model_copy(
        update={"status": "running", "scores": None}
    ))  # fmt: skip
    refused = run_auditor("compare", "pharmacist-sd15", "killed", env={"COLUMNS": "400"})
    assert refused.returncode == 2 and refused.stderr == (
        "error: run B ('killed') has no scores: this run did not complete (stopped without recording why); "
        f"auditor prompt --resume {killed} continues it; compare needs two scored runs\n"
    )
    unanswered = tmp_path / "runs" / "unanswered"
    shutil.copytree(tmp_path / "runs" / "pharmacist-sd21", unanswered)
    record = load_record(unanswered / "record.json")
    write_model(unanswered / "record.json", record.model_copy(update={"answers": {}}))
    refused = run_auditor("compare", "pharmacist-sd15", "unanswered", process=True)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "run B ('unanswered'): no answers for prompt set 'initial'" in refused.stderr  # which run, as given
    # each run is named by its folder, not by the id its record keeps (a copy keeps its first)
    named = json.loads(run_auditor("compare", "pharmacist-sd21", "unanswered", "--json", "--bootstrap", "0").stdout)
    assert (named["a"]["run_id"], named["b"]["run_id"]) == ("pharmacist-sd21", "unanswered")
    # a run against itself (by id and by folder: a slip, every change 0) is refused in one line
    itself = run_auditor("compare", "pharmacist-sd15", str(tmp_path / "runs" / "pharmacist-sd15"), process=True)
    assert itself.returncode == 2 and len(itself.stderr.strip().splitlines()) == 1
    assert "are the same run" in itself.stderr and "compare two runs" in itself.stderr


def test_empty_chart_has_no_axis():
    chart = bar_chart([], title="t", axis_label="x", scale_max=1.0)
    assert chart.rows == [] and chart.ticks == [] and chart.height < 40


def test_large_sets_show_a_seed_aligned_grid_and_fold_the_rest(tmp_path):
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    data = load_record(run_dir / "record.json").model_dump(mode="json")
    for prompt_set in data["prompt_sets"]:
        first = prompt_set["images"][0]
        prompt_set["images"] = [{**first, "index": i, "seed": 100 + i} for i in range(10)]
    html = write_html_report(RunRecord.model_validate(data), run_dir).read_text(encoding="utf-8")
    assert "seed 107" in html and "seed 108" not in html  # the grid shows 8 columns
    folded = len(data["prompt_sets"]) + len(data["plan"]["axes"]) - 1  # every axis's grid repeats the initial set
    assert html.count("all 10 images of") == folded
    assert html.count('loading="lazy"') == 10 * folded


# --------------------------------------------------------------------------- sets without concepts (no CAS)


def test_report_of_counterfactuals_without_cas(tmp_path):
    """Every female and every old image flagged: those have no CAS; gender has no BAV and ranks last, saying why."""
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    record = flagged_record(load_record(run_dir / "record.json"), "gender/1", "age/2")
    view = build_view(record)
    assert [a.name for a in view.axes][-1] == "gender"
    gender, age = (next(a for a in view.axes if a.name == name) for name in ("gender", "age"))
    assert (gender.bav, gender.bav_mad, gender.relative_bav, gender.lean) == (None, None, None, None)
    assert gender.bav_note == "no BAV: only 1 of 2 counterfactuals has a CAS"
    assert [cf.cas is None for cf in gender.counterfactuals] == [False, True]  # no CAS sorts last
    assert gender.finding.startswith("Only 'a photo of a male pharmacist' has a CAS among the gender counterfactuals")
    assert "'a photo of a female pharmacist' has no CAS" in gender.finding
    assert age.bav is not None and age.bav_note is None and age.counterfactuals[-1].cas is None
    assert "'a photo of a middle-aged pharmacist' (0.64" in age.finding
    assert age.finding.endswith("'a photo of an old pharmacist' has no CAS (no concepts in its images).")
    warning = "the counterfactual images gave no concepts (no usable images"
    assert any(warning in note and "female pharmacist" in note for note in view.notes)

    text = terminal_text(record, 80)
    assert_fits(text, 80)
    flat = " ".join(text.split())
    assert "no CAS" in flat and "no BAV" in flat and "only 1 of 2 counterfactuals has a CAS" in flat
    assert flat.index("3. gender") > flat.index("Which axes lean most")
    assert "warning: " + warning in flat  # under the CAS table, and in the notes
    ranking = flat[flat.index("Which axes lean most") : flat.index("An axis's BAV divided")]
    assert ranking.endswith("3. gender - no BAV - 0% gender has no BAV: only 1 of 2 counterfactuals has a CAS ")

    data = report_json(record)
    dumped = json.dumps(data)
    gender_json = next(a for a in data["axes"] if a["name"] == "gender")
    assert gender_json["bav"] is None and gender_json["counterfactuals"][-1]["cas"] is None
    assert '"cas": null' in dumped

    html = write_html_report(record, run_dir).read_text(encoding="utf-8")
    assert html.count(">no CAS<") >= 2 * 2  # chart value and table cell, for each of the two
    assert "no BAV" in html and "only 1 of 2 counterfactuals has a CAS" in html
    assert warning in html


def test_charts_mark_a_missing_value_without_a_bar():
    chart = bar_chart([Bar("a", 0.5, "0.50"), Bar("b", None, "no CAS")], title="t", axis_label="x", scale_max=1.0)
    scored, missing = chart.rows
    assert scored.bar_width > 0 and not scored.missing
    assert missing.bar_width == 0 and missing.missing and missing.value_text == "no CAS"


def test_report_when_the_initial_images_have_no_concepts(tmp_path):
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    record = flagged_record(load_record(run_dir / "record.json"), "initial")
    assert all(cf.cas is None for axis in record.scores.axes for cf in axis.counterfactuals)
    view = build_view(record)
    assert view.headline == (
        "No counterfactual has a CAS: the images gave no concepts to compare (see the notes), so no axis can be ranked."
    )
    assert [a.name for a in view.axes] == ["gender", "age", "geography"]  # plan order: nothing to rank by
    one = (
        "the initial images gave no concepts (no usable images: every one was flagged by the safety checker or got "
        "no answer), so no counterfactual can be compared with them: every CAS and BAV is null"
    )
    assert view.notes.count(one) == 1 and not any("counterfactual images gave no concepts" in n for n in view.notes)
    text = terminal_text(record, 80)
    assert_fits(text, 80)
    assert " ".join(one.split()) in " ".join(text.split())
    data = report_json(record)
    assert all(a["bav"] is None for a in data["axes"])
    html = write_html_report(record, run_dir).read_text(encoding="utf-8")
    assert html.count(">no CAS<") >= 8 * 2 and one in html


def test_compare_with_a_run_without_some_cas(tmp_path):
    a = fixture("pharmacist-sd15")
    b = flagged_record(a, "gender/1")
    view = compare_records(a, b)
    gender = next(x for x in view.axes if x.axis == "gender")
    assert gender.bav_a is not None and gender.bav_b is None and gender.delta is None
    female = next(cf for cf in gender.counterfactuals if "female" in cf.prompt)
    assert female.cas_a is not None and female.cas_b is None and female.delta is None and female.only_in is None
    assert view.axes[-1].axis == "gender"  # an axis without BAV in one run sorts by the other's BAV
    console = Console(width=80, file=io.StringIO(), force_terminal=True, record=True)
    render_comparison_terminal(view, console)
    text = console.export_text(styles=False)
    assert_fits(text, 80)
    assert "no BAV" in text and "no CAS" in text
    page = write_comparison_html(view, tmp_path / "compare.html", FIXTURES / a.run_id, FIXTURES / a.run_id)
    html = page.read_text(encoding="utf-8")
    assert "no CAS" in html and "no BAV" in html


def test_each_glossary_key_is_listed_once_so_no_study_explains_another_studys_number():
    from importlib import resources

    import yaml

    from auditor.reporting.glossary import METRICS

    entries = yaml.safe_load(resources.files("auditor.reporting").joinpath("glossary.yaml").read_text())["metrics"]
    keys = [entry["key"] for entry in entries]
    assert len(keys) == len(set(keys)) == len(METRICS)
    assert METRICS["difference"].name == "Held-out CAS difference"  # explore's, not the trace's similarity difference
    assert "Benjamini-Hochberg" in METRICS["p_adjusted"].description and "Holm" in METRICS["trace_p_adjusted"].description


def test_numbers_that_are_not_zero_are_never_written_as_zero():
    from auditor.reporting.html import template_environment
    from auditor.reporting.numbers import bounds, number, with_bounds

    assert with_bounds(0.62, 0.55, 0.69) == "0.62 [0.55, 0.69]"  # the place's own decimals where they do
    assert with_bounds(0.05, -0.00228, 0.1015, signed=True) == "+0.050 [-0.002, +0.102]"  # not "-0.00"
    assert bounds(0.0, 0.0) == "[0.00, 0.00]" and number(None) == "-"
    assert number(1e-5, 4) == "0.00001"  # at most three decimals more
    assert with_bounds(0.3, -4e-17, 0.7, signed=True) == "+0.30 [-0.00, +0.70]"  # noise around 0 asks for none
    p_value = template_environment().from_string("{{ p | p_value }}")
    assert p_value.render(p=3.2e-7) == "3.2e-07" and p_value.render(p=0.0123) == "0.0123"
    assert p_value.render(p=None) == "–"
    assert p_value.render(p=0.0) == "&lt; 1e-300"  # a chi-square tail that underflowed is not p = 0
    from auditor.reporting.numbers import p_equals

    assert (f"p {p_equals(0.0123)}", f"p {p_equals(0.0)}") == ("p = 0.0123", "p < 1e-300")  # in a sentence


def test_a_small_bav_keeps_its_digits_on_the_bar_and_in_the_batch_headline():
    """CAS of 0.50 and 0.51 give a BAV of 2.5e-05; four fixed decimals wrote it "0.0000" (TIBET App. 11.1: BAVs
    can be quite small)."""
    import dataclasses

    from auditor.reporting.html import _bav_bar

    axis = build_view(fixture("pharmacist-sd15")).axes[0]
    small = dataclasses.replace(axis, bav=2.5e-5, bav_ci=(1.2e-5, 6e-5), relative_bav=1.0, relative_bav_ci=(0.4, 1.0))
    bar = _bav_bar(small)
    assert bar.value_text == "1.00 · 0.00003" and bar.interval == (0.4, 1.0)
    # the hover names both intervals, and which of them the error bar draws (the bar's own, relative BAV's)
    relative = "relative BAV 1.00, interval 0.40 to 1.00 (the error bar)"
    assert bar.title == relative + "; BAV 0.00003, interval 0.00001 to 0.00006", bar


def test_a_number_and_its_interval_in_two_cells_share_their_decimals_as_in_one():
    """A trace's m - f of +0.000004 beside [-0.000126, +0.000088] (the terminal's) was "[-0.0001, +0.0001]" on the
    page: bounds at the place's 4 decimals beside a number at 6."""
    from auditor.records import Interval
    from auditor.reporting.numbers import cells, with_span

    interval = Interval(low=-0.000126, high=0.000088, method="percentile", defined=1.0)
    assert cells(0.000004, interval, 4, signed=True) == ("+0.000004", "[-0.000126, +0.000088]")
    assert " ".join(cells(0.000004, interval, 4, signed=True)) == with_span(0.000004, interval, 4, signed=True)
    assert cells(0.62, None, 2) == ("0.62", "") and cells(None, interval, 4, missing="–") == ("–", "[-0.0001, 0.0001]")
    from auditor.reporting.html import template_environment

    valued = template_environment().from_string(
        '{% from "macros.html.j2" import valued %}{{ valued(value, ci, 4, signed, missing) }}'
    )
    assert valued.render(value=0.000004, ci=interval, signed=True, missing="–") == (
        '+0.000004 <span class="ci">[-0.000126, +0.000088]</span>'
    )
    assert valued.render(value=0.0036, ci=(0.00004, 0.0123), signed=False, missing="–") == (
        '0.00360 <span class="ci">[0.00004, 0.01230]</span>'  # a view's (low, high) as a record's Interval
    )
    assert valued.render(value=None, ci=interval, signed=False, missing="no <BAV>") == "no &lt;BAV&gt;"  # no bounds
    assert valued.render(value=0.5, ci=None, signed=False, missing="–") == "0.5000"


def test_the_audit_page_and_terminal_write_a_small_cas_beside_its_interval_at_shared_decimals(tmp_path):
    """A CAS of 0.004 was "0.004" beside "[0.00, 0.20]": the number at the decimals it needs, its bounds at the
    place's own, so a bound of 0.001 read as 0."""
    data = fixture().model_dump(mode="json")
    gender = next(a for a in data["scores"]["axes"] if a["axis"] == "gender")
    gender["counterfactuals"][0].update(
        cas=0.004, cas_ci=Interval(low=0.001, high=0.2, method="percentile", defined=1.0).model_dump()
    )
    gender["bav_ci"] = Interval(low=0.00004, high=0.0123, method="percentile", defined=1.0).model_dump()
    record = RunRecord.model_validate(data)
    page = write_html_report(record, copy_fixture("pharmacist-sd15", tmp_path)).read_text(encoding="utf-8")
    assert '0.004 <span class="ci">[0.001, 0.200]</span>' in page
    bav = f"{gender['bav']:.5f}"
    assert f'BAV {bav} <span class="ci">[0.00004, 0.01230]</span>' in page
    text = terminal_text(record, 200)
    assert re.search(r" 0\.004 +[│|]? *\[0\.001, 0\.200\]", text), text
    assert f"BAV {bav} [0.00004, 0.01230]" in text


def test_the_held_out_difference_names_its_one_sided_level_exactly():
    from auditor.records import Confirmation
    from auditor.reporting.explore import held_out_difference

    confirmation = Confirmation(seeds=24, difference=0.05, difference_lower_bound=0.004)
    assert held_out_difference(confirmation, 0.05) == "+0.050, one-sided 95% lower bound +0.004"
    assert held_out_difference(confirmation, 0.025) == "+0.050, one-sided 97.5% lower bound +0.004"


def test_the_pages_sign_the_bounds_of_signed_numbers_as_the_terminal_does(tmp_path):
    from auditor.reporting.compare import write_comparison_html
    from auditor.reporting.numbers import bounds
    from auditor.scoring.comparison import change_intervals
    from auditor.scoring.uncertainty import BootstrapSettings

    data = fixture().model_dump(mode="json")
    gender = next(a for a in data["scores"]["axes"] if a["axis"] == "gender")
    gender["association"]["association_ci"] = Interval(low=-0.041, high=0.645, method="percentile", defined=1.0).model_dump()
    record = RunRecord.model_validate(data)
    page = write_html_report(record, copy_fixture("pharmacist-sd15", tmp_path)).read_text(encoding="utf-8")
    assert '<span class="ci">[-0.041, +0.645]</span>' in page
    assert "S = +0.021 [-0.041, +0.645]" in " ".join(terminal_text(record, 200).split())

    a, data = fixture(), fixture("pharmacist-sd21").model_dump(mode="json")
    data["plan"]["axes"][2]["question"] = a.plan.axes[2].question  # the same questions asked: comparable
    b = RunRecord.model_validate(data)
    view = compare_records(a, b, change_intervals(a, b, BootstrapSettings(resamples=50, seed=1)))
    page = write_comparison_html(view, tmp_path / "compare.html", FIXTURES / a.run_id, FIXTURES / b.run_id).read_text()
    changes = [axis.delta_ci for axis in view.axes if axis.delta_ci and axis.delta_ci[1] > 0]
    assert changes and all(f'<span class="ci">{bounds(*ci, 4, signed=True)}</span>' in page for ci in changes)


def test_leaderboard_scores_equal_but_for_float_rounding_tie():
    from auditor.reporting.ranking import rank_with_ties

    def places(rows, scores=lambda row: row[1:]):
        return [(rank, tied, row[0]) for rank, tied, row in rank_with_ties(rows, scores)]

    assert 0.1 + 0.2 != 0.3
    rows = [("a", 0.3), ("b", 0.1 + 0.2), ("c", 0.5), ("d", None), ("e", 0.3 - 1e-9)]  # 1e-9 is a real difference
    assert places(rows) == [(1, False, "c"), (2, True, "b"), (2, True, "a"), (4, False, "e"), (5, False, "d")]
    # at a rounding boundary of any number of digits: the next float up is still the same score
    edge = 0.1234567890125
    assert places([("x", edge), ("y", math.nextafter(edge, 1.0))]) == [(1, True, "y"), (1, True, "x")]
    # the first score decides, the second breaks its ties; None (no BAV) last, tied with another None
    axes = [("p", 1.0, 0.02), ("q", 0.5, 0.01), ("r", 0.5, 0.01 + 1e-17), ("s", None, None), ("t", None, None)]
    assert places(axes) == [(1, False, "p"), (2, True, "r"), (2, True, "q"), (4, True, "s"), (4, True, "t")]


def test_axes_with_equal_bavs_share_a_rank_in_the_terminal_the_json_and_the_page(tmp_path):
    """Gender and age at the same BAV, below geography's: neither comes first in any report (1, =2, =2)."""
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    record = load_record(run_dir / "record.json")
    axes = {axis.axis: axis for axis in record.scores.axes}
    # the same CAS values summed in another order differ in the last bits: still the same BAV
    bav, relative = axes["gender"].bav, axes["gender"].relative_bav
    noise = {"bav": math.nextafter(bav, 1.0), "relative_bav": math.nextafter(relative, 0.0)}
    level = axes["gender"].model_copy(update={"axis": "age", "counterfactuals": axes["age"].counterfactuals, **noise})
    assert (level.bav, level.relative_bav) != (bav, relative)
    tied = [axes["gender"], level, *(axis for name, axis in axes.items() if name not in ("gender", "age"))]
    record = record.model_copy(update={"scores": record.scores.model_copy(update={"axes": tied})})
    ranks = [(axis["name"], axis["rank"], axis["tied"]) for axis in report_json(record)["axes"]]
    assert ranks == [("geography", 1, False), ("gender", 2, True), ("age", 2, True)]
    text = " ".join(terminal_text(record, width=120).split())
    assert "1. geography" in text and "=2. gender" in text and "=2. age" in text and "3. age" not in text
    page = write_html_report(record, run_dir).read_text(encoding="utf-8")
    assert ">=2. gender</a>" in page and "<h2>=2. age" in page and "<h2>1. geography" in page


def test_a_progress_bar_with_nothing_to_compute_says_so():
    """A stage whose every result is cached gets a bar of 0 units: it says why, not only '0/0 -:--:--'."""
    from rich.console import Console

    from auditor.studies.progress import RichProgress

    console = Console(width=100, record=True, force_terminal=False)
    progress = RichProgress(console)
    progress.start("embed", 0, "classifying faces (CLIP)")
    progress.start("generate", 4, "generating images")
    progress.advance("generate", 4)
    progress.finish("embed")
    progress.finish("generate")
    text = console.export_text()
    assert "classifying faces (CLIP) (nothing to compute)" in text
    assert "generating images (nothing" not in text and "4/4" in text
