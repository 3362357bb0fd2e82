"""The triplets of a trace run: caption files of every format, the profession set's order, noun sets,
subject words and the words whose attention maps are kept."""

from __future__ import annotations

import json

import pytest

from auditor.core.fingerprint import file_sha256
from auditor.prompting.nouns import default_noun_reader
from auditor.prompting.triplets import Triplet, load_profession_templates
from auditor.studies.trace_triplets import caption_triplets, profession_set, subject_word, trace_triplet, traced_words

CAPTIONS = ["a dog on a sofa", "", "People at a market", "a person and a girl", "a person's bike by a tree"]


@pytest.mark.parametrize("suffix", [".txt", ".csv", ".jsonl", ".parquet"])
def test_caption_files_of_every_format_give_the_same_triplets_and_rows(tmp_path, suffix):
    path = tmp_path / f"captions{suffix}"
    if suffix == ".txt":
        path.write_text("\n".join(CAPTIONS) + "\n", encoding="utf-8")
    elif suffix == ".csv":
        path.write_text("caption\n" + "\n".join(f'"{c}"' for c in CAPTIONS) + "\n", encoding="utf-8")
    elif suffix == ".jsonl":
        path.write_text("".join(json.dumps({"caption": c}) + "\n" for c in CAPTIONS), encoding="utf-8")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"caption": CAPTIONS}), path)
    found, selection = caption_triplets(path.name, None, file_sha256)  # relative, as typed in its folder
    assert [(t.neutral, t.feminine, t.masculine) for t, _, _ in found] == [
        ("People at a market", "Women at a market", "Men at a market"),
        ("a person's bike by a tree", "a woman's bike by a tree", "a man's bike by a tree"),
    ]
    whole = str(path.resolve())  # the record names the file wherever it is read from later
    assert [(file, row) for _, file, row in found] == [(whole, 2), (whole, 4)]  # rows count the blank one
    (read,) = selection.files
    assert (read.path, read.sha256, read.bytes) == (whole, file_sha256(path), path.stat().st_size)
    assert read.format == suffix.lstrip(".") and read.caption_column == (None if suffix == ".txt" else "caption")
    assert (selection.captions, selection.skipped_rows, selection.without_person, selection.with_indicator) == (
        4,
        1,
        1,
        1,
    )
    assert selection.indicator_counts == {"girl": 1} and selection.neutral == 2


def test_the_profession_set_takes_each_template_across_professions_first():
    triplets = profession_set()
    templates = load_profession_templates()
    assert len(triplets) == 318 * len(templates)  # 320 entries of Table 3, 318 distinct
    assert [t.source_id for t in triplets[:3]] == ["botanist#0", "geologist#0", "oceanographer#0"]
    assert triplets[318].source_id == "botanist#1"
    assert triplets[0].feminine == "a female botanist at work" and triplets[0].masculine == "a male botanist at work"


def test_noun_sets_subject_words_and_traced_words():
    reader = default_noun_reader()
    prompts = [f"two {who} playing tennis on a tennis court" for who in ("people", "women", "men")]
    caption = Triplet("caption-0", *prompts)
    record = trace_triplet(0, caption, reader, "captions.txt", 7)
    assert record.nouns["feminine"] == ["woman", "tennis", "tennis court"]
    assert record.subject_words == {"neutral": "people", "feminine": "women", "masculine": "men"}
    assert (record.source_file, record.source_row, record.prompt_ids["masculine"]) == ("captions.txt", 7, "0/masculine")
    words = "two women playing tennis on a tennis court".split()
    assert traced_words(words, record.nouns["feminine"], "women", reader) == ("women", "tennis", "court")
    prompts = [f"{article} AI ethics researcher at work" for article in ("an", "a female", "a male")]
    profession = Triplet("ai ethics researcher#0", *prompts, profession="AI ethics researcher")
    assert subject_word(profession, profession.feminine) == "researcher"
    # The subject word is traced even when the noun reader would not call it a noun.
    assert traced_words(["a", "person", "smiling"], [], "person", reader) == ("person",)
