"""Concept words, histograms and WordNet synonym merging (real WordNet, offline)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from auditor.core.langdata import english_stopwords
from auditor.records import ImageAnswers
from auditor.scoring.concepts import (
    LemmaStore,
    SynonymIndex,
    histogram,
    merge_synonyms,
    set_concepts,
    words,
)


@pytest.fixture(scope="module")
def synonyms() -> SynonymIndex:
    return SynonymIndex()


def test_words_follow_the_exact_rules():
    # lower-case; punctuation *removed* (not replaced): "man's" -> "mans", "isn't" -> "isnt" (not a stopword),
    # "yes/no" -> "yesno"; stopwords (the, it, an, of, is), "image", "none", "yes", "no" dropped
    assert words("The Man's coat, isn't it? An IMAGE of yes/no none") == ["mans", "coat", "isnt", "yesno"]
    assert words("Yes. No! none") == []
    assert words("  a  doctor,   a doctor  ") == ["doctor", "doctor"]
    assert len(english_stopwords()) == 179


def test_histogram_divides_by_images_and_drops_rare_words():
    # 200 images: "rare" once -> 0.005 < 0.01 dropped; "edge" twice -> 0.01 kept (not below the floor)
    texts = ["doctor"] * 300 + ["edge"] * 2 + ["rare"]
    assert histogram(texts, 200) == {"doctor": 1.5, "edge": 0.01}
    assert histogram(texts, 200, min_frequency=0.0)["rare"] == 0.005
    assert histogram(["doctor"], 0) == {}


def _answers(*rows: tuple[dict[str, str], str | None]) -> list[ImageAnswers]:
    return [ImageAnswers(image_index=i, answers=answers, caption=caption) for i, (answers, caption) in enumerate(rows)]


def test_set_concepts_overall_and_by_axis():
    answers = _answers(
        ({"gender": "male", "age": "young"}, "a young man in a lab coat"),
        ({"gender": "female", "age": "old"}, "a woman in a lab"),
    )
    found = set_concepts("initial", answers, ["gender", "age"])
    assert found.images_used == 2
    assert found.by_axis == {"gender": {"female": 0.5, "male": 0.5}, "age": {"old": 0.5, "young": 0.5}}
    # overall: young twice (answer + caption), lab twice, the rest once; / 2 images
    assert found.overall == {
        "lab": 1.0,
        "young": 1.0,
        "coat": 0.5,
        "female": 0.5,
        "male": 0.5,
        "man": 0.5,
        "old": 0.5,
        "woman": 0.5,
    }
    without = set_concepts("initial", answers, ["gender"], include_captions=False)
    assert without.overall == {"female": 0.5, "male": 0.5}  # only the listed axes' answers
    assert set(without.by_axis) == {"gender"}


def test_set_concepts_empty_and_inconsistent():
    empty = set_concepts("gender/0", [], ["gender"])
    assert (empty.images_used, empty.overall, empty.by_axis) == (0, {}, {"gender": {}})
    with pytest.raises(ValueError, match="only 1 generated"):
        set_concepts("initial", _answers(({"gender": "male"}, None), ({"gender": "male"}, None)), ["gender"], images_total=1)


def test_chain_merges_into_one_concept(synonyms):
    # store~shop (shop is a lemma of store's synsets), shop~workshop, but store and workshop are not linked
    assert "shop" in synonyms.lemma_names("store") and "workshop" in synonyms.lemma_names("shop")
    assert "workshop" not in synonyms.lemma_names("store") and "store" not in synonyms.lemma_names("workshop")
    p, q = merge_synonyms({"store": 0.5, "doctor": 0.25}, {"workshop": 0.75, "shop": 0.125}, synonyms)
    # component {shop, store, workshop}: combined p+q = store .5, workshop .75, shop .125 -> named "workshop"
    assert p == {"doctor": 0.25, "workshop": 0.5}
    assert q == {"workshop": 0.875}


def test_gender_pairs_and_plurals_merge(synonyms):
    p, q = merge_synonyms({"male": 0.75, "books": 0.5}, {"man": 0.5, "book": 0.25, "female": 0.5, "woman": 0.25}, synonyms)
    # male~man (added link), books~book (morphy: 'books' reaches book's synsets), female~woman (added link);
    # names by combined frequency: books .5 > book .25, male .75 > man .5, female .5 > woman .25
    assert p == {"books": 0.5, "male": 0.75}
    assert q == {"books": 0.25, "female": 0.75, "male": 0.5}


def test_merge_name_ties_go_alphabetically(synonyms):
    p, q = merge_synonyms({"man": 0.5}, {"male": 0.5}, synonyms)
    assert (p, q) == ({"male": 0.5}, {"male": 0.5})


class CountingWordNet:
    """The real WordNet reader, counting ``synsets`` calls per word."""

    def __init__(self):
        from auditor.core.langdata import load_wordnet

        self.wordnet = load_wordnet()
        self.calls: dict[str, int] = {}

    def synsets(self, word):
        self.calls[word] = self.calls.get(word, 0) + 1
        return self.wordnet.synsets(word)

    def get_version(self):
        return self.wordnet.get_version()


def test_each_word_is_looked_up_once_across_pairs():
    wordnet = CountingWordNet()
    index = SynonymIndex(wordnet)  # type: ignore[arg-type]
    initial = {"doctor": 1.0, "coat": 0.5, "man": 0.5}
    for other in ({"doctor": 1.0, "woman": 1.0}, {"physician": 1.0, "coat": 1.0}, {"doctor": 0.5}):
        merge_synonyms(initial, other, index)
    assert wordnet.calls == {"coat": 1, "doctor": 1, "man": 1, "physician": 1, "woman": 1}
    assert index.lookups == 5


class NoWordNet:
    """A WordNet that must not be read: every word is in the store."""

    def synsets(self, word):
        raise AssertionError(f"{word!r} was looked up in WordNet, not read from the store")


def test_a_lemma_store_answers_later_indexes_without_wordnet(tmp_path):
    pairs = [({"doctor": 1.0, "coat": 0.5, "man": 0.5}, {"physician": 1.0, "male": 1.0})]
    wordnet = CountingWordNet()
    first = SynonymIndex(wordnet, LemmaStore(tmp_path / "lemmas.json"))  # type: ignore[arg-type]
    expected = [merge_synonyms(p, q, first) for p, q in pairs]
    assert set(wordnet.calls) == {"coat", "doctor", "male", "man", "physician"}
    stored = json.loads((tmp_path / "lemmas.json").read_text())
    assert stored["version"] == "3.0" and "adult_male" in stored["lemmas"]["man"]

    later = SynonymIndex(NoWordNet(), LemmaStore(tmp_path / "lemmas.json"))  # type: ignore[arg-type]
    assert [merge_synonyms(p, q, later) for p, q in pairs] == expected
    assert later.lookups == 5

    # a word the store lacks is looked up and added; a store that cannot be read is no store
    grown = SynonymIndex(CountingWordNet(), LemmaStore(tmp_path / "lemmas.json"))  # type: ignore[arg-type]
    merge_synonyms({"doctor": 1.0}, {"nurse": 1.0}, grown)
    assert set(json.loads((tmp_path / "lemmas.json").read_text())["lemmas"]) == {
        "coat", "doctor", "male", "man", "nurse", "physician"
    }  # fmt: skip
    (tmp_path / "lemmas.json").write_text("{not json")
    assert LemmaStore(tmp_path / "lemmas.json").lemmas == {}
    (tmp_path / "folder-is-a-file").write_text("")
    unwritable = SynonymIndex(CountingWordNet(), LemmaStore(tmp_path / "folder-is-a-file" / "x.json"))  # type: ignore[arg-type]
    assert merge_synonyms(*pairs[0], unwritable) == expected[0]  # scored all the same, nothing kept


def test_two_processes_filling_one_store_keep_each_others_words(tmp_path):
    path = tmp_path / "lemmas.json"
    first, second = LemmaStore(path), LemmaStore(path)  # both read it before either wrote
    first.add("car", frozenset({"car", "auto"}), "3.0")
    second.add("dog", frozenset({"dog", "domestic_dog"}), "3.0")
    first.save()
    second.save()
    assert LemmaStore(path).lemmas == {"car": frozenset({"car", "auto"}), "dog": frozenset({"dog", "domestic_dog"})}
    other = LemmaStore(path)  # a file of another version (hand-copied) is not mixed in
    other.version, other.lemmas = "2.1", {}
    other.add("cat", frozenset({"cat"}), "2.1")
    other.save()
    assert LemmaStore(path).lemmas == {"cat": frozenset({"cat"})}


def test_a_store_holding_anything_else_is_no_store(tmp_path):
    path = tmp_path / "lemmas.json"
    for text in (
        '{"version": null, "lemmas": {"car": ["auto"]}}',
        '{"version": "3.0", "lemmas": {"car": "automobile"}}',  # a string is no list of names
        '{"version": "3.0", "lemmas": {"car": [1, 2]}}',
        '{"version": "3.0", "lemmas": ["car"]}',
        "[" * 100_000 + "]" * 100_000,  # too deep for the JSON reader
    ):
        path.write_text(text)
        store = LemmaStore(path)
        assert (store.version, store.lemmas) == (None, {}), text[:40]


def test_the_store_is_filled_only_from_auditors_own_wordnet(tmp_path, monkeypatch):
    """A process whose NLTK read another WordNet (here one built elsewhere) keeps none of its lookups."""
    import auditor.scoring.concepts as concepts
    from auditor.core.langdata import (
        build_wordnet_from_system,
        find_system_wordnet,
        load_wordnet,
        reads_auditors_wordnet,
    )

    if find_system_wordnet() is None:
        pytest.skip("no system WordNet files (apt-get install wordnet-base wordnet-sense-index)")
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    assert reads_auditors_wordnet(load_wordnet())
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path), *nltk.data.path])  # NLTK reads only from its data path
    elsewhere = WordNetCorpusReader(str(build_wordnet_from_system(find_system_wordnet(), tmp_path / "wordnet")), None)
    assert not reads_auditors_wordnet(elsewhere)
    monkeypatch.setattr(concepts, "load_wordnet", lambda: elsewhere)
    index = SynonymIndex(store=LemmaStore(tmp_path / "lemmas.json"))
    assert merge_synonyms({"doctor": 1.0}, {"physician": 1.0}, index) == ({"doctor": 1.0}, {"doctor": 1.0})
    assert not (tmp_path / "lemmas.json").exists()


def test_no_store_where_nltk_might_read_another_wordnet(tmp_path, monkeypatch):
    """NLTK skips a data folder writable by others (and reads the next one): then no identity, so no store; and
    auditor's folder goes first on NLTK's path even where NLTK_DATA names it after another."""
    import stat

    import nltk

    from auditor.core.langdata import (
        _register_nltk_path,
        build_wordnet_from_system,
        find_system_wordnet,
        wordnet_identity,
    )

    if find_system_wordnet() is None:
        pytest.skip("no system WordNet files (apt-get install wordnet-base wordnet-sense-index)")
    home = tmp_path / "home"
    monkeypatch.setenv("AUDITOR_HOME", str(home))
    assert wordnet_identity() is None  # no WordNet there yet
    target = build_wordnet_from_system(find_system_wordnet(), home / "nltk_data" / "corpora" / "wordnet")
    identity = wordnet_identity()
    assert identity is not None
    for path in (home / "nltk_data", target, target / "index.noun"):
        path.chmod(path.stat().st_mode | stat.S_IWGRP)
        assert wordnet_identity() is None, path
        path.chmod(path.stat().st_mode & ~stat.S_IWGRP)
    assert wordnet_identity() == identity
    (target / "index.noun").write_bytes((target / "index.noun").read_bytes() + b"\n")
    assert wordnet_identity() not in (None, identity)  # the same folder changed: another store

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "other"), str(home / "nltk_data")])
    _register_nltk_path()
    assert nltk.data.path == [str(home / "nltk_data"), str(tmp_path / "other")]


def test_a_later_process_scores_from_the_store_without_loading_wordnet(tmp_path):
    """The process-wide index keeps its lookups in auditor's home folder: the next process imports no NLTK, gets the
    same merges, and still records the WordNet version its concepts came from."""
    from auditor.core.langdata import build_wordnet_from_system, find_system_wordnet

    source = find_system_wordnet()
    if source is None:
        pytest.skip("no system WordNet files (apt-get install wordnet-base wordnet-sense-index)")
    home = tmp_path / "home"
    build_wordnet_from_system(source, home / "nltk_data" / "corpora" / "wordnet")
    script = (
        "import json, sys\n"
        "from auditor.core.langdata import loaded_wordnet_version\n"
        "from auditor.scoring.concepts import merge_synonyms\n"
        "p, q = merge_synonyms({'doctor': 1.0, 'man': 0.5}, {'physician': 1.0, 'male': 1.0})\n"
        "print(json.dumps([p, q, 'nltk' in sys.modules, loaded_wordnet_version()]))\n"
    )
    env = {**os.environ, "AUDITOR_HOME": str(home), "NLTK_DATA": str(tmp_path / "none")}
    runs = [
        json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                  check=True).stdout)
        for _ in range(2)
    ]  # fmt: skip
    assert runs[0][2] is True and runs[1][2] is False  # the first loaded WordNet; the second read the store
    assert runs[0][:2] == runs[1][:2] and runs[0][0] == {"doctor": 1.0, "male": 0.5}
    assert runs[0][3] == runs[1][3] == "3.0"
    assert len(list((home / "wordnet-lemmas").glob("*.json"))) == 1


def test_merging_is_identical_across_processes(tmp_path):
    """Names, sums and CAS must not depend on set/dict order, i.e. on PYTHONHASHSEED."""
    script = (
        "import json\n"
        "from auditor.scoring.concepts import merge_synonyms\n"
        "from auditor.metrics.tibet import cas\n"
        "p = {w: 0.1 * (i % 3 + 1) for i, w in enumerate("
        "'store shop workshop man male men boy female woman women girl books book doctor physician medic'.split())}\n"
        "q = {w: 0.1 * (i % 4 + 1) for i, w in enumerate("
        "'shop workshop male man women woman book volume physician doctor nurse coat'.split())}\n"
        "mp, mq = merge_synonyms(p, q)\n"
        "print(json.dumps([list(mp.items()), list(mq.items()), cas(mp, mq), cas(mp, mq, 'frequency')]))\n"
    )
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()) as here:
        exec(script, namespace)  # this process: whatever hash seed pytest runs with
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        for seed in ("1", "2")
    ]
    outputs = []
    for run in runs:
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 0, stderr
        outputs.append(stdout)
    assert outputs[0] == outputs[1] == here.getvalue()
    merged_p = dict(json.loads(outputs[0])[0])
    assert "male" in merged_p and "man" not in merged_p and "men" not in merged_p
