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


def test_an_unreadable_wordnet_is_one_line_naming_nltks_reason(tmp_path, monkeypatch):
    import zipfile

    import nltk

    from auditor.core.errors import AuditorError

    # A corpus zip without its folder's own entry: present to a glance, unreadable to NLTK.
    (tmp_path / "corpora").mkdir()
    with zipfile.ZipFile(tmp_path / "corpora" / "wordnet.zip", "w") as archive:
        archive.writestr("wordnet/lexnames", lexnames_text())
    monkeypatch.setenv("AUDITOR_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    load_wordnet.cache_clear()
    try:
        with pytest.raises(AuditorError) as raised:
            load_wordnet()
    finally:
        load_wordnet.cache_clear()
    message = str(raised.value)
    assert message.startswith("WordNet could not be loaded: ") and "\n" not in message and "***" not in message
    assert "wordnet" in message.split(": ", 1)[1].lower()


def test_an_unwritable_auditor_home_is_one_line(tmp_path, monkeypatch):
    import nltk

    from auditor.core.errors import AuditorError
    from auditor.core.langdata import ensure_wordnet

    if find_system_wordnet() is None:
        pytest.skip("no system WordNet files to copy")
    home = tmp_path / "a-file"
    home.write_text("not a folder")
    monkeypatch.setenv("AUDITOR_HOME", str(home))
    monkeypatch.setattr(nltk.data, "path", [])  # no corpus anywhere: it must be built under AUDITOR_HOME
    with pytest.raises(AuditorError) as raised:
        ensure_wordnet(try_download=False)
    assert str(raised.value) == (
        f"cannot write WordNet into {home}/nltk_data: Not a directory (AUDITOR_HOME must be a folder auditor can write)"
    )


def test_a_damaged_wordnet_in_auditors_own_folder_is_built_again(tmp_path, monkeypatch):
    """An interrupted build or download leaves a folder that is present but cannot be read: setup makes it again."""
    import nltk

    from auditor.core.langdata import ensure_wordnet, wordnet_complete

    if find_system_wordnet() is None:
        pytest.skip("no system WordNet files to copy")
    monkeypatch.setenv("AUDITOR_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(nltk.data, "path", [])
    own = tmp_path / "home" / "nltk_data" / "corpora" / "wordnet"
    own.mkdir(parents=True)
    (own / "lexnames").write_text(lexnames_text())  # no database files
    assert not wordnet_complete(own)
    assert ensure_wordnet(try_download=False) == own and wordnet_complete(own)


def test_a_damaged_wordnet_elsewhere_is_one_line_naming_it_and_doctor_says_so(tmp_path, monkeypatch):
    """One under NLTK_DATA is not auditor's to delete, and NLTK would read it first."""
    import nltk

    from auditor.core.errors import AuditorError
    from auditor.core.langdata import ensure_wordnet
    from tests.clitools import run_auditor

    monkeypatch.setenv("AUDITOR_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nltk")])
    broken = tmp_path / "nltk" / "corpora" / "wordnet.zip"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"")  # what an interrupted download leaves
    with pytest.raises(AuditorError) as raised:
        ensure_wordnet(try_download=False)
    assert str(raised.value) == f"WordNet at {broken} is incomplete or damaged: delete it, then run `auditor setup`"
    doctor = run_auditor("doctor", env={"AUDITOR_HOME": str(tmp_path / "home")})
    said = "".join(doctor.stdout.split())  # the terminal's width may wrap the line, and fold the long path
    assert "".join(f"wordnet incomplete or damaged ({broken}); run `auditor setup`".split()) in said
