"""The offline WordNet planner: sensible, valid, deterministic plans for person, animal, scene and abstract prompts."""

from __future__ import annotations

import json
import re

import pytest

from auditor.core.errors import AuditorError
from auditor.planning import make_plan, validate_plan

PROMPTS = ["a photo of a pharmacist", "Photo of a cat on a table", "a beautiful day in Hawaii", "the infinite universe of data"]


@pytest.fixture(scope="module")
def plans():
    return {prompt: make_plan(prompt, "offline") for prompt in PROMPTS}


def _axes(plan) -> dict[str, list[str]]:
    return {axis.name: axis.counterfactuals for axis in plan.axes}


@pytest.mark.parametrize("prompt", PROMPTS)
def test_plans_are_valid_and_recorded_as_offline(plans, prompt):
    plan = plans[prompt]
    assert validate_plan(plan) == plan  # already satisfies every rule
    assert plan.llm == "offline" and plan.attempts == 1 and plan.llm_temperature is None and not plan.edited
    assert plan.caption_question == "Describe the image."
    for axis in plan.axes:
        assert axis.kind in ("societal", "incidental")
        assert len(axis.counterfactuals) >= 2
        assert len({c.casefold() for c in axis.counterfactuals} | {prompt.casefold()}) == len(axis.counterfactuals) + 1
        assert axis.question.endswith("?") or axis.question.endswith(".")
    assert plan.transcript[0].role == "system" and "WordNet" in plan.transcript[0].content


def test_person_prompt_gets_societal_axes_with_inserted_attributes(plans):
    plan = plans["a photo of a pharmacist"]
    axes = _axes(plan)
    assert list(axes) == ["gender", "age", "ethnicity", "socioeconomic_status", "clothing", "physical_ability"]
    assert "a photo of a female pharmacist" in axes["gender"]
    assert "a photo of a male pharmacist" in axes["gender"]
    assert "a photo of an elderly pharmacist" in axes["age"]
    assert "a photo of an Asian pharmacist" in axes["ethnicity"]
    assert "a photo of a pharmacist in a wheelchair" in axes["physical_ability"]
    assert {axis.kind for axis in plan.axes} == {"societal"}
    assert plan.axes[0].question == "What is the gender (male, female, other) of the person in the image?"
    assert "'pharmacist'" in plan.transcript[0].content and "person" in plan.transcript[0].content


def test_animal_prompt_gets_breed_color_size_behavior(plans):
    axes = _axes(plans["Photo of a cat on a table"])
    assert list(axes) == ["breed", "color", "size", "behavior"]
    assert "Photo of a Siamese cat on a table" in axes["breed"]
    assert "Photo of a black cat on a table" in axes["color"]
    assert "Photo of an orange cat on a table" in axes["color"]
    assert "Photo of a cat sleeping on a table" in axes["behavior"]


def test_scene_prompt_varies_setting_weather_and_time(plans):
    axes = _axes(plans["a beautiful day in Hawaii"])
    assert list(axes) == ["setting", "weather", "time_of_day", "culture", "style"]
    assert "a beautiful day in the mountains" in axes["setting"]  # the place is swapped, not stacked
    assert "a beautiful rainy day in Hawaii" in axes["weather"]
    assert "a beautiful night in Hawaii" in axes["time_of_day"]  # "day" itself is swapped
    assert all(cf.startswith("a beautiful day in Hawaii ") for cf in axes["style"])


def test_abstract_prompt_still_gets_a_plan(plans):
    axes = _axes(plans["the infinite universe of data"])
    assert list(axes) == ["style", "setting", "color"]
    assert all("universe of data" in cf for cfs in axes.values() for cf in cfs)


def test_a_prompt_without_a_noun_it_knows_says_so_where_the_person_looks(plans, tiny_models, tmp_path):
    """A prompt in another language reads as abstract: the plan's notes say why its axes are not about people, as
    the run goes and in the report (only the transcript said it)."""
    from auditor.reporting.wording import plan_notes
    from tests.clitools import run_auditor

    assert plans["the infinite universe of data"].notes == []  # a noun it knows, of an abstract kind
    plan = make_plan("一位医生的照片", "offline")
    assert list(_axes(plan)) == ["style", "setting", "color"]
    assert plan_notes(plan) == [
        "The offline planner found no noun it knows in '一位医生的照片' (it reads English words, through WordNet), so "
        "it planned the axes of abstract prompts; plan with --llm for a prompt in another language."
    ]
    shown = run_auditor("plan", "一位医生的照片", "--llm", "offline")
    assert shown.returncode == 0 and "found no noun it knows" in " ".join(shown.stderr.split())
    ran = run_auditor(
        "prompt", "一位医生的照片", "--llm", "offline", "--t2i", f"diffusers:{tiny_models.t2i}", "--vqa",
        f"blip2:{tiny_models.vqa}", "--embedder", f"clip:{tiny_models.clip}", "--steps", "2", "--images", "1",
        "--max-axes", "1", "--name", "zh",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "found no noun it knows" in " ".join(ran.stderr.split())  # as the run goes
    assert plan_notes(plan)[0] in json.loads(run_auditor("report", "zh", "--json").stdout)["notes"]  # and after


def test_articles_agree_with_the_word_that_follows(plans):
    counterfactuals = [cf for plan in plans.values() for axis in plan.axes for cf in axis.counterfactuals]
    for cf in counterfactuals:
        assert not re.search(r"\b[Aa] (?!uni)[AEIOUaeiou]", cf), cf  # "a uniform" is right
        assert not re.search(r"\b[Aa]n [^AEIOUaeiou]", cf), cf


@pytest.mark.parametrize(
    "prompt, axis, expected",
    [
        ("A smart man", "gender", ["A smart woman", "A smart non-binary person"]),  # gendered nouns are swapped
        ("a young woman reading", "age", ["a middle-aged woman reading", "an elderly woman reading"]),
        ("Two Indian Astronauts having Indian Buffet on Mars", "ethnicity", None),
        ("Cat on a table", "color", ["Black cat on a table", "White cat on a table", "Orange cat on a table", "Gray cat on a table"]),
        ("a painting of a red car", "style", None),
        ("an umbrella in the rain", "weather", ["an umbrella in the snow", "an umbrella in the fog", "an umbrella in a storm", "an umbrella in the sun"]),
        ("a dog playing in the snow", "behavior", ["a dog sleeping in the snow", "a dog eating in the snow", "a dog running in the snow", "a dog sitting in the snow", "a dog jumping in the snow"]),
    ],
)
def test_existing_attributes_are_substituted_in_place(prompt, axis, expected):
    counterfactuals = _axes(make_plan(prompt, "offline"))[axis]
    if expected is not None:
        assert counterfactuals == expected
    elif axis == "ethnicity":
        # "Indian" is replaced, the head noun stays, the cuisine is untouched
        assert counterfactuals[0] == "Two Asian Astronauts having Indian Buffet on Mars"
    else:
        assert "a photograph of a red car" in counterfactuals
        assert not any("painting of" in cf for cf in counterfactuals)  # no synonym of the original frame


def test_an_inserted_attribute_goes_before_markup_or_brackets_around_the_word():
    tagged = _axes(make_plan("a photo of a <b>nurse</b>", "offline"))
    assert tagged["gender"][0] == "a photo of a male <b>nurse</b>"
    assert "a photo of an elderly <b>nurse</b>" in tagged["age"]
    bracketed = _axes(make_plan("a photo of an [elderly] nurse", "offline"))
    assert bracketed["gender"][0] == "a photo of a male [elderly] nurse"
    first = _axes(make_plan("<b>Nurse</b> at work", "offline"))  # capitalised as "Nurse at work" would be
    assert first["gender"][0] == "Male <b>nurse</b> at work"
    assert _axes(make_plan('a <b class="x">nurse</b>', "offline"))["gender"][0] == 'a male <b class="x">nurse</b>'
    assert _axes(make_plan("<b>Man</b> at work", "offline"))["gender"][0] == "<b>Woman</b> at work"


def test_caps_and_determinism():
    first = make_plan("a photo of a pharmacist", "offline", max_axes=2, max_counterfactuals=2)
    second = make_plan("a photo of a pharmacist", "offline", max_axes=2, max_counterfactuals=2)
    assert first == second
    assert _axes(first) == {
        "gender": ["a photo of a male pharmacist", "a photo of a female pharmacist"],
        "age": ["a photo of a young pharmacist", "a photo of a middle-aged pharmacist"],
    }


def test_the_plan_says_which_asked_axes_it_drops_and_why():
    """--axes that do not fit the prompt or are over --max-axes are named in the plan, not only in its transcript."""
    plan = make_plan("a photo of a pharmacist", "offline", axes=["gender", "setting", "age", "ethnicity"], max_axes=2)
    assert list(_axes(plan)) == ["gender", "age"]
    assert plan.dropped_axes == {
        "setting": "the axis library does not apply it to person prompts",
        "ethnicity": "over --max-axes 2",
    }
    assert "Over --max-axes 2: ethnicity." in plan.transcript[0].content
    # the planner chose the axes: nothing was asked for, so nothing is dropped
    assert make_plan("a photo of a pharmacist", "offline", max_axes=2).dropped_axes == {}


def test_offline_takes_no_model_and_refuses_an_empty_prompt():
    with pytest.raises(AuditorError, match="takes no model"):
        make_plan("a cat", "offline:wordnet")
    with pytest.raises(AuditorError, match="the prompt is empty"):
        make_plan("   ", "offline")


def test_line_breaks_and_runs_of_spaces_read_as_one_space(plans, tiny_models):
    """`auditor prompt`, `plan`, a batch file and an exploration read a prompt alike, so they share cached work."""
    from auditor.studies.prompt_audit import validate_options
    from tests.test_executors import options

    folded = make_plan("  a photo\n of a   pharmacist ", "offline")
    assert folded.prompt == "a photo of a pharmacist" and folded.axes == plans["a photo of a pharmacist"].axes
    audit = options(tiny_models, "sequential", prompt="a photo\nof a  pharmacist")
    validate_options(audit)
    assert audit.prompt == "a photo of a pharmacist"


def test_no_offline_plan_is_bad_input_that_a_resume_would_repeat(tiny_models, tmp_path):
    """WordNet and the axis library give the same answer every time: a new run with other --axes, not --resume."""
    from auditor.core.errors import StartAgainError
    from tests.clitools import run_auditor
    from tests.test_prompt_audit import tiny_args

    with pytest.raises(StartAgainError, match="found no plan: .*name other --axes, or plan with --llm"):
        make_plan("a kettle", "offline", axes=["gender"])
    # --llm offline beside --axes names the planner --axes uses anyway: accepted, as explore accepts it; the
    # command finds there is no plan before it makes a run folder, so there is nothing to resume
    result = run_auditor("prompt", "a kettle", *tiny_args(tiny_models), "--axes", "gender", "--name", "k")
    assert result.returncode == 2 and "found no plan" in result.stderr and "--resume" not in result.stderr
    assert not (tmp_path / "runs" / "k").exists()
