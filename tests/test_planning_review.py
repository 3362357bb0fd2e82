"""--review (a real editor subprocess, or the interactive prompt), plan validation, and axis -> question."""

from __future__ import annotations

import io
import sys
import textwrap

import pytest

from auditor.core.errors import AuditorError, InvalidEditError, InvalidPlanError, ReviewCancelled
from auditor.planning import question_for_axis, review_plan, validate_plan
from auditor.planning.review import plan_to_yaml
from auditor.records import AuditPlan, AxisPlan

PROMPT = "a photo of a pharmacist"


def _plan() -> AuditPlan:
    return AuditPlan(
        prompt=PROMPT,
        llm="openai:gpt-4o-mini",
        axes=[
            AxisPlan(
                name="gender",
                kind="societal",
                counterfactuals=["a photo of a male pharmacist", "a photo of a female pharmacist"],
                question=question_for_axis("gender"),
            ),
            AxisPlan(
                name="setting",
                kind="incidental",
                counterfactuals=["a photo of a pharmacist in a hospital", "a photo of a pharmacist in a village"],
                question=question_for_axis("setting"),
            ),
        ],
    )


def _editor(tmp_path, monkeypatch, body: str) -> None:
    """$EDITOR = a Python script that edits the YAML file it is given, like a person would."""
    script = tmp_path / "editor.py"
    script.write_text("import sys, yaml\npath = sys.argv[1]\nplan = yaml.safe_load(open(path))\n" + textwrap.dedent(body))
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")


def test_editor_edits_are_validated_and_marked(tmp_path, monkeypatch):
    _editor(
        tmp_path,
        monkeypatch,
        """
        plan["axes"][0]["counterfactuals"].append("a photo of a non-binary pharmacist")
        plan["axes"][1].update(name="Work Place")
        del plan["axes"][1]["question"]
        plan["axes"].append({"name": "age", "counterfactuals": ["a photo of a young pharmacist", "a photo of an old pharmacist"]})
        yaml.safe_dump(plan, open(path, "w"))
        """,
    )
    reviewed = review_plan(_plan())
    assert reviewed.edited is True
    assert [(a.name, a.kind) for a in reviewed.axes] == [("gender", "societal"), ("work_place", "incidental"), ("age", None)]
    assert reviewed.axes[0].counterfactuals[-1] == "a photo of a non-binary pharmacist"
    assert reviewed.axes[1].question == "What is work place in the image?"  # default for the new name
    assert reviewed.axes[2].question == "What age group (young, middle, old) is the person in the image?"
    assert reviewed.transcript == _plan().transcript and reviewed.llm == "openai:gpt-4o-mini"


def test_an_unchanged_plan_is_not_marked_edited(tmp_path, monkeypatch):
    _editor(tmp_path, monkeypatch, "")
    assert review_plan(_plan()) == _plan()


@pytest.mark.parametrize(
    "body, error, message",
    [
        ('plan["axes"][0]["counterfactuals"] = ["a photo of a male pharmacist"]\nyaml.safe_dump(plan, open(path, "w"))',
         InvalidEditError, "axis 'gender' has only 1 counterfactual"),
        ('plan["axes"][1]["counterfactuals"][0] = "A photo of a  pharmacist"\nyaml.safe_dump(plan, open(path, "w"))',
         InvalidEditError, "is the original prompt itself"),
        ('plan["axes"] = []\nyaml.safe_dump(plan, open(path, "w"))', InvalidEditError, "the plan has no axes"),
        ('open(path, "w").write("axes: [unclosed")', InvalidEditError, "not valid YAML"),
        ('open(path, "w").write("")', ReviewCancelled, "review cancelled"),
        ('sys.exit(3)', AuditorError, "exited with status 3"),
        ('plan["caption_question"] = plan["axes"][0]["question"]\nyaml.safe_dump(plan, open(path, "w"))',
         InvalidEditError, "axis 'gender' asks the caption question; give it its own"),
        ('plan["axes"][0]["qustion"] = plan["axes"][0].pop("question")\nyaml.safe_dump(plan, open(path, "w"))',
         InvalidEditError, "axis 'gender' has unknown key 'qustion': use name, kind, question, counterfactuals"),
        ('plan["axis"] = plan["axes"][:1]\nyaml.safe_dump(plan, open(path, "w"))',
         InvalidEditError, "the edited plan has unknown key 'axis': use caption_question, axes"),
        ('plan["axes"][0]["name"] = 123\nyaml.safe_dump(plan, open(path, "w"))',
         InvalidEditError, "axis 1 of the edited plan: its name must be text \\(got 123\\)"),
        ('plan["axes"][0]["question"] = ["two", "questions"]\nyaml.safe_dump(plan, open(path, "w"))',
         InvalidEditError, "axis 'gender': question must be text"),
        ('plan["caption_question"] = 7\nyaml.safe_dump(plan, open(path, "w"))',
         InvalidEditError, "caption_question must be text, or deleted for the default \\(got 7\\)"),
    ],
)  # fmt: skip
def test_bad_edits_are_clear_errors(tmp_path, monkeypatch, body, error, message):
    _editor(tmp_path, monkeypatch, body)
    with pytest.raises(error, match=message):
        review_plan(_plan())  # stdin is not a terminal under pytest, so no second round


def test_interactive_review_without_an_editor(monkeypatch):
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    answers = [
        "rename", "sex",  # gender -> sex
        "edit", "a photo of a pharmacist in a pharmacy", "a photo of a pharmacist in a lab", "",  # setting
        "yes", "age", "a photo of a young pharmacist", "a photo of an elderly pharmacist", "",
        "no",
    ]  # fmt: skip
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(answers) + "\n"))
    reviewed = review_plan(_plan())
    assert reviewed.edited is True
    assert [a.name for a in reviewed.axes] == ["sex", "setting", "age"]
    assert reviewed.axes[0].question == "What is sex in the image?"
    assert reviewed.axes[1].counterfactuals == ["a photo of a pharmacist in a pharmacy", "a photo of a pharmacist in a lab"]
    assert reviewed.axes[1].question == "What is the setting of the image?"


def test_interactive_review_that_runs_out_of_input(monkeypatch):
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO("drop\n"))
    with pytest.raises(AuditorError, match="input ended"):
        review_plan(_plan())


def test_plan_yaml_round_trips_comments_aside():
    text = plan_to_yaml(_plan())
    assert text.startswith("# Review the audit plan for: a photo of a pharmacist")
    assert "- a photo of a male pharmacist" in text


def test_validate_plan_normalises_names_and_fills_questions():
    plan = _plan().model_copy(
        update={"axes": [AxisPlan(name="Skin Tone", counterfactuals=["a photo of a dark-skinned pharmacist", "x"], question=" ")]}
    )
    checked = validate_plan(plan)
    assert checked.axes[0].name == "skin_tone" and checked.axes[0].question == "What is skin tone in the image?"
    twice = _plan().model_copy(update={"axes": [_plan().axes[0], _plan().axes[0].model_copy(update={"name": "Gender"})]})
    with pytest.raises(InvalidPlanError, match="axis 'gender' appears twice"):
        validate_plan(twice)
    repeated = _plan().model_copy(
        update={
            "axes": [
                AxisPlan(
                    name="age", counterfactuals=["a photo of an old pharmacist", "A photo of an  OLD pharmacist"], question="q"
                )
            ]
        }
    )
    with pytest.raises(InvalidPlanError, match="repeats the counterfactual"):
        validate_plan(repeated)


@pytest.mark.parametrize(
    "axis, question",
    [
        ("gender", "What is the gender (male, female, other) of the person in the image?"),
        ("Racial_Bias", "What is the ethnicity of the person in the image?"),
        ("socioeconomic_status", "What is the socioeconomic status of the person in the image?"),
        ("Socioeconomic Biases", "What is the socioeconomic status of the person in the image?"),
        ("physical_appearance", "Describe the appearance in the image."),
        ("colors", "What color is the image?"),
        ("cultural_bias", "What is cultural in the image?"),
        ("time_of_day", "What is time of day in the image?"),
    ],
)
def test_axis_questions_follow_table_4(axis, question):
    assert question_for_axis(axis) == question


def test_review_shows_an_llms_axis_name_literally(monkeypatch, capsys):
    """An LLM's axis name is text: "[/x]" in it neither crashes the review nor disappears."""
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    plan = _plan()
    plan.axes[0].name = "gender [/x]"
    monkeypatch.setattr(sys, "stdin", io.StringIO("keep\nkeep\nno\n"))
    reviewed = review_plan(plan)
    assert reviewed.axes[0].name == "gender_x" and "axis 1/2: gender [/x] (societal)" in capsys.readouterr().err
