"""``auditor score`` end to end (real CLI, real WordNet) and the scoring orchestration.

Expected numbers are worked out by hand in the comments; WordNet links used: male~man and
female~woman (added pairs); young, old, counter link to none of the other words here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor.core.errors import AuditorError
from auditor.core.store import write_model
from auditor.records import (
    GeneratedImage,
    ImageAnswers,
    PromptSet,
    RunRecord,
    ScoringSettings,
    SetConcepts,
    load_record,
)
from auditor.scoring.concepts import set_concepts
from auditor.scoring.intervals import score_run
from auditor.scoring.tibet import score_axes, score_tibet_result
from auditor.scoring.tibet_files import (
    TibetFormatError,
    parse_tibet_result,
    question_axes,
)
from tests.clitools import run_auditor
from tests.factories import make_config, make_plan
from tests.test_runlock import held_elsewhere

GENDER_CFS = ["a photo of a male nurse", "a photo of a female nurse"]
AGE_CFS = ["a photo of a young nurse", "a photo of an old nurse"]


def tibet_result() -> dict:
    """A small result file in the TIBET authors' format (answers: [gender, age] per image)."""
    return {
        "prompt": "a photo of a nurse",
        "id": 3,
        "result": {"gender": GENDER_CFS, "age": AGE_CFS},
        "questions": ["What is the gender of the person in the image?", "What age group is the person in the image?"],
        # 4 images: male .5, young .75, man .25, old .25, female .25 -> merged male .75, young .75, old .25, female .25
        "concepts_initial": [["male", "young"], ["male", "young"], ["man", "old"], ["female", "young"]],
        "concepts_cf": {
            "gender": [
                # male .5, man .5, young 1, old .5 -> merged male 1, young 1, old .5 (sum 2.5)
                [["male", "young"], ["man", "young or old"]],
                # woman .5, old .5, female .5, young .5 -> merged female 1, old .5, young .5 (sum 2)
                [["woman", "old"], ["female", "young"]],
            ],
            "age": [
                [["female", "young"], ["male", "young"]],  # female .5, young 1, male .5 (sum 2)
                [["male", "old"], ["male", "old"]],  # male 1, old 1 (sum 2)
            ],
        },
    }


def tibet_result_of_four() -> dict:
    """:func:`tibet_result` with every counterfactual's two images taken twice: 4 images in every set, the fewest an
    interval takes."""
    data = tibet_result()
    data["concepts_cf"] = {axis: [images * 2 for images in sets] for axis, sets in data["concepts_cf"].items()}
    return data


# initial merged: male .75, young .75, old .25, female .25 (sum 2); "distribution" divides by 2.
# gender/0  freq: min .75+.75+.25 = 1.75, max 1+1+.5+.25 = 2.75 -> 7/11
#           dist: init .375 .375 .125 .125 vs .4 .4 .2: min .875, max 1.125 -> 7/9
# gender/1  freq: min young .5 + old .25 + female .25 = 1, max .75+.75+.5+1 = 3 -> 1/3
#           dist: both sums 2, so the same 1/3
# age/0     min male .5 + young .75 + female .25 = 1.5, max .75+1+.25+.5 = 2.5 -> 3/5 (both)
# age/1     min male .75 + old .25 = 1, max 1+.75+1+.25 = 3 -> 1/3 (both)
# BAV of two values = ((a - b) / 2)^2; bav_mad of two values = sqrt(|a - b| / (a + b)).
EXPECTED = {
    "distribution": {
        "gender": {"cas": [7 / 9, 1 / 3], "bav": (2 / 9) ** 2, "bav_mad": (0.4) ** 0.5, "lean": 4 / 9},
        "age": {"cas": [3 / 5, 1 / 3], "bav": (2 / 15) ** 2, "bav_mad": (2 / 7) ** 0.5, "lean": None},
    },
    "frequency": {
        "gender": {"cas": [7 / 11, 1 / 3], "bav": (5 / 33) ** 2, "bav_mad": (10 / 32) ** 0.5, "lean": 10 / 33},
        "age": {"cas": [3 / 5, 1 / 3], "bav": (2 / 15) ** 2, "bav_mad": (2 / 7) ** 0.5, "lean": None},
    },
}


def _check_axes(axes: dict, normalization: str) -> None:
    expected = EXPECTED[normalization]
    for axis, numbers in expected.items():
        assert axes[axis]["cas"] == pytest.approx(numbers["cas"])
        assert axes[axis]["bav"] == pytest.approx(numbers["bav"])
        assert axes[axis]["bav_mad"] == pytest.approx(numbers["bav_mad"])
        assert axes[axis]["lean"] == (None if numbers["lean"] is None else pytest.approx(numbers["lean"]))
    largest = max(numbers["bav"] for numbers in expected.values())
    for axis, numbers in expected.items():
        assert axes[axis]["relative_bav"] == pytest.approx(numbers["bav"] / largest)


def test_tibet_file_through_the_cli(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(tibet_result()))
    result = run_auditor("score", str(path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["format"] == "tibet" and report["prompt"] == "a photo of a nurse"
    assert report["cas_normalization"] == "distribution"
    assert list(report["axes"]) == ["gender", "age"]
    assert report["axes"]["gender"]["counterfactuals"] == GENDER_CFS
    _check_axes(report["axes"], "distribution")
    # top concepts of the initial set: young .75, male .5, then the .25 ties alphabetically
    assert [(c["concept"], c["frequency"]) for c in report["top_concepts"]["initial"]] == [
        ("young", 0.75),
        ("male", 0.5),
        ("female", 0.25),
        ("man", 0.25),
        ("old", 0.25),
    ]
    assert report["axis_top_concepts"]["age/1"]["gender"] == [{"concept": "male", "frequency": 1.0}]
    pairs = {(view["axis_a"], view["axis_b"]) for view in report["intersectionality"]}
    assert pairs == {("gender", "age"), ("age", "gender")}


def test_image_sets_of_different_sizes_are_said_to_be_resampled_as_seeds_they_lack(tmp_path):
    """The initial set has 4 images, every counterfactual 2: image i is seed i, so the counterfactuals lack seeds
    2 and 3, and the notice says so instead of leaving '4 seeds' unexplained."""
    parsed = parse_tibet_result(tibet_result())
    assert parsed.warnings == [
        "the image sets differ in size (4 images at most; gender/0 has 2, gender/1 has 2, age/0 has 2, age/1 has 2): "
        "image i of "
        "each set is taken as seed i, so a shorter set lacks the last seeds, and its intervals hold over the "
        "resamples that draw one of its images"
    ]
    even = tibet_result()
    even["concepts_initial"] = even["concepts_initial"][:2]
    assert parse_tibet_result(even).warnings == []
    path = tmp_path / "result.json"
    path.write_text(json.dumps(tibet_result()))
    result = run_auditor("score", str(path))
    assert result.returncode == 0 and "the image sets differ in size" in " ".join(result.stderr.split())
    # The counterfactuals' 2 images are too few for an interval, whatever the initial set's 4: none is given, and no
    # lean is claimed on one or two images a resample cannot vary (before, every CAS, BAV and lean had one).
    scored = json.loads(run_auditor("score", str(path), "--json").stdout)
    assert scored["intervals"] is None
    assert all(axis["bav_ci"] is None and axis["lean_ci"] is None for axis in scored["axes"].values())
    assert any(
        "the smallest prompt set has 2 images, fewer than the 4 an interval needs, so there are no intervals" in warning
        for warning in scored["warnings"]
    )
    path.write_text(json.dumps(tibet_result_of_four()))
    assert json.loads(run_auditor("score", str(path), "--json").stdout)["intervals"] is not None  # 4 in every set


def test_tibet_file_frequency_normalization():
    scores = score_tibet_result(parse_tibet_result(tibet_result()), ScoringSettings(cas_normalization="frequency"))
    axes = {
        axis.axis: {
            "cas": [cf.cas for cf in axis.counterfactuals],
            "bav": axis.bav,
            "bav_mad": axis.bav_mad,
            "relative_bav": axis.relative_bav,
            "lean": axis.lean,
        }
        for axis in scores.axes
    }
    _check_axes(axes, "frequency")
    view = next(v for v in scores.intersectionality if v.axis_a == "age" and v.axis_b == "gender")
    assert [c.concept for c in view.counterfactuals["age/1"]] == ["male"]
    assert [c.concept for c in view.initial] == ["male", "female", "man"]


GENDER_AGE_CFS = ["a photo of a young female nurse", "a photo of an old male nurse"]
STYLE_CFS = ["a painting of a nurse", "a photo of a nurse"]


def authors_result() -> dict:
    """A result file as the authors' code writes it, plus a user's question.

    Their ``generate_questions`` gives ``gender_age_bias`` two questions (its words "gender"
    and "age" both have one) and ``style`` one; the user appended a fourth. Answers per
    image: [gender, age, style, user's]. No two of these words are WordNet synonyms.
    """
    return {
        "prompt": "a photo of a nurse",
        "result": {"gender_age_bias": GENDER_AGE_CFS, "style": STYLE_CFS},
        "questions": [
            "What is the gender (male, female, other) of the person in the image?",
            "What age group (young, middle, old) is the person in the image?",
            "What is the style of the image?",
            "What is next to the person?",
        ],
        # male 1, young .5, old .5, photo 1, counter 1 (sum 4)
        "concepts_initial": [["male", "young", "photo", "counter"], ["male", "old", "photo", "counter"]],
        "concepts_cf": {
            "gender_age_bias": [
                [["female", "young", "photo", "counter"]] * 2,  # female 1, young 1, photo 1, counter 1
                [["male", "old", "painting", "desk"]] * 2,  # male 1, old 1, painting 1, desk 1
            ],
            "style": [
                [["male", "young", "painting", "counter"]] * 2,  # male 1, young 1, painting 1, counter 1
                [["male", "old", "photo", "counter"]] * 2,  # male 1, old 1, photo 1, counter 1
            ],
        },
    }


# Every histogram sums to 4, so both normalisations give the same CAS:
# gender_age/0  min young .5 + photo 1 + counter 1 = 2.5; max male 1 + young 1 + old .5 + photo 1
#               + counter 1 + female 1 = 5.5 -> 5/11 (without the user's answers: 1.5 / 4.5 = 1/3)
# gender_age/1  min male 1 + old .5 = 1.5; max 1 + .5 + 1 + 1 + 1 + painting 1 + desk 1 = 6.5 -> 3/13
# style/0       min male 1 + young .5 + counter 1 = 2.5; max 1 + 1 + .5 + 1 + 1 + painting 1 = 5.5 -> 5/11
# style/1       min male 1 + old .5 + photo 1 + counter 1 = 3.5; max 1 + .5 + 1 + 1 + 1 = 4.5 -> 7/9
AUTHORS_CAS = {"gender_age_bias": [5 / 11, 3 / 13], "style": [5 / 11, 7 / 9]}


def test_a_file_with_more_questions_than_axes_pairs_them_as_the_authors_code_does():
    result = parse_tibet_result(authors_result())
    assert result.question_axes == ["gender_age_bias", "gender_age_bias", "style", None]
    questions = authors_result()["questions"]
    assert [axis.questions for axis in result.axes] == [questions[:2], questions[2:3]]
    for normalization in ("distribution", "frequency"):
        scores = score_tibet_result(result, ScoringSettings(cas_normalization=normalization))
        assert {a.axis: [cf.cas for cf in a.counterfactuals] for a in scores.axes} == {
            axis: pytest.approx(cas) for axis, cas in AUTHORS_CAS.items()
        }
    top = {prompt_id: {c.concept: c.frequency for c in found} for prompt_id, found in scores.top_concepts.items()}
    assert top["initial"] == {"male": 1, "photo": 1, "counter": 1, "young": 0.5, "old": 0.5}  # every answer counts
    aligned = {
        prompt_id: {axis: {c.concept: c.frequency for c in found} for axis, found in axes.items()}
        for prompt_id, axes in scores.axis_top_concepts.items()
    }
    # gender_age_bias: the answers to its two questions; style: to its one; the user's question: no axis
    assert aligned["initial"] == {"gender_age_bias": {"male": 1, "young": 0.5, "old": 0.5}, "style": {"photo": 1}}
    assert aligned["style/0"] == {"gender_age_bias": {"male": 1, "young": 1}, "style": {"painting": 1}}
    assert scores.warnings == [
        "questions[3] ('What is next to the person?') is tied to no axis: its answers count in the overall "
        "concepts only"
    ]


def test_the_cli_scores_the_authors_file(tmp_path):
    data = authors_result()
    data["questions"][3] = "What is [bold]next[/bold] to the person?"  # the file's text is shown, never styled
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    result = run_auditor("score", str(path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {axis: numbers["cas"] for axis, numbers in report["axes"].items()} == {
        axis: pytest.approx(cas) for axis, cas in AUTHORS_CAS.items()
    }
    note = " ".join(result.stderr.split())
    assert "questions[3] ('What is [bold]next[/bold] to the person?') is tied to no axis" in note


@pytest.mark.parametrize(
    ("axes", "questions", "tied"),
    [
        # the authors' pairing: one question per word with a fixed question, else one generic question
        (["gender", "skin_tone"], 2, ["gender", "skin_tone"]),
        (["race_ethnicity_biases", "setting"], 3, ["race_ethnicity_biases", "race_ethnicity_biases", "setting"]),
        (["gender_age", "Occupation_Bias"], 4, ["gender_age", "gender_age", "Occupation_Bias", None]),  # case as theirs
        (["gender", "age"], 5, ["gender", "age", None, None, None]),
        # not the authors' pattern, but one question per axis: the paper's format, in order
        (["gender_age", "style"], 2, ["gender_age", "style"]),
        # neither: no question can be tied to an axis
        (["gender_age", "style"], 1, [None]),
        (["gender_age", "race_ethnicity"], 3, [None, None, None]),
    ],
)
def test_questions_are_tied_to_axes(axes, questions, tied):
    assert question_axes(axes, questions) == tied


def test_questions_that_fit_no_axis_still_count_overall(tmp_path):
    data = authors_result()
    data["questions"] = ["What is in the image?"]
    data["concepts_initial"] = [["male photo"], ["female painting"]]  # male .5, photo .5, female .5, painting .5
    data["concepts_cf"] = {
        "gender_age_bias": [[["male photo"]] * 2, [["female photo"]] * 2],
        "style": [[["male"]] * 2, [["painting"]] * 2],
    }
    scores = score_tibet_result(parse_tibet_result(data))
    assert {c.concept for c in scores.top_concepts["initial"]} == {"male", "photo", "female", "painting"}
    # style/0 is male 1; the initial set rescaled to sum 1 is .25 each: min male .25,
    # max male 1 + photo .25 + female .25 + painting .25 = 1.75 -> 1/7
    assert scores.axes[1].counterfactuals[0].cas == pytest.approx(1 / 7)
    assert scores.axis_top_concepts["initial"] == {"gender_age_bias": [], "style": []}
    assert len(scores.warnings) == 1 and scores.warnings[0].startswith("questions: 1 question for 2 axes")


def _record(tmp_path: Path, all_flagged: str | None = None) -> Path:
    """A run folder: one gender axis, 3 initial images of which image 2 is flagged NSFW.

    ``all_flagged`` names a prompt set whose every image the safety checker flagged.
    """

    def images(prompt_id: str, count: int, flagged: int | None = None) -> list[GeneratedImage]:
        return [
            GeneratedImage(
                index=i,
                file=f"images/{prompt_id}/{i}.png",
                seed=i,
                sha256="0" * 64,
                flagged_nsfw=i == flagged or prompt_id == all_flagged,
            )
            for i in range(count)
        ]

    def answers(*rows: tuple[str, str]) -> list[ImageAnswers]:
        return [ImageAnswers(image_index=i, answers={"gender": a}, caption=c) for i, (a, c) in enumerate(rows)]

    plan = make_plan("a photo of a pharmacist")
    record = RunRecord(
        run_id="scored",
        config=make_config("a photo of a pharmacist", images=3),
        plan=plan,
        environment={"auditor_version": "0", "python": "3", "platform": "test"},
        prompt_sets=[
            PromptSet(prompt_id=pid, prompt=prompt, axis=axis, images=images(pid, 3, 2 if axis is None else None))
            for pid, prompt, axis in plan.prompt_sets()
        ],
        answers={
            # image 2 is flagged: without it, male .5 man .5 counter .5 female .5 woman .5
            "initial": answers(("male", "a man at a counter"), ("female", "a woman"), ("male", "a man")),
            # 3 images, all used: male 1, man 1, counter 1/3
            "gender/0": answers(("male", "a man"), ("male", "a man"), ("male", "a man at a counter")),
            "gender/1": answers(("female", "a woman"), ("female", "a woman"), ("female", "a woman")),
        },
    )
    folder = tmp_path / "runs" / "scored"
    write_model(folder / "record.json", record)
    return folder


# Record, flagged image left out. initial merged: male 1, counter .5, female 1 (sum 2.5).
# gender/0: male 1 + man 1 -> male 2, counter 1/3 (sum 7/3); gender/1: female 1 + woman 1 -> female 2 (sum 2).
# frequency:    g0 min 1 + 1/3 = 4/3, max 2 + .5 + 1 = 3.5 -> 8/21;  g1 min 1, max 1 + .5 + 2 = 3.5 -> 2/7
# distribution: init .4 .2 .4; g0 male 6/7, counter 1/7: min .4 + 1/7 = 19/35, max 6/7 + .2 + .4 = 51/35 -> 19/51
#               g1 female 1: min .4, max .4 + .2 + 1 = 1.6 -> 1/4
RECORD_CAS = {"frequency": [8 / 21, 2 / 7], "distribution": [19 / 51, 1 / 4]}


def test_run_folder_through_the_cli(tmp_path):
    folder = _record(tmp_path)
    result = run_auditor("score", str(folder), "--json", "--cas-normalization", "frequency")
    assert result.returncode == 0, result.stderr
    gender = json.loads(result.stdout)["axes"]["gender"]
    assert gender["cas"] == pytest.approx(RECORD_CAS["frequency"])
    assert gender["lean"] == pytest.approx(8 / 21 - 2 / 7)  # CAS(male) - CAS(female)
    assert gender["bav"] == pytest.approx(((8 / 21 - 2 / 7) / 2) ** 2)
    # the human table, by run id from the runs folder, with the record's own normalisation (distribution)
    table = run_auditor("score", "scored", env={"COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    assert "\n  male " in table.stdout and "distribution" in table.stdout  # what it changes of the prompt
    assert f"{19 / 51:.3f}" in table.stdout and "0.250" in table.stdout


def test_a_killed_run_without_every_answer_is_said_to_be_stopped_with_what_continues_it(tmp_path):
    folder = _record(tmp_path)  # its record says running (kill -9 mid-perceive), and no process holds it
    record = load_record(folder / "record.json")
    write_model(folder / "record.json", record.model_copy(update={"answers": {"initial": record.answers["initial"]}}))
    result = run_auditor("score", "scored", env={"COLUMNS": "400"})
    assert result.returncode == 2 and result.stderr.endswith(
        "(did the perceive stage finish?): this run did not complete (stopped without recording why); "
        f"auditor prompt --resume {folder} continues it\n"
    )


def test_a_run_stopped_while_it_generated_or_asked_is_not_scored_from_what_it_had(tmp_path):
    """Scored, a prompt set's first answers would read as the whole set's: the score names the set, how far it got,
    how the run ended and what continues it."""
    folder = _record(tmp_path)
    record = load_record(folder / "record.json").model_copy(update={"status": "interrupted"})

    def scored(changed: RunRecord) -> str:
        write_model(folder / "record.json", changed)
        result = run_auditor("score", "scored", env={"COLUMNS": "400"})
        assert result.returncode == 2, result.stderr
        return result.stderr

    resume = f"this run did not complete (interrupted); auditor prompt --resume {folder} continues it\n"
    fewer = {**record.answers, "gender/0": record.answers["gender/0"][:2]}
    asked = scored(record.model_copy(update={"answers": fewer}))
    assert asked == (
        "error: run 'scored' has answers for 2 of the 3 images of prompt set 'gender/0' (did the perceive stage "
        f"finish?): {resume}"
    )
    cut = [
        each.model_copy(update={"images": each.images[:1]}) if each.prompt_id == "gender/1" else each
        for each in record.prompt_sets
    ]
    stopped = {**record.answers, "gender/1": record.answers["gender/1"][:1]}  # killed as it made image 1 of 3
    made = scored(record.model_copy(update={"prompt_sets": cut, "answers": stopped}))
    assert made == (
        f"error: run 'scored' has 1 of the 3 images of prompt set 'gender/1' (did the generate stage finish?): {resume}"
    )
    with held_elsewhere(folder):  # a process runs it now: nothing is shown, so the error says when to try again
        running = scored(record.model_copy(update={"prompt_sets": cut, "answers": stopped, "status": "running"}))
    assert running.endswith("(did the generate stage finish?): this run is running now: try again once it has ended\n")

    write_model(folder / "record.json", record)  # every answer in, though the run stopped before its scores
    noted = run_auditor("score", "scored", "--json", env={"COLUMNS": "400"})
    assert noted.returncode == 0 and f"note: {resume}" in noted.stderr
    assert json.loads(noted.stdout)["axes"]["gender"]["cas"] == pytest.approx(RECORD_CAS["distribution"])


def test_a_run_rescored_in_process_follows_its_settings(tmp_path):
    record = load_record(_record(tmp_path) / "record.json")
    scores = score_run(record)
    assert scores.cas_normalization == "distribution"
    assert [cf.cas for cf in scores.axes[0].counterfactuals] == pytest.approx(RECORD_CAS["distribution"])
    # no captions: initial male .5 female .5; g0 male 1; g1 female 1 -> frequency CAS 1/3 both, BAV 0
    scores = score_run(record, ScoringSettings(include_captions=False, cas_normalization="frequency", bootstrap=0))
    assert [cf.cas for cf in scores.axes[0].counterfactuals] == pytest.approx([1 / 3, 1 / 3])
    assert scores.axes[0].bav == pytest.approx(0.0)
    record.answers = {"initial": record.answers["initial"]}
    with pytest.raises(AuditorError, match="no answers for prompt set 'gender/0'"):
        score_run(record)


def test_a_counterfactual_whose_images_are_all_flagged_has_no_cas(tmp_path):
    """Every image of 'a photo of a female pharmacist' blacked out: no CAS, no BAV, no lean, and a warning."""
    folder = _record(tmp_path, all_flagged="gender/1")
    result = run_auditor("score", str(folder), "--json")
    assert result.returncode == 0, result.stderr
    gender = json.loads(result.stdout)["axes"]["gender"]
    assert gender["cas"][0] == pytest.approx(RECORD_CAS["distribution"][0])  # the male side is scored as before
    assert gender["cas"][1] is None  # JSON null, not 0
    assert (gender["bav"], gender["bav_mad"], gender["relative_bav"], gender["lean"]) == (None, None, None, None)
    assert gender["warnings"] == [
        "gender/1: the counterfactual images gave no concepts (no usable images: every one was flagged by the "
        "safety checker or got no answer), so it has no CAS and is left out of BAV"
    ]
    assert "'gender' has no BAV: only 1 of its 2 counterfactuals has a CAS" in " ".join(
        json.loads(result.stdout)["warnings"]
    )
    assert "gender/1: the counterfactual images gave no concepts" in result.stderr  # and said on the terminal
    table = run_auditor("score", str(folder), env={"COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if line.startswith("  female"))
    assert "no CAS" in row and "0.000" not in row
    assert "no BAV" in table.stdout


def _concepts(prompt_id: str, *answers: tuple[str, str]) -> SetConcepts:
    """Concepts of a set from (age answer, gender answer) per image, through the real concept pipeline."""
    rows = [ImageAnswers(image_index=i, answers={"age": a, "gender": g}) for i, (a, g) in enumerate(answers)]
    return set_concepts(prompt_id, rows, ["age", "gender"])


AGE3 = ["a photo of a young nurse", "a photo of an old nurse", "a photo of a middle-aged nurse"]


def test_a_set_whose_answers_are_all_stopwords_is_left_out_of_bav():
    # initial young 1, male 1 (no WordNet link between the words used here but male~man)
    # age/0  young 1, male 1                        -> CAS 1
    # age/1  old 1, male 1: min .5, max .5+.5+.5     -> CAS 1/3
    # age/2  "none", "the", "a": nothing left        -> no CAS; BAV of [1, 1/3] = (1/3)^2, MAD sqrt((2/3)/(4/3))
    # gender/0 male 1, young 1 -> CAS 1; gender/1 only stopwords -> no CAS, so gender has one CAS: no BAV, no lean
    concepts = {
        "initial": _concepts("initial", ("young", "male"), ("young", "male")),
        "age/0": _concepts("age/0", ("young", "male"), ("young", "male")),
        "age/1": _concepts("age/1", ("old", "male"), ("old", "male")),
        "age/2": _concepts("age/2", ("none", "the"), ("a", "none")),
        "gender/0": _concepts("gender/0", ("young", "male"), ("young", "male")),
        "gender/1": _concepts("gender/1", ("the", "none"), ("none", "it is")),
    }
    assert concepts["age/2"].overall == {} and concepts["age/2"].images_used == 2
    scores = score_axes([("age", AGE3), ("gender", GENDER_CFS)], concepts, ScoringSettings())
    age, gender = scores.axes
    assert [cf.cas for cf in age.counterfactuals] == pytest.approx([1.0, 1 / 3, None])
    assert age.bav == pytest.approx(1 / 9)
    assert age.bav_mad == pytest.approx(0.5**0.5)
    assert age.relative_bav == 1.0 and age.lean is None
    assert age.counterfactuals[2].warnings == [
        "the counterfactual images gave no concepts (every answer was a stopword or rarer than the frequency "
        "floor), so it has no CAS and is left out of BAV"
    ]
    assert age.counterfactuals[0].warnings == [] and age.counterfactuals[1].warnings == []
    assert [cf.cas for cf in gender.counterfactuals] == [1.0, None]
    assert (gender.bav, gender.bav_mad, gender.relative_bav, gender.lean) == (None, None, None, None)
    assert scores.warnings == [
        "axis 'gender' has no BAV: only 1 of its 2 counterfactuals has a CAS, and a variance needs two"
    ]


@pytest.mark.parametrize(
    ("initial", "why"),
    [
        (SetConcepts(prompt_id="initial", images_used=0, overall={}, by_axis={}),
         "no usable images: every one was flagged by the safety checker or got no answer"),
        (_concepts("initial", ("none", "the"), ("a", "yes")),
         "every answer was a stopword or rarer than the frequency floor"),
    ],
)  # fmt: skip
def test_an_initial_set_without_concepts_leaves_every_cas_null_with_one_warning(initial, why):
    concepts = {
        "initial": initial,
        "age/0": _concepts("age/0", ("young", "male"), ("young", "male")),
        "age/1": _concepts("age/1", ("old", "male"), ("old", "male")),
        "age/2": _concepts("age/2", ("none", "the"), ("a", "none")),  # empty too: still only the one warning
        "gender/0": _concepts("gender/0", ("young", "male"), ("young", "male")),
        "gender/1": _concepts("gender/1", ("young", "female"), ("old", "female")),
    }
    scores = score_axes([("age", AGE3), ("gender", GENDER_CFS)], concepts, ScoringSettings())
    for axis in scores.axes:
        assert all(cf.cas is None and cf.warnings == [] for cf in axis.counterfactuals)
        assert (axis.bav, axis.bav_mad, axis.relative_bav, axis.lean) == (None, None, None, None)
    assert scores.warnings == [
        f"the initial images gave no concepts ({why}), so no counterfactual can be compared with them: "
        "every CAS and BAV is null"
    ]


def test_a_missing_prompt_set_is_an_error():
    concepts = {"initial": _concepts("initial", ("young", "male")), "gender/0": _concepts("gender/0", ("old", "male"))}
    with pytest.raises(AuditorError, match="no concepts for prompt set 'gender/1'"):
        score_axes([("gender", GENDER_CFS)], concepts, ScoringSettings())


def _broken(change) -> dict:
    data = tibet_result()
    change(data)
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["concepts_cf"]["gender"][1].__setitem__(1, ["female", "young", "extra"]),
         "concepts_cf.gender[1][1]: expected 2 answers (one per question), got 3"),
        (lambda d: d["concepts_initial"][2].__setitem__(0, 7),
         "concepts_initial[2][0]: expected a string answer, got a number"),
        (lambda d: d["concepts_initial"].__setitem__(1, "male young"),
         "concepts_initial[1]: expected a list of answers, got a string"),
        (lambda d: d.__setitem__("questions", []), "questions: no questions (a TIBET result file asks at least one)"),
        (lambda d: d["questions"].pop(), "concepts_initial[0]: expected 1 answer (one per question), got 2"),
        (lambda d: d["questions"].append("What is the person holding?"),
         "concepts_initial[0]: expected 3 answers (one per question), got 2"),
        (lambda d: d["concepts_cf"]["age"].pop(),
         "concepts_cf.age: expected 2 image sets (one per counterfactual in result), got 1"),
        (lambda d: d["concepts_cf"].pop("age"), "concepts_cf.age: missing (result has this axis)"),
        (lambda d: d["concepts_cf"].__setitem__("skin tone", []), 'concepts_cf["skin tone"]: axis not in result'),
        (lambda d: d["result"].__setitem__("age", "old"), "result.age: expected a list of counterfactual prompts, got a string"),
        (lambda d: d["result"].__setitem__("gender", [*GENDER_CFS, " A photo of a  male nurse"]),
         "result.gender[2]: the counterfactual prompt ' A photo of a  male nurse' repeats 'a photo of a male nurse' of "
         "result.gender[0] (case and spacing are ignored when comparing)"),
        (lambda d: d.pop("concepts_initial"), "concepts_initial: missing"),
        (lambda d: d.__setitem__("prompt", None), None),  # null prompt is allowed
    ],
)
def test_malformed_tibet_files_name_the_place(change, message):
    data = _broken(change)
    if message is None:
        assert parse_tibet_result(data).prompt is None
        return
    with pytest.raises(TibetFormatError) as caught:
        parse_tibet_result(data)
    assert str(caught.value).startswith(message)


def test_malformed_files_exit_2_with_one_line(tmp_path):
    cases = {
        "count.json": (_broken(lambda d: d["concepts_cf"]["gender"][0][1].append("x")), "concepts_cf.gender[0][1]: expected 2"),
        "type.json": (_broken(lambda d: d["concepts_cf"]["age"][0][0].__setitem__(1, None)), "concepts_cf.age[0][0][1]: expected a string answer, got null"),
        "other.json": ({"hello": 1}, "neither a TIBET result file"),
        "empty.json": (
            _broken(lambda d: d.update(concepts_initial=[], concepts_cf={"gender": [[], []], "age": [[], []]})),
            "the TIBET file has no images, so there is nothing to score",
        ),
        "list.json": ([1, 2], "neither a TIBET result file"),
        # both quoted as written, the spacing too, though the error is on one line
        "repeat.json": (
            _broken(lambda d: d["result"].__setitem__("age", [*AGE_CFS, "a photo of an  Old\tnurse"])),
            "result.age[2]: the counterfactual prompt 'a photo of an  Old\\tnurse' repeats 'a photo of an old nurse' of "
            "result.age[1] (case and spacing are ignored when comparing)",
        ),
        # another study's record, though it has a 'result' key as TIBET files do
        "t2iat.json": (
            json.loads((Path(__file__).parent / "fixtures" / "records" / "t2iat_test_v1.json").read_text()),
            "is a T2IAT test record (made by `auditor t2iat run`); this command reads prompt audit records",
        ),
    }
    for name, (data, message) in cases.items():
        path = tmp_path / name
        path.write_text(json.dumps(data))
        result = run_auditor("score", str(path), process=True)
        assert result.returncode == 2, (name, result.stderr)
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    (tmp_path / "bad.json").write_text("{not json")
    result = run_auditor("score", str(tmp_path / "bad.json"), process=True)
    assert result.returncode == 2 and "not valid JSON" in result.stderr and "Traceback" not in result.stderr


def test_the_score_table_fits_80_columns_with_every_number_and_counterfactual_whole():
    """Axis rows carry the axis's numbers, counterfactual rows what each changes of the prompt and its CAS: at 80
    columns nothing is cut ("middle-…", "pharmac…", a lean interval past the edge)."""
    run = Path(__file__).parent / "fixtures" / "runs" / "pharmacist-sd15"
    shown = run_auditor("score", str(run), env={"COLUMNS": "80"}, process=True)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in shown.stdout
    labels = {line[:14].rstrip() for line in lines}
    assert {"  male", "  female", "  young", "  middle-aged", "  old", "  in Europe"} <= labels
    assert "+0.120 [-0.120," in shown.stdout and "+0.364]" in shown.stdout  # gender's lean and its interval
