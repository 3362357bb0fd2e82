"""Caption selection: keyword reservoir, nearest neighbours, and the no-indicator filters."""

from __future__ import annotations

import csv

import numpy as np
import pytest

pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'auditor[amplification]')")

from auditor.core.errors import AuditorError  # noqa: E402
from auditor.corpora.gender import CaptionLabeller  # noqa: E402
from auditor.corpora.prompts import article, builtin_templates, occupation_prompt  # noqa: E402
from auditor.corpora.readers import CaptionReader  # noqa: E402
from auditor.corpora.selection import METHODS, occupation_pattern, select_captions  # noqa: E402

LABELLER = CaptionLabeller()


def _csv(tmp_path, captions, name="captions.csv"):
    path = tmp_path / name
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["caption", "image"])
        writer.writerows([[c, f"img/{i}.png"] for i, c in enumerate(captions)])
    return path


def _by(selections):
    return {(s.occupation, s.method, s.prompt): s for s in selections}


def test_keyword_matches_whole_words_only(tmp_path):
    captions = [
        "Teacher, in her classroom",  # 0: female
        "two teachers at school",  # 1: plural is another word
        "a TEACHER and his pupils",  # 2: male
        "teacher's desk",  # 3: apostrophe ends the word
        "Graphic  designer at work",  # 4: any white space between the words
        "graphicdesigner logo",  # 5
        "preacher on stage",  # 6
        "a portrait of a teacher",  # 7: none
    ]
    reader = CaptionReader(_csv(tmp_path, captions), image_column="image", batch_rows=3)
    result = _by(select_captions(reader, ["teacher", "graphic designer"], ["keyword", "no-indicator"], labeller=LABELLER))
    teacher = result[("teacher", "keyword", None)]
    assert teacher.matched == 4
    assert [c.row for c in teacher.captions] == [0, 2, 3, 7]
    assert [c.label for c in teacher.captions] == ["female", "male", "none", "none"]
    assert teacher.captions[0].image == "img/0.png" and teacher.captions[0].source.endswith("captions.csv")
    assert teacher.counts() == {"male": 1, "female": 1, "both": 0, "none": 2}
    proxy = teacher.caption_proxy()
    assert (proxy.successes, proxy.total, proxy.percent) == (1, 2, 50.0)
    assert [c.row for c in result[("teacher", "no-indicator", None)].captions] == [3, 7]
    assert [c.row for c in result[("graphic designer", "keyword", None)].captions] == [4]
    assert occupation_pattern("graphic designer").search("GRAPHIC\tDESIGNER")
    # Whole words at the occupation's own punctuation too (\b needs a word character beside it).
    assert occupation_pattern(".NET developer").search("a .NET developer at her desk")
    assert occupation_pattern("C++ programmer").search("(a C++ programmer)")
    assert not occupation_pattern(".NET developer").search("a VB.NET developer")
    assert not occupation_pattern("C++").search("a C++x compiler")
    assert not occupation_pattern("teacher").search("teachers and a preacher")


def test_matches_equal_a_plain_regex_scan(tmp_path):
    """The word prefilter never drops a caption that the occupation's pattern matches."""
    rng = np.random.default_rng(5)
    vocabulary = ["Manager", "man", "nurse", "nurses", "graphic", "designer", "Graphic-designer", "teacher's", "x", "é"]
    captions = [" ".join(rng.choice(vocabulary, size=6)) for _ in range(400)]
    occupations = ["manager", "nurse", "graphic designer", "teacher", "man"]
    selections = select_captions(
        CaptionReader(_csv(tmp_path, captions), batch_rows=50), occupations, ["keyword"], labeller=LABELLER, per_occupation=1000
    )
    for selection in selections:
        pattern = occupation_pattern(selection.occupation)
        expected = [i for i, caption in enumerate(captions) if pattern.search(caption)]
        assert [c.row for c in selection.captions] == expected and selection.matched == len(expected)


def _stream(tmp_path, n=60):
    captions = []
    for i in range(n):
        captions.append(f"teacher number {i}" + (" with her class" if i % 3 == 0 else ""))
        captions.append(f"nurse number {i}")
    return _csv(tmp_path, captions)


def test_reservoir_is_seeded_and_independent_of_batches_and_other_occupations(tmp_path):
    path = _stream(tmp_path)

    def sample(batch_rows, occupations, seed=3):
        selections = select_captions(
            CaptionReader(path, batch_rows=batch_rows), occupations, ["keyword"], labeller=LABELLER, per_occupation=10, seed=seed
        )
        return [c.row for c in _by(selections)[("teacher", "keyword", None)].captions]

    first = sample(1000, ["teacher"])
    assert len(first) == 10 and first == sorted(first)
    assert sample(1, ["teacher"]) == first
    assert sample(7, ["nurse", "teacher"]) == first
    assert sample(1000, ["teacher"], seed=4) != first
    # Fewer matches than the cap: every match, in file order.
    everything = select_captions(CaptionReader(path), ["teacher"], ["keyword"], labeller=LABELLER, per_occupation=500)
    assert [c.row for c in everything[0].captions] == list(range(0, 120, 2))
    assert everything[0].matched == 60


def test_reservoir_sample_is_uniform(tmp_path):
    path = _csv(tmp_path, [f"a chef, photo {i}" for i in range(20)])
    hits = np.zeros(20)
    trials = 600
    for seed in range(trials):
        (selection,) = select_captions(CaptionReader(path), ["chef"], ["keyword"], labeller=LABELLER, per_occupation=5, seed=seed)
        hits[[c.row for c in selection.captions]] += 1
    # Each caption is kept with probability 5/20; the sd of a frequency over 600 trials is 0.018.
    assert np.abs(hits / trials - 0.25).max() < 0.08


class _TableEmbedder:
    """Texts -> fixed 3-d vectors (unit rows), so nearest neighbours can be worked out by hand."""

    def __init__(self, table):
        self.table = table
        self.calls = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        rows = np.array([self.table[t] for t in texts], dtype=np.float64)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_nn_keeps_the_closest_captions_by_cosine(tmp_path):
    prompt = "A photo of the face of a nurse"
    table = {
        prompt: [1, 0, 0],
        "nurse at the desk": [0, 1, 0],  # cos 0
        "her nurse portrait": [1, 0.1, 0],  # cos 0.995, female
        "nurse portrait": [1, 0.2, 0],  # cos 0.981
        "a nurse photo": [1, 1, 0],  # cos 0.707
        "nurse, same as the next": [1, 0.5, 0],  # cos 0.894, earlier of a tie
        "nurse, same as the previous": [1, 0.5, 0],  # the later of the tie is dropped
    }
    captions = list(table)[1:] + ["a doctor"]
    embed = _TableEmbedder(table)
    selections = _by(
        select_captions(
            CaptionReader(_csv(tmp_path, captions), batch_rows=2),
            ["nurse"],
            ["nn", "nn+no-indicator", "keyword"],
            labeller=LABELLER,
            per_occupation=3,
            prompts={"nurse": [prompt]},
            embed=embed,
        )
    )
    nn = selections[("nurse", "nn", prompt)]
    # The top three; of the two captions tied for third, the earlier one.
    assert [c.caption for c in nn.captions] == ["her nurse portrait", "nurse portrait", "nurse, same as the next"]
    assert [c.similarity for c in nn.captions] == pytest.approx([1 / np.sqrt(1.01), 1 / np.sqrt(1.04), 1 / np.sqrt(1.25)])
    assert nn.matched == 6
    # nn+no-indicator: the nn selection minus the caption with "her" (two left, not a refilled three).
    assert [c.caption for c in selections[("nurse", "nn+no-indicator", prompt)].captions] == [
        "nurse portrait",
        "nurse, same as the next",
    ]
    assert selections[("nurse", "keyword", None)].prompt is None
    # Only the prompt and the keyword matches were embedded, never "a doctor".
    assert all("a doctor" not in call for call in embed.calls)


def test_nn_ranks_with_minilm_as_the_authors_notebook(tmp_path, minilm):
    """Captions and scores of the authors' compute_nn_texts notebook (prompt: a singer)."""
    prompt = "A photo of the face of a singer"
    captions = [
        "A silhouette of a singer picture image.",
        "Singer with microphone Stock Photo",
        "colour photograph of singer on stage",
        "Close-up picture of singer sitting toward a microphone",
        "Portrait of a singer recording a track — Stock Photo",
        "Carrie Underwood, Country Singer",
        "Singer Sewing Machine Head From 1879",
        "Image of female singer",
        "Full length portrait of a male singer performing a song",
        "A photo of the face of a musician",  # no "singer": never a candidate
    ]
    selections = _by(
        select_captions(
            CaptionReader(_csv(tmp_path, captions), batch_rows=4),
            ["singer"],
            ["nn", "nn+no-indicator"],
            labeller=LABELLER,
            per_occupation=5,
            prompts={"singer": [prompt]},
            embed=minilm.embed,
        )
    )
    nn = selections[("singer", "nn", prompt)]
    assert [c.caption for c in nn.captions] == [
        "A silhouette of a singer picture image.",  # 0.8508 in the notebook
        "Singer with microphone Stock Photo",  # 0.7935
        "Portrait of a singer recording a track — Stock Photo",  # 0.7829
        "Image of female singer",  # 0.7623
        "Close-up picture of singer sitting toward a microphone",  # 0.7597
    ]
    assert [c.similarity for c in nn.captions] == pytest.approx([0.850815, 0.7935266, 0.7829431, 0.7622549, 0.7597242], abs=1e-4)
    assert "Image of female singer" not in [c.caption for c in selections[("singer", "nn+no-indicator", prompt)].captions]


def test_several_prompts_give_one_nn_selection_each(tmp_path):
    prompts = ["p one", "p two"]
    table = {"p one": [1, 0, 0], "p two": [0, 1, 0], "chef a": [1, 0.1, 0], "chef b": [0.1, 1, 0]}
    selections = select_captions(
        CaptionReader(_csv(tmp_path, ["chef a", "chef b"])),
        ["chef"],
        ["nn"],
        labeller=LABELLER,
        per_occupation=1,
        prompts={"chef": prompts},
        embed=_TableEmbedder(table),
    )
    assert [(s.prompt, [c.caption for c in s.captions]) for s in selections] == [("p one", ["chef a"]), ("p two", ["chef b"])]


def test_selection_errors(tmp_path):
    reader = CaptionReader(_csv(tmp_path, ["a chef"]))
    with pytest.raises(AuditorError, match="unknown selection method 'random'"):
        select_captions(reader, ["chef"], ["random"], labeller=LABELLER)
    with pytest.raises(AuditorError, match="need a sentence embedder"):
        select_captions(reader, ["chef"], ["nn"], labeller=LABELLER, prompts={"chef": ["a photo of a chef"]})
    with pytest.raises(AuditorError, match="need a prompt for 'chef'"):
        select_captions(reader, ["chef"], ["nn+no-indicator"], labeller=LABELLER, embed=lambda texts: np.eye(3)[: len(texts)])
    with pytest.raises(AuditorError, match="same occupation"):
        select_captions(reader, ["Chef", "chef"], ["keyword"], labeller=LABELLER)
    with pytest.raises(AuditorError, match="at least 1"):
        select_captions(reader, ["chef"], ["keyword"], labeller=LABELLER, per_occupation=0)
    assert METHODS == ("keyword", "nn", "no-indicator", "nn+no-indicator")


def test_occupation_prompts_follow_the_authors_article_rule():
    templates = builtin_templates()
    assert len(templates) == 4
    assert occupation_prompt(templates[0], "engineer") == "A photo of the face of an engineer"
    assert occupation_prompt(templates[0], "CEO") == "A photo of the face of a CEO"
    assert occupation_prompt(templates[3], "attorney") == "A photo of an attorney at work"
    assert article("umpire") == "an" and article("Umpire") == "a" and article("hairdresser") == "a"
    assert occupation_prompt("a photo of a {occupation}", "nurse") == "a photo of a nurse"
    with pytest.raises(AuditorError, match="no \\{occupation\\} placeholder"):
        occupation_prompt("a photo", "nurse")
    with pytest.raises(AuditorError, match="may only use"):
        occupation_prompt("{occupation} {gender}", "nurse")
