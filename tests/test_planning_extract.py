"""The reply reader on the shapes real LLMs produced in the TIBET paper (Figures 13, 14, 17), on prose replies
of open-weight chat models (``fixtures/prose_replies.yaml``) and on broken JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from auditor.planning.extract import PlanProblem, extract_axes, loosen_json

#: Prose replies with section headers, each with the exact axes and counterfactuals it holds.
PROSE_REPLIES = yaml.safe_load((Path(__file__).parent / "fixtures" / "prose_replies.yaml").read_text(encoding="utf-8"))

# Figure 14 (ChatGPT, counterfactual turn), as the paper prints it.
CHATGPT = """Certainly, let's create counterfactual prompts by changing one concept at a time:

1. Nationality:
* Two American Astronauts having Italian Pizza on Mars.
* Two Chinese Astronauts having Japanese Sushi on Mars.
2. Gender:
* Two Female Astronauts having Indian Buffet on Mars.
* Two Male Astronauts having Indian Buffet on Mars.
* Two Non-Binary Astronauts having Indian Buffet on Mars.

These counterfactual prompts explore alternative concepts for each axis."""

# Figure 13 (Llama 2): "Counterfactual N: <prompt> - <explanation>".
LLAMA = """Sure! Let's generate counterfactuals for the prompt.

Axis 1: Race/Ethnicity of the Astronauts

Counterfactual 1: Two Black Astronauts Having a Southern BBQ on Mars - Same as the original prompt but with African American astronauts.

Counterfactual 2: Two Latino Astronauts Having Tacos on Mars - Similar to the first counterfactual.

Axis 3: Setting

Counterfactual 1: Two Space Explorers Having Breakfast on a Futuristic Space Station - Keeping the theme of space travel."""

# Figure 17 (Bard): "Instead of X, generate an image of Y."
BARD = """Gender:

\u00ab Instead of two Indian male astronauts, generate an image of two Indian female astronauts having an Indian buffet on Mars.
\u00ab Instead of two Indian male astronauts, generate an image of one Indian male astronaut and one Indian female astronaut having an Indian buffet on Mars.
Setting:
\u00ab Instead of being on Mars, generate an image of two Indian astronauts having an Indian buffet on the Moon."""


def _read(text: str) -> dict[str, list[str]]:
    return {axis.name: axis.counterfactuals for axis in extract_axes(text)}


def test_chatgpt_style_numbered_headings_and_bullets():
    axes = _read(CHATGPT)
    assert list(axes) == ["Nationality", "Gender"]
    assert axes["Gender"][2] == "Two Non-Binary Astronauts having Indian Buffet on Mars."


def test_llama_style_counterfactual_lines_lose_their_explanations():
    axes = _read(LLAMA)
    assert axes["Race/Ethnicity of the Astronauts"] == [
        "Two Black Astronauts Having a Southern BBQ on Mars",
        "Two Latino Astronauts Having Tacos on Mars",
    ]
    assert axes["Setting"] == ["Two Space Explorers Having Breakfast on a Futuristic Space Station"]


def test_bard_style_instructions_become_prompts():
    axes = _read(BARD)
    assert axes["Gender"][0] == "two Indian female astronauts having an Indian buffet on Mars."
    assert axes["Setting"] == ["two Indian astronauts having an Indian buffet on the Moon."]


@pytest.mark.parametrize("case", PROSE_REPLIES, ids=[case["name"] for case in PROSE_REPLIES])
def test_prose_replies_give_exactly_their_axes(case):
    """A header starts an axis; introductory and closing sentences, notes and explanations are never read."""
    read = [(axis.name, axis.counterfactuals) for axis in extract_axes(case["reply"])]
    assert read == list(case["axes"].items())


def test_the_corpus_is_large_and_varied():
    assert len(PROSE_REPLIES) >= 10
    replies = "\n".join(case["reply"] for case in PROSE_REPLIES)
    for shape in ("**Gender Bias**", "**Gender:**", "### ", "\nGender bias:\n", "Counterfactual 1:", "\n- ", "```json"):
        assert shape in replies, shape


@pytest.mark.parametrize(
    "reply",
    [
        "Here are some counterfactual prompts:\n- a photo of a male nurse\n- a photo of a female nurse",
        "Sure! Here they are:\n\n**Here are the counterfactual prompts:**\n"
        "* a photo of a male nurse\n* a photo of a female nurse",
        "These prompts help test the model:\n1. a photo of a male nurse\n2. a photo of a female nurse\n",
        "**Note:**\n- a photo of a male nurse\n- a photo of a female nurse",
    ],
)
def test_a_sentence_or_a_note_is_never_an_axis(reply):
    with pytest.raises(PlanProblem, match="no JSON object was found"):
        extract_axes(reply)


def test_json_wins_over_prose_and_the_largest_broken_json_is_reported():
    assert list(_read(CHATGPT + '\n```json\n{"Age": ["a", "b"]}\n```')) == ["Age"]
    with pytest.raises(PlanProblem, match=r"^the JSON is malformed \(Expecting"):
        extract_axes('See [1]. {"gender": [male pharmacist, female pharmacist]}')


@pytest.mark.parametrize(
    "broken, expected",
    [
        ("{'a': ['x', 'y',],}", {"a": ["x", "y"]}),
        ('{"a": ["a doctor\'s office", "b"]}', {"a": ["a doctor's office", "b"]}),
        ("{'a': ['a doctor's office', 'b']}", {"a": ["a doctor's office", "b"]}),
        ('{a: ["x" "y"]\n "b": ["z"]}', {"a": ["x", "y"], "b": ["z"]}),
        ("{\u201ca\u201d: [\u201cx\u201d, True, None]}", {"a": ["x", True, None]}),
        ('{"a": ["x", "y"], // the axis\n "b": ["z", "w', {"a": ["x", "y"], "b": ["z", "w"]}),
    ],
)
def test_loosen_json(broken, expected):
    assert json.loads(loosen_json(broken)) == expected


def test_nothing_usable_is_a_problem_for_the_llm():
    for text, message in [
        ("I'm sorry, I can't help with that.", "no JSON object was found"),
        ('["a photo of a female pharmacist", "a photo of a male pharmacist"]', "without axis names"),
        ('{"prompt": "a photo of a pharmacist"}', "no axis with a list of counterfactuals"),
        ('[{"counterfactuals": ["a", "b"]}]', "has no name"),
    ]:
        with pytest.raises(PlanProblem, match=message):
            extract_axes(text)


def test_a_plan_breaking_many_rules_names_the_first_three_and_counts_the_rest():
    """The problems go back to the LLM and to the terminal as one line: all of them would not read as one."""
    from auditor.planning.proposals import ProposedAxis
    from auditor.planning.rules import checked_axes

    axes = [ProposedAxis(name=f"axis {number}", counterfactuals=["a photo"]) for number in range(5)]
    with pytest.raises(PlanProblem) as caught:
        checked_axes("a photo of a nurse", axes)
    assert str(caught.value) == (
        "axis 'axis_0' has only 1 counterfactual; every axis needs at least two different ones; "
        "axis 'axis_1' has only 1 counterfactual; every axis needs at least two different ones; "
        "axis 'axis_2' has only 1 counterfactual; every axis needs at least two different ones (and 2 more)"
    )
