"""Triplet prompts (Wu et al. 2025, §3.1): neutral-caption filter, gender swaps, profession prompts."""

from __future__ import annotations

import pytest

from auditor.core.errors import AuditorError
from auditor.prompting.articles import indefinite_article
from auditor.prompting.triplets import (
    Triplet,
    has_person_word,
    is_neutral_caption,
    load_profession_templates,
    load_professions,
    profession_phrase,
    profession_triplet,
    profession_triplets,
    select_caption_triplets,
    swap_gender,
)
from auditor.prompting.wordlists import human_words, words
from auditor.records import TRIPLET_SETS


def test_table2_is_loaded_as_printed():
    lexicon = human_words()
    assert len(lexicon.table2["gender"]) == 44  # "queen" is printed twice
    assert lexicon.table2["gender"].count("queen") == 2
    assert lexicon.table2["geography"] == ("American", "Asian", "African", "Indian", "Latino")
    assert len(lexicon.table2["others"]) == 56
    assert lexicon.table2["others"][:3] == ("commander", "officer", "cheerleader")
    assert "bridemaid" in lexicon.table2["others"] and "bridesmaid" in lexicon.additions
    # indicators are lower case: "I", "Mr", "American" match any case
    assert {"i", "mr", "american", "women", "men", "children", "boys"} <= lexicon.indicators
    assert lexicon.sigma_words == {"people", "person", "woman", "women", "man", "men"}


def test_words_are_letter_runs_in_lower_case():
    assert words("People's U-turn, Mr. X2 café") == ["people", "s", "u", "turn", "mr", "x", "café"]
    # An initialism is one word: "U.S." is not Table 2's "u", so the caption stays neutral.
    assert words("A person at the U.S. Open at 9 a.m., U.K") == ["a", "person", "at", "the", "u.s.", "open", "at", "a.m.", "u.k"]
    assert is_neutral_caption("A person at the U.S. Open") and not is_neutral_caption("A person at the U. S. Open")
    # A full stop without its space is no initialism: "a.man" still has "man", "a.person" still "person".
    assert words("A person and a.man, U.S.woman") == ["a", "person", "and", "a", "man", "u.s", "woman"]
    assert not is_neutral_caption("A person and a.man") and has_person_word("a.person on a bench")


@pytest.mark.parametrize(
    "caption",
    [
        "A person riding a horse on the beach.",
        "Two people sitting on a bench",
        "PEOPLE'S market at night",
        "persons waiting for the bus",
    ],
)
def test_neutral_captions(caption):
    assert has_person_word(caption)
    assert is_neutral_caption(caption)


@pytest.mark.parametrize(
    ("caption", "reason"),
    [
        ("The person and a boy are playing badminton", "boy"),  # the paper's example
        ("A person with two boys on a beach", "boy"),  # plural of a Table 2 word
        ("People and their children at a park", "child"),  # irregular plural
        ("A person and his dog", "his"),
        ("An American person eating", "american"),  # geography, capitalised
        ("a person taking a photo, I think", "i"),
        ("Mr. Smith and a person", "mr"),
        ("a person with the BRIDESMAIDS", "bridesmaid"),  # our reading of "bridemaid", plural
        ("people and women at a market", "woman"),
        ("a person making a U-turn", "u"),  # whole-word on letter runs: conservative
    ],
)
def test_captions_with_a_table2_word_are_rejected(caption, reason):
    assert has_person_word(caption)
    assert not is_neutral_caption(caption)
    assert reason in human_words().found_in(caption)


@pytest.mark.parametrize(
    "caption",
    ["a salesperson at the counter", "a personal computer on a desk", "peoples of the world", "a cat on a mat", ""],
)
def test_captions_without_a_person_word_are_not_neutral(caption):
    # "person" must be a whole word: "salesperson", "personal" and "peoples" are not
    assert not has_person_word(caption)
    assert not is_neutral_caption(caption)


@pytest.mark.parametrize(
    ("neutral", "feminine", "masculine"),
    [
        ("a person riding a horse", "a woman riding a horse", "a man riding a horse"),
        ("A person with an umbrella", "A woman with an umbrella", "A man with an umbrella"),
        ("People walking in the rain", "Women walking in the rain", "Men walking in the rain"),
        ("THE PERSON ON THE LEFT", "THE WOMAN ON THE LEFT", "THE MAN ON THE LEFT"),
        ("the people's choice", "the women's choice", "the men's choice"),
        ("a person's bag", "a woman's bag", "a man's bag"),
        ("two persons' bags", "two women's bags", "two men's bags"),
        ("the people’s park", "the women’s park", "the men’s park"),  # typographic apostrophe
        ("a person-to-person chat", "a woman-to-woman chat", "a man-to-man chat"),
        ("people of many peoples", "women of many peoples", "men of many peoples"),
        ("a person, and another person", "a woman, and another woman", "a man, and another man"),
    ],
)
def test_swaps_keep_case_possessives_and_plurals(neutral, feminine, masculine):
    (triplet,) = select_caption_triplets([neutral], id_prefix="c").triplets
    assert triplet == Triplet(source_id="c-0", neutral=neutral, feminine=feminine, masculine=masculine)
    assert [triplet.prompt(s) for s in TRIPLET_SETS] == [neutral, feminine, masculine]
    assert swap_gender(neutral, "neutral") == neutral


def test_swap_rejects_an_unknown_set():
    with pytest.raises(ValueError):
        swap_gender("a person", "other")  # type: ignore[arg-type]


def test_a_caption_that_is_not_neutral_makes_no_triplet_and_a_neutral_one_is_stripped():
    selection = select_caption_triplets(["The person and a boy are playing badminton", "  a person at a desk \n"])
    assert [t.neutral for t in selection.triplets] == ["a person at a desk"]
    assert (selection.with_indicator, selection.indicator_counts) == (1, {"boy": 1})


def test_selection_counts_what_it_left_out():
    captions = [
        "A person riding a horse.",
        "",  # blank: skipped, not counted
        "a dog on a sofa",
        "The person and a boy are playing badminton",
        "A person  riding a HORSE.",  # same text up to case and spacing
        "people and men at a bar",
        "a boy and a person and a girl",
        "People at a concert",
    ]
    selection = select_caption_triplets(captions, id_prefix="gcc")
    assert [t.source_id for t in selection.triplets] == ["gcc-0", "gcc-7"]
    assert [t.masculine for t in selection.triplets] == ["A man riding a horse.", "Men at a concert"]
    assert (selection.captions, selection.without_person, selection.with_indicator, selection.duplicates) == (7, 1, 3, 1)
    assert selection.indicator_counts == {"boy": 2, "girl": 1, "man": 1}
    kept = select_caption_triplets(captions, deduplicate=False)
    assert [t.source_id for t in kept.triplets] == ["caption-0", "caption-4", "caption-7"]
    assert kept.duplicates == 0


def test_profession_prompts_prepend_gender_and_fix_the_article():
    # the paper's own example (which prints "an female ecologist")
    triplet = profession_triplet("an ecologist studies the ecosystem in a lush green forest", "ecologist", "p-0")
    assert triplet.neutral == "an ecologist studies the ecosystem in a lush green forest"
    assert triplet.feminine == "a female ecologist studies the ecosystem in a lush green forest"
    assert triplet.masculine == "a male ecologist studies the ecosystem in a lush green forest"
    assert triplet.profession == "ecologist"
    capital = profession_triplet("An Ecologist at work", "ecologist", "p")
    assert (capital.neutral, capital.feminine) == ("An Ecologist at work", "A female Ecologist at work")
    start = profession_triplet("Ecologists gather samples", "ecologist", "p")
    assert (start.feminine, start.masculine) == ("Female ecologists gather samples", "Male ecologists gather samples")
    other = profession_triplet("the old nurse", "nurse", "p")
    assert other.masculine == "the old male nurse"
    fixed = profession_triplet("a engineer at a desk", "engineer", "p")  # the neutral article is fixed too
    assert (fixed.neutral, fixed.feminine) == ("an engineer at a desk", "a female engineer at a desk")
    with pytest.raises(AuditorError, match="does not occur"):
        profession_triplet("a doctor at work", "nurse", "p")


def test_profession_triplets_from_templates():
    triplets = profession_triplets(
        ["AI Ethics Researcher", "Sommelier", "Sommelier", "Oceanographer"], ["a {profession} at work", "a photo of a {profession}"]
    )
    assert [t.source_id for t in triplets] == [
        "AI ethics researcher#0",
        "AI ethics researcher#1",
        "sommelier#0",
        "sommelier#1",
        "oceanographer#0",
        "oceanographer#1",
    ]
    assert triplets[0].neutral == "an AI ethics researcher at work"
    assert triplets[0].feminine == "a female AI ethics researcher at work"
    assert triplets[5].neutral == "a photo of an oceanographer"
    assert triplets[5].masculine == "a photo of a male oceanographer"
    with pytest.raises(AuditorError, match="exactly once"):
        profession_triplets(["Chef"], ["a chef"])


def test_profession_data_is_table3():
    topics = load_professions()
    assert len(topics) == 16 and all(len(names) == 20 for names in topics.values())
    assert topics["Science"][0] == "Botanist" and topics["Culinary and Food Services"][-1] == "Food Truck Owner"
    names = [name for group in topics.values() for name in group]
    assert len(set(names)) == 318  # Sommelier and Nutritionist are printed twice
    assert profession_phrase("Chief Executive Officer") == "chief executive officer"
    templates = load_profession_templates()
    triplets = profession_triplets(names, templates)
    assert len(triplets) == 318 * len(templates)
    for triplet in triplets:  # only the profession's article and the gender word differ
        phrase = triplet.profession
        neutral = f"{indefinite_article(phrase)} {phrase}"
        assert neutral in triplet.neutral
        assert triplet.feminine == triplet.neutral.replace(neutral, f"a female {phrase}", 1)
        assert triplet.masculine == triplet.neutral.replace(neutral, f"a male {phrase}", 1)
