"""One article rule for every prompt auditor writes: "a"/"an" by the sound of the next word."""

from __future__ import annotations

import pytest

from auditor.prompting.articles import fix_article, indefinite_article


@pytest.mark.parametrize(
    ("phrase", "article"),
    [
        ("ecologist", "an"),
        ("doctor", "a"),
        ("female ecologist", "a"),
        ("AI ethics researcher", "an"),
        ("UI designer", "a"),
        ("CNC machinist", "a"),
        ("IT support specialist", "an"),
        ("FBI agent", "an"),
        ("MBA student", "an"),
        ("LGBT activist", "an"),  # four letters, no vowel: read letter by letter
        ("CEO", "a"),
        ("NASA engineer", "a"),  # four letters with vowels: read as a word
        ("X-ray technician", "an"),
        ("U-boat captain", "a"),
        ("e-commerce manager", "an"),
        ("university lecturer", "a"),
        ("European guide", "a"),
        ("one-off", "a"),
        ("hour worker", "an"),
        ("honest broker", "an"),
        ("umbrella", "an"),
        ("8-bit artist", "an"),
        ("11-year-old", "an"),
        ("110-year-old", "a"),
        ("1890s street", "an"),
        ("1100s castle", "an"),
        ("18,000-seat arena", "an"),
        ("180,000 people", "a"),
        ("1,800-mile trip", "a"),  # one thousand eight hundred, not a year
        ("80s singer", "an"),
        ("3D artist", "a"),
        ('"engineer"', "an"),
        ("", "a"),
    ],
)
def test_indefinite_article(phrase, article):
    assert indefinite_article(phrase) == article


@pytest.mark.parametrize(
    ("before", "after", "joined"),
    [
        ("a photo of a ", "accountant", "a photo of an accountant"),
        ("a photo of an ", "FBI agent", "a photo of an FBI agent"),  # a right "an" stays
        ("a photo of an ", "chef", "a photo of a chef"),
        ("A ", "engineer at work", "An engineer at work"),
        ("AN ", "CHEF", "A CHEF"),
        ("A PHOTO OF A ", "MAN", "A PHOTO OF A MAN"),  # all capitals: words, not initialisms
        ("A PHOTO OF A ", "ENGINEER", "A PHOTO OF AN ENGINEER"),
        ("a photo of a ", "MBA student", "a photo of an MBA student"),
        ('a "', 'engineer"', 'an "engineer"'),
        ("a photo of the ", "engineer", "a photo of the engineer"),  # no article to fix
        ("banana ", "engineer", "banana engineer"),  # "a" inside a word is no article
        ("x-a ", "engineer", "x-a engineer"),
    ],
)
def test_fix_article_makes_the_article_before_a_word_fit_it(before, after, joined):
    assert fix_article(before, after) == joined
