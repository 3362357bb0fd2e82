"""English indefinite articles: "a" or "an" by the sound of the next word.

Every prompt auditor writes goes through here when it puts a word after "a"/"an": the
offline planner's counterfactuals, batch templates, exploration frames, the trace's
triplets and T2IAT's occupation prompts, so "a photo of an announcer" is spelled one way
everywhere. The bias-amplification templates' ``{article}`` is the exception: it keeps its
authors' rule (:func:`auditor.corpora.prompts.article`) so prompts match theirs.
"""

from __future__ import annotations

import re
import string

#: Vowel letters sounded as consonants ("a university", "a European", "a one-off").
_A_BEFORE_VOWEL_LETTER = ("uni", "use", "usu", "uti", "ure", "uro", "eu", "ewe", "one", "once", "ubiq", "ufo", "uk")
#: A silent h ("an hour", "an honest broker").
_AN_BEFORE_CONSONANT_LETTER = ("hour", "honest", "honor", "honour", "heir")
#: Letters whose names begin with a vowel sound, for initialisms read letter by letter ("an FBI agent", "a UI designer").
_AN_LETTER_NAMES = frozenset("AEFHILMNORSX")
#: "a"/"an" (any case) ending a text, with the spaces and opening quotes or brackets after it.
_ARTICLE_AT_END = re.compile(r"(?<![\w-])(an?)(\s+[\"'(\[{]*)$", re.IGNORECASE)


def indefinite_article(phrase: str) -> str:
    """"a" or "an" for the word that starts ``phrase``, by its sound.

    An all-capital word of up to three letters, or one without a vowel, is read letter by letter ("an MBA
    student", "a CEO", "an LGBT activist", "an X-ray technician"); a longer one with vowels is read as a word
    ("a NASA engineer"). Otherwise a vowel letter takes "an" except where it sounds as a consonant, and a
    silent h takes "an". A number takes "an" when said with a vowel first ("an 8-bit artist", "an 11-year-old",
    "an 1890s street", "an 18,000-seat arena"; "a 110-year-old").
    """
    first = phrase.split(maxsplit=1)[0].lstrip("\"'([{") if phrase.strip() else ""
    if first[:1].isdigit():
        return "an" if _said_with_a_vowel_first(re.match(r"\d[\d,]*\d|\d", first).group(0)) else "a"
    head = re.split(r"[-/]", first, maxsplit=1)[0]  # "X-ray" sounds like its "X"
    letters = "".join(ch for ch in head if ch.isalpha())
    if not letters:
        return "a"
    if letters.isupper() and (len(letters) <= 3 or not set(letters) & set("AEIOU")):
        return "an" if letters[0] in _AN_LETTER_NAMES else "a"
    lower = letters.lower()
    if lower.startswith(_AN_BEFORE_CONSONANT_LETTER):
        return "an"
    if lower.startswith(_A_BEFORE_VOWEL_LETTER):
        return "a"
    return "an" if lower[0] in "aeiou" else "a"


def _said_with_a_vowel_first(number: str) -> bool:
    """Whether a number (digits, maybe with thousands commas) is said starting with "eight" or "eleven"/"eighteen":
    8..., and 11 or 18 leading a group of thousands (11, 18,000, 11000000) or a year (1890, 1100; not 1,890)."""
    digits = number.replace(",", "")
    if digits.startswith("8"):
        return True
    year = len(digits) == 4 and "," not in number
    return digits[:2] in ("11", "18") and (len(digits) % 3 == 2 or year)


def fix_article(before: str, after: str) -> str:
    """``before + after``, with an "a"/"an" that ends ``before`` made the one ``after`` needs (its case kept).

    In a prompt written all in capitals ("A PHOTO OF A {x}"), capitals are no sign of an initialism: ``after``
    is read as words ("A MAN", not "AN MAN") and the article is written in capitals too."""
    match = _ARTICLE_AT_END.search(before)
    if match is None:
        return before + after
    letters = [ch for ch in before if ch.isalpha()]
    if len(letters) > 1 and all(ch.isupper() for ch in letters):
        article = indefinite_article(after.lower()).upper()
    else:
        article = match_case(indefinite_article(after), match.group(1))
    return before[: match.start()] + article + match.group(2) + after


def filled_template(template: str, values: dict[str, str]) -> str:
    """``template`` (``str.format`` syntax, ``{{``/``}}`` for literal braces) with its placeholders filled, an
    "a"/"an" before each value made to fit it ("a photo of a {occupation}" -> "a photo of an announcer")."""
    text = ""
    for literal, field, _, _ in string.Formatter().parse(template):
        text += literal
        if field is not None:
            text = fix_article(text, values[field])
    return text


def match_case(word: str, like: str) -> str:
    """``word`` written with the capitalisation of ``like`` (all caps, capitalised, or lower)."""
    if len(like) > 1 and like.isupper():
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word
