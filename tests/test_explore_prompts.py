"""What the exploration and the batch read and propose: prompt lists, the guard, the offline and LLM proposers."""

from __future__ import annotations

import json

import pytest

from auditor.core.errors import AuditorError
from auditor.planning.proposer import ProposerRequest, read_proposals
from auditor.prompting.guard import DuplicateFinder, IndicatorWords, normalised
from auditor.prompting.lists import read_prompt_list
from auditor.prompting.topics import OfflineProposer

# --------------------------------------------------------------------------- prompt lists


def test_prompt_lists_in_every_format_and_templates_with_values(tmp_path):
    (tmp_path / "p.txt").write_text("a photo of a {occupation}\n# a comment\n\n  a {occupation}  at work\na kitchen\n")
    (tmp_path / "v.txt").write_text("nurse\nengineer\n")
    assert read_prompt_list(tmp_path / "p.txt", tmp_path / "v.txt") == [
        "a photo of a nurse", "a photo of an engineer", "a nurse at work", "an engineer at work", "a kitchen",
    ]  # fmt: skip
    (tmp_path / "p.csv").write_text('id,Prompt\n1,"a photo of a nurse, smiling"\n2,a chef\n')
    assert read_prompt_list(tmp_path / "p.csv") == ["a photo of a nurse, smiling", "a chef"]
    (tmp_path / "p.jsonl").write_text('{"prompt": "a cat"}\n\n{"prompt": "a {animal} in {place}"}\n')
    (tmp_path / "v.yaml").write_text("animal: [dog, owl]\nplace: [a park]\n")
    assert read_prompt_list(tmp_path / "p.jsonl", tmp_path / "v.yaml") == [
        "a cat",
        "a dog in a park",
        "an owl in a park",
    ]
    (tmp_path / "v.csv").write_text("animal,place\nfox,a den\n")
    assert read_prompt_list(tmp_path / "p.jsonl", tmp_path / "v.csv") == ["a cat", "a fox in a den"]
    (tmp_path / "p.tsv").write_text('prompt\tnote\na "vintage" photo of a nurse, smiling\tx\n')  # a header too
    assert read_prompt_list(tmp_path / "p.tsv") == ['a "vintage" photo of a nurse, smiling']  # quotes as written
    (tmp_path / "z.txt").write_text("a cat\n\u200b\na dog\n")  # an invisible line is a blank one
    assert read_prompt_list(tmp_path / "z.txt") == ["a cat", "a dog"]
    (tmp_path / "n.csv").write_text("prompt,note,note\na chef,1,2\n")  # only the prompt column must be one
    assert read_prompt_list(tmp_path / "n.csv") == ["a chef"]
    (tmp_path / "t.csv").write_text("prompt\na cat,\na dog,,\n")  # empty cells past the header cut nothing
    assert read_prompt_list(tmp_path / "t.csv") == ["a cat", "a dog"]
    # A byte-order mark (Excel's "CSV UTF-8") is not part of the first prompt or column name.
    bom = "\ufeff"
    (tmp_path / "b.txt").write_text(f"{bom}a photo of a nurse\n", encoding="utf-8")
    (tmp_path / "b.csv").write_text(f"{bom}prompt\na photo of a {{animal}}\n", encoding="utf-8")
    (tmp_path / "bv.csv").write_text(f"{bom}animal\nfox\n", encoding="utf-8")
    assert read_prompt_list(tmp_path / "b.txt") == ["a photo of a nurse"]
    assert read_prompt_list(tmp_path / "b.csv", tmp_path / "bv.csv") == ["a photo of a fox"]


def test_values_are_read_as_written(tmp_path):
    """YAML's own typing would read 1.10 as 1.1 and NO (Norway) as False; a values file's values stay as written."""
    (tmp_path / "p.txt").write_text("a photo from {place} of {count} people\n")
    (tmp_path / "v.yaml").write_text("place: [NO, 'yes', on]\ncount: [1.10]\n")
    assert read_prompt_list(tmp_path / "p.txt", tmp_path / "v.yaml") == [
        "a photo from NO of 1.10 people", "a photo from yes of 1.10 people", "a photo from on of 1.10 people",
    ]  # fmt: skip
    (tmp_path / "v.json").write_text('{"place": ["NO"], "count": [1.10, 2]}')
    assert read_prompt_list(tmp_path / "p.txt", tmp_path / "v.json") == [
        "a photo from NO of 1.10 people", "a photo from NO of 2 people",
    ]  # fmt: skip


def test_a_literal_brace_is_doubled_on_every_line(tmp_path):
    """{{ and }} read as one brace on a line with placeholders and on one without alike, as the error about a lone
    brace advises."""
    (tmp_path / "p.txt").write_text("a {{smiley}} sign\na {animal} with a {{bow}}\n")
    (tmp_path / "v.txt").write_text("cat\n")
    assert read_prompt_list(tmp_path / "p.txt", tmp_path / "v.txt") == ["a {smiley} sign", "a cat with a {bow}"]


@pytest.mark.parametrize(
    "files, message",
    [
        ({"p.txt": "a photo of a {occupation}\n"}, "is a template; give its values with --values"),
        ({"p.txt": "a cat\n", "v.txt": "x\n"}, "no prompt of"),
        ({"p.txt": "a cat\nA cat\n"}, "appears twice (prompts 1 and 2)"),
        ({"p.txt": "a cat\na dog\x00\n"}, "p.txt: prompt 2 holds the control character U+0000 (a UTF-16 or"),
        ({"p.txt": "a {x}\n", "v.txt": "dog\x07\n"}, "v.txt: prompt 1 holds the control character U+0007"),
        ({"p.txt": "# only a comment\n"}, "lists no prompts"),
        ({"p.csv": "text\na cat\n"}, "has no 'prompt' column"),
        ({"p.csv": "prompt,Prompt\na,b\n"}, "the header names the column 'prompt' twice"),
        ({"p.csv": 'prompt,n\n"a cat\non a mat",1\n,2\n'}, "p.csv:4: the 'prompt' cell is empty"),  # its file line
        ({"p.csv": "prompt,n\na,1\n\n,2\n"}, "p.csv:4: the 'prompt' cell is empty"),  # past a blank line
        ({"p.tsv": "text\na cat\n"}, "p.tsv: the TSV file has no 'prompt' column"),
        # an unquoted comma would cut the prompt short, a quote never closed would swallow the rest of the file
        ({"p.csv": "prompt\na cat, smiling\n"}, 'p.csv:2: 2 cells, but the header has 1 column (quote a cell that'),
        ({"p.csv": "prompt,n\na,1\n\nb,2,3\n"}, "p.csv:4: 3 cells, but the header has 2 columns"),
        ({"p.tsv": "prompt\tn\na\tb\tc\n"}, "p.tsv:2: 3 cells, but the header has 2 columns (a cell cannot hold"),
        ({"p.csv": 'prompt\na cat\n\n"a dog\nb\n'}, 'p.csv:4: not a CSV file auditor can read (a quote (") opened'),
        ({"p.csv": 'prompt\n"a cat" x\n'}, "p.csv:2: not a CSV file auditor can read (',' expected after '\"')"),
        ({"p.txt": "a {job}\n", "v.csv": "job\nnurse, senior\n"}, "v.csv:2: 2 cells, but the header has 1 column"),
        ({"p.txt": "a photo of a {job}\n", "v.txt": "nurse\nnurse\n"}, "p.txt filled from --values"),
        ({"p.txt": "a cat\nA cat\na {x}\n", "v.txt": "dog\n"}, "p.txt: the prompt 'A cat' appears twice"),
        (
            {"p.jsonl": '{"prompt": "a cat"}\n{"text": "x"}\n'},
            'p.jsonl:2: expected an object with a non-empty "prompt"',
        ),
        ({"p.txt": "a {a} and a {b}\n", "v.txt": "x\n"}, "has 2 placeholders"),
        ({"p.txt": "a {0}\n", "v.txt": "x\n"}, "use plain {name} placeholders"),
        ({"p.txt": "a {job!r}\n", "v.txt": "x\n"}, "use plain {name} placeholders, not {job!r}"),
        ({"p.txt": "a {job:>5}\n", "v.txt": "x\n"}, "use plain {name} placeholders, not {job:>5}"),
        ({"p.txt": "a {job}\n", "v.yaml": "job: [nurse, null]\n"}, "'job' has the value 'null'; values are words"),
        ({"p.txt": "a {job}\n", "v.json": '{"job": ["nurse", null]}'}, "'job' has the value None; values are words"),
        ({"p.txt": "a {job}\n", "v.yaml": "job: [{x: 1}]\n"}, "'job' has the value {'x': '1'}"),
        ({"p.txt": "a {job}\n", "v.json": '{"job": ["nurse", ""]}'}, "has an empty value for job"),
        ({"p.txt": "a {job} in {place}\n", "v.csv": "job,place\nnurse,\n"}, "has an empty value for place"),
        (
            {"p.txt": "a {job}\n", "v.yaml": "job: [nurse]\ngender: [male, female]\n"},
            "names gender, which no template of",
        ),
        ({"p.txt": "a {job}\n", "v.csv": "job,jbo\nnurse,chef\n"}, "names jbo, which no template of"),
    ],
)
def test_bad_prompt_lists_are_one_line(tmp_path, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    prompts = next(tmp_path / name for name in files if name.startswith("p."))
    values = next((tmp_path / name for name in files if name.startswith("v.")), None)
    with pytest.raises(AuditorError, match=None) as caught:
        read_prompt_list(prompts, values)
    assert message in str(caught.value) and "\n" not in str(caught.value)


# --------------------------------------------------------------------------- the guard


@pytest.mark.parametrize(
    "prompt, found",
    [
        ("a photo of a nurse", None),
        ("a photo of a female nurse", ("gender", "female")),
        ("A Woman at work", ("gender", "woman")),
        ("a businessman in an office", ("gender", "businessman")),
        ("a hospital matron", ("gender", "matron")),
        ("two nuns in a garden", ("gender", "nuns")),  # plurals say as much as the singular
        ("he is cooking", ("gender", "he")),
        ("a middle-aged farmer", ("age", "middle-aged")),
        ("an Asian chef", ("ethnicity", "asian")),
        ("a manager at work", None),  # "man" only as a whole word
        ("a human pilot", None),
        ("a photo of a chef's hat", None),
    ],
)
def test_indicator_words_match_whole_words_case_insensitively(prompt, found):
    assert IndicatorWords.builtin().found(prompt, ["gender", "age", "ethnicity"]) == found


def test_only_the_audited_axes_are_guarded_and_gender_takes_the_amplification_lists():
    words = IndicatorWords.builtin()
    assert words.found("an elderly nurse", ["gender"]) is None
    assert words.found("an elderly nurse", ["age"]) == ("age", "elderly")
    assert words.found("a gentleman", ["gender"]) == ("gender", "gentleman")  # from gender_words.yaml
    assert words.found("a photo of a nurse", ["socioeconomic_status"]) is None  # no list: nothing rejected
    assert {"gender", "age", "ethnicity"} <= set(words.axes())


def test_duplicates_without_an_embedder_are_exact_matches_ignoring_case_spacing_and_punctuation():
    finder = DuplicateFinder(0.9)
    earlier = [("c001", "a photo of a nurse"), ("c002", "a chef at work")]
    assert normalised("  A photo, of a NURSE! ") == "a photo of a nurse"
    found = finder.find("A photo of a  nurse.", earlier)
    assert (found.candidate_id, found.similarity) == ("c001", 1.0)
    assert finder.find("a photo of a nurse at work", earlier) is None  # near, but no embedder to tell
    with pytest.raises(AuditorError):
        DuplicateFinder(1.5)


def test_near_duplicates_by_minilm_cosine(minilm, tmp_path):
    from auditor.core.cache import ContentCache

    cache = ContentCache(tmp_path / "cache.sqlite")
    finder = DuplicateFinder(0.9, minilm, cache)
    earlier = [("c001", "a photo of a nurse"), ("c002", "a photo of a chef")]
    near = finder.find("a photograph of a nurse", earlier)
    assert near is not None and near.candidate_id == "c001" and 0.9 < near.similarity < 1.0
    assert finder.find("a firefighter climbing a ladder", earlier) is None
    assert cache.entries("sentence") == 4  # every prompt embedded once, by text
    hits = cache.hits["sentence"]
    DuplicateFinder(0.9, minilm, cache).find("a photograph of a nurse", earlier)
    assert cache.entries("sentence") == 4 and cache.hits["sentence"] == hits + 3


# --------------------------------------------------------------------------- the offline proposer


@pytest.fixture(scope="module")
def people_at_work():
    return OfflineProposer.build("people at work", [])


def test_people_at_work_are_occupations_under_worker(people_at_work):
    nouns = people_at_work.nouns[0]
    assert {noun.source for noun in nouns} <= {"hyponym of worker.n.01", "hyponym of actor.n.02"}
    texts = [noun.text for noun in nouns]
    assert {"soldier", "employee", "secretary", "carpenter", "cook"} <= set(texts[:40])
    assert texts.index("soldier") < texts.index("carpenter")  # the more frequent sense first
    assert [frame.template for frame in people_at_work.frames][0] == "a photo of a {noun}"


def test_offline_proposals_fill_templates_then_mutate_the_leaders(people_at_work):
    first = people_at_work.propose(4, set(), [])
    assert [p.parent for p in first] == [None] * 4
    assert first[0].prompt.startswith("a photo of a") and "WordNet noun" in first[0].origin
    assert people_at_work.propose(4, set(), []) == first  # a pure function of what was proposed
    taken = {normalised(p.prompt) for p in first}
    leader = ("c002", first[1].prompt)
    second = people_at_work.propose(4, taken, [leader])
    noun = first[1].prompt.removeprefix("a photo of a").removeprefix("n").strip()
    assert [p.parent for p in second[:2]] == ["c002", "c002"]
    assert {p.prompt for p in second[:2]} == {f"a {noun} at work", f"a portrait of a {noun}"}
    assert not taken & {normalised(p.prompt) for p in second}


def test_seed_prompts_become_templates_of_their_head_nouns_relatives():
    proposer = OfflineProposer.build(None, ["a photo of a doctor"])
    assert [frame.template for frame in proposer.frames] == ["a photo of a {noun}"]
    texts = [noun.text for noun in proposer.nouns[0]]
    assert "surgeon" in texts and "doctor" not in texts


def test_a_topic_without_a_noun_is_one_line():
    with pytest.raises(AuditorError, match="names no noun"):
        OfflineProposer.build("quickly and slowly", [])


# --------------------------------------------------------------------------- the LLM proposer's replies


def test_proposals_are_read_from_json_in_prose_with_known_parents_only():
    reply = (
        "Here you go:\n```json\n"
        + json.dumps({"prompts": [{"prompt": "a nurse  at work", "parent": "c001"}, "a chef", {"text": "a chef"},
                                  {"prompt": "a pilot", "parent": "c999"}, ""]})
        + "\n```"
    )  # fmt: skip
    found = read_proposals(reply, {"c001"})
    assert [(p.prompt, p.parent) for p in found] == [("a nurse at work", "c001"), ("a chef", None), ("a pilot", None)]
    assert [p.prompt for p in read_proposals('["a cat", "a dog"]', set())] == ["a cat", "a dog"]
    with pytest.raises(AuditorError, match="held no prompts"):
        read_proposals("I cannot help with that.", set())


def test_later_rounds_show_the_leaderboard_and_what_was_proposed():
    first = ProposerRequest(3, "people at work", ["a photo of a doctor"], ["gender"]).messages()
    assert "people at work" in first[1].content and '"a photo of a doctor"' in first[1].content
    assert "leaderboard" not in first[1].content.lower()
    later = ProposerRequest(
        3,
        "people at work",
        [],
        ["gender"],
        ["c001 | a photo of a nurse | gender | 0.0400 [0.02, 0.06]"],
        ["a photo of a nurse"],
    ).messages()
    assert "c001 | a photo of a nurse | gender" in later[1].content and "Do not repeat" in later[1].content
