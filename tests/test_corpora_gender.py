"""Gender indicators in captions: the authors' word lists, whole-word matching, first names."""

from __future__ import annotations

import pytest

from auditor.core.errors import AuditorError
from auditor.corpora.gender import CaptionLabeller, FirstNames, GenderWords, combine

#: The lists of detect_gender_words in the authors' code/detect_gender_helpers.py.
AUTHORS_MALE = {
    "he", "hes", "he's", "him", "his", "himself", "male", "males", "man", "mans", "men", "mens",
    "boy", "boys", "gent", "gents", "gentleman", "gentlemans", "gentlemen", "gentlemens",
}  # fmt: skip
AUTHORS_FEMALE = {
    "she", "shes", "she's", "her", "hers", "her's", "herself", "female", "females", "woman", "womans",
    "women", "womens", "girl", "girls", "lady", "ladies",
}  # fmt: skip


@pytest.fixture(scope="module")
def words():
    return GenderWords.builtin()


def test_builtin_lists_are_the_authors(words):
    assert words.male == AUTHORS_MALE
    assert words.female == AUTHORS_FEMALE


@pytest.mark.parametrize(
    "caption,label",
    [
        ("He's a great teacher", "male"),  # contraction
        ("she’s at work", "female"),  # typographic apostrophe ends the word "she"
        ("MEN'S haircut at the barber", "male"),  # case and possessive
        ("Womens running shoes", "female"),
        ("mens and womens sizes", "both"),
        ("A portrait of a manager", "none"),  # "man" inside a word
        ("the human resources team", "none"),
        ("a woman engineer", "female"),  # "man" inside "woman" does not count
        ("Portrait (female) mechanic.", "female"),  # punctuation around the word
        ("boy,girl;lady", "both"),
        ("gentlemens club", "male"),
        ("mens_wear catalogue", "none"),  # underscore joins words, as in Python's \b
        ("Hermes bag for a Hershey ad", "none"),  # "her" prefix
        ("Sheriff on duty", "none"),  # "she" prefix
        ("his and hers towels", "both"),
        ("Himself, the chef", "male"),
        ("Spider-Man poster", "male"),  # a hyphen is a word boundary
        ("", "none"),
    ],
)
def test_word_labels(words, caption, label):
    assert words.label(caption) == label


def test_found_words_in_order(words):
    assert words.found("He's with her and HIS men") == ["he's", "her", "his", "men"]


def test_combine_follows_the_authors_rule():
    assert combine(["male"]) == "male"
    assert combine(["none", "female", "female"]) == "female"
    assert combine(["male", "female"]) == "both"
    assert combine(["both"]) == "both"
    assert combine(["none"]) == "none" and combine([]) == "none"


def test_word_lists_are_checked():
    with pytest.raises(AuditorError, match="both male and female"):
        GenderWords(frozenset({"he", "they"}), frozenset({"she", "they"}))
    with pytest.raises(AuditorError, match="'male' and 'female'"):
        GenderWords.from_data({"male": ["he"]}, "words.yaml")


# The authors' notebook (code/detect_gender_indicators.ipynb) shows these captions with the
# labels their spaCy + gender-guesser pipeline gives; the heuristic gets 20 of the 21.
NOTEBOOK = {
    "female": [
        "Future engineer girl Royalty Free Stock Photos",
        "PHOTO: In this picture taken March 8, 2012, Mexican-American singer and reality TV star "
        "Jenni Rivera poses during an interview in Los Angeles.",
        "Homecare assistant helps cooking for an elderly woman Stock Photo",
        "Diana Edulji, Farokh Engineer trade verbal volleys in public",
        "Top Rated Insurance Coverage Attorney in Seattle, WA : Kristine Grelish",
    ],
    "male": [
        "Researcher Dr Warish Ahmed in the CSIRO laboratory",
        "Young male chef in red apron against grey background - stock photo",
        "Hell's Kitchen: Seasons 1 to 4  Volatile superstar Chef Gordon Ramsay cranks up the ovens",
        "A supporter wears a campaign badge as British Labour Party politician Jeremy Corbyn arrives",
        "French writer journalist and artist Gonzague Saint Bris poses during a photo session",
    ],
    "none": [
        "Business credit scores: 6 things every entrepreneur should know",
        "The first jazz musician on the cover of Time Magazine",
        "Portrait of smiling pharmacist at cabinet in pharmacy - WESTF23907",
        "cheerful medical intern holding x-ray in clinic",
    ],
    "both": [
        "Councillor Jan Mason, mayor of Epsom and Ewell, and UCA vice-chancellor, Professor Elaine Thomas",
    ],
}


@pytest.fixture(scope="module")
def names():
    pytest.importorskip("gender_guesser", reason="gender-guesser is not installed (pip install 'auditor[amplification]')")
    return FirstNames()


@pytest.mark.parametrize("label,caption", [(label, c) for label, cs in NOTEBOOK.items() for c in cs])
def test_names_reproduce_the_authors_examples(words, names, label, caption):
    assert CaptionLabeller(words, names).label(caption) == label


def test_name_runs(names):
    # A single capitalised word is not a name; two make a run; initials join it.
    assert names.genders("Portrait of Barbara at work") == []
    assert names.genders("portrait of barbara smith") == []
    assert names.genders("a photo of Barbara Smith") == ["female"]
    assert names.genders("George H. W. Bush, official portrait") == ["male"]
    # All-capital words break a run; the first known name of each run counts.
    assert names.genders("PHOTO Elaine Thomas and Joel Malina") == ["female", "male"]


def test_labeller_without_names_ignores_them(words):
    labeller = CaptionLabeller(words)
    assert labeller.label("a photo of Barbara Smith, teacher") == "none"
    assert labeller.method == "gender words"


def test_labeller_method_says_names_are_a_heuristic(words, names):
    method = CaptionLabeller(words, names).method
    assert "gender-guesser" in method and "spaCy" in method
