"""Nouns through WordNet alone (real WordNet 3.0, offline): object vocabulary and prompt noun sets."""

from __future__ import annotations

import pytest

from auditor.prompting.nouns import NounReader, Vocabulary, default_noun_reader, frame_words, object_question


@pytest.fixture(scope="module")
def reader() -> NounReader:
    return default_noun_reader()


def test_object_question_and_frame_words():
    assert object_question() == "List the objects in the image."
    assert {"image", "photo", "object"} <= frame_words()


@pytest.mark.parametrize(
    "word", ["table", "chairs", "sink", "building", "tie", "sign", "umbrella", "grass", "frisbee", "light"]
)
def test_object_words_read_as_nouns(reader, word):
    assert reader.lemma(word) is not None


@pytest.mark.parametrize(
    "word",
    ["white", "red", "small", "two", "left", "standing", "holding", "shows", "wearing", "walking", "the", "is", "x", "wooden"],
)
def test_adjectives_verbs_and_stopwords_do_not(reader, word):
    assert reader.lemma(word) is None


@pytest.mark.parametrize(
    ("word", "lemma"),
    [
        ("chairs", "chair"),
        ("dresses", "dress"),
        ("glasses", "glasses"),  # a noun of its own, not "glass"
        ("pants", "pants"),
        ("men", "man"),  # WordNet's own "men" is the work force: Table 2's plurals win
        ("women", "woman"),
        ("children", "child"),
        ("feet", "foot"),
    ],
)
def test_lemmas(reader, word, lemma):
    assert reader.lemma(word) == lemma


def test_nouns_of_an_answer_keep_order_repeats_and_compounds(reader):
    answer = "The image shows a man standing next to two red umbrellas, a bow tie, cocktail dresses and another man."
    assert reader.nouns(answer) == ["image", "man", "umbrella", "bow tie", "cocktail dress", "man"]
    assert reader.nouns("a t-shirt, tennis courts; a dog-friendly cafe") == ["t-shirt", "tennis court", "dog", "cafe"]
    assert reader.nouns("ice cream, ice; cream") == ["ice cream", "ice", "cream"]  # not across punctuation


def test_a_run_ending_in_a_gender_word_is_not_a_compound(reader):
    # WordNet lists "young woman" and "old man"; the gender word must stay comparable
    assert reader.nouns("young women having a picnic at the park during daytime") == ["woman", "picnic", "park", "daytime"]
    assert reader.nouns("an old man and a police officer") == ["man", "police officer"]


@pytest.mark.parametrize(
    "noun",
    ["person", "people", "man", "woman", "child", "queen", "model", "skier", "chef", "businessman", "police officer"],
)
def test_human_words(reader, noun):
    assert reader.is_human(noun)


@pytest.mark.parametrize("noun", ["crowd", "team", "dog", "hot dog", "mannequin", "statue", "umbrella", "group"])
def test_objects_are_not_human(reader, noun):
    assert not reader.is_human(noun)


def test_vocabulary_splits_humans_from_objects_once_each(reader):
    answer = "a woman, a man, a dog, a frisbee, another dog, a crowd of people, the image background"
    assert reader.vocabulary(answer) == Vocabulary(
        objects=("dog", "frisbee", "crowd", "background"), humans=("woman", "man", "people")
    )
    assert reader.vocabulary("") == Vocabulary(objects=(), humans=())


def test_noun_set_of_a_prompt_keeps_frame_words_and_humans(reader):
    assert reader.noun_set("a photo of a person walking along the street with a person") == ("photo", "person", "street")


def test_lookups_are_cached(reader):
    calls = []
    fresh = NounReader(reader.wordnet)
    original = fresh.wordnet.morphy

    class Counting:
        def __getattr__(self, name):
            return getattr(reader.wordnet, name)

        def morphy(self, *args, **kwargs):
            calls.append(args)
            return original(*args, **kwargs)

    fresh._wordnet = Counting()  # type: ignore[assignment]
    fresh.nouns("dog dog dog")
    first = len(calls)
    fresh.nouns("dog dog dog")
    assert first > 0 and len(calls) == first


@pytest.mark.parametrize(
    "caption",
    ["young people having a picnic at the park during daytime", "An old person's dog on a sofa", "PEOPLE at a market"],
)
def test_triplet_noun_sets_differ_only_in_the_gender_word(reader, caption):
    from auditor.prompting.triplets import select_caption_triplets

    (triplet,) = select_caption_triplets([caption]).triplets
    neutral, feminine, masculine = (reader.noun_set(triplet.prompt(s)) for s in ("neutral", "feminine", "masculine"))
    swap = {"woman": "man"}
    assert tuple(swap.get(noun, noun) for noun in feminine) == masculine
    assert set(neutral) - set(masculine) <= {"person", "people"} and set(masculine) - set(neutral) == {"man"}
