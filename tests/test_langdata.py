"""Language data: WordNet built offline from system files, stopwords shipped with the package."""

from __future__ import annotations

import pytest

from auditor.core.langdata import (
    LEXNAMES,
    build_wordnet_from_system,
    english_stopwords,
    find_system_wordnet,
    lexnames_text,
    load_wordnet,
)


def test_lexnames_has_the_45_standard_files():
    lines = lexnames_text().splitlines()
    assert len(LEXNAMES) == 45 == len(lines)
    assert lines[0] == "00\tadj.all\t3"
    assert lines[18] == "18\tnoun.person\t1"
    assert lines[44] == "44\tadj.ppl\t3"


def test_stopwords_are_nltks_179_english_words():
    words = english_stopwords()
    assert len(words) == 179
    assert {"the", "a", "is", "wouldn't", "ourselves"} <= words
    assert "image" not in words


def test_wordnet_loads_offline():
    wordnet = load_wordnet()
    assert wordnet.morphy("books") == "book"
    assert "adult_male" in {lemma.name() for synset in wordnet.synsets("man") for lemma in synset.lemmas()}


def test_wordnet_corpus_built_from_system_files_is_readable_by_nltk(tmp_path, monkeypatch):
    source = find_system_wordnet()
    if source is None:
        pytest.skip("no system WordNet files (apt-get install wordnet-base wordnet-sense-index)")
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path), *nltk.data.path])  # NLTK reads only from its data path
    target = build_wordnet_from_system(source, tmp_path / "wordnet")
    reader = WordNetCorpusReader(str(target), None)
    assert reader.synset("pharmacist.n.01").lexname() == "noun.person"
