"""The triplets of a trace run: from a caption file or the profession set, with their noun sets and traced words.

The text side (:mod:`auditor.prompting`) decides what a neutral caption is, how it is
swapped to woman/man, and how "female"/"male" go before a profession; this module feeds
it a caption file through the streaming readers (remembering each caption's file and
row), takes the profession set in an order that makes ``--limit`` useful, and reads each
prompt's noun set, its subject word (whose attention map the pictures show) and, once the
pipeline's tokenizer is known, the words whose attention maps are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.core.errors import AuditorError
from auditor.records import TRIPLET_SETS, CaptionSelection, TraceTriplet
from auditor.records.sources import caption_files_read

if TYPE_CHECKING:  # pragma: no cover
    from auditor.prompting.nouns import NounReader
    from auditor.prompting.triplets import Triplet

#: Words whose attention map a caption triplet's pictures show.
SUBJECT_WORDS = frozenset({"person", "persons", "people", "woman", "women", "man", "men"})


def _position(source_id: str) -> int:
    return int(source_id.rsplit("-", 1)[1])


def caption_triplets(
    pattern: str, column: str | None, digest: Callable[[Path], str]
) -> tuple[list[tuple[Triplet, str, int]], CaptionSelection]:
    """The neutral captions of a caption file (streamed) as triplets, with the file (its absolute path) and row of
    each; the selection names the files read with their sha256 (``digest``, e.g. the cache's memoised one)."""
    from importlib.util import find_spec

    from auditor.corpora.readers import CaptionReader
    from auditor.prompting.triplets import has_person_word, select_caption_triplets

    if find_spec("pyarrow") is None:
        raise AuditorError("reading caption files needs pyarrow: pip install 'auditor[trace]'")
    reader = CaptionReader(pattern, caption_column=column)
    absolute = {path: str(path.resolve()) for path in reader.files}  # once per file, not per caption
    files = caption_files_read(reader, digest, absolute.__getitem__)
    locations: dict[int, tuple[str, int]] = {}

    def captions() -> Iterator[str]:
        position = 0
        for batch in reader:
            for row, text in zip(batch.rows, batch.captions):
                if has_person_word(text):  # only these can become triplets; keep where they came from
                    locations[position] = (absolute[batch.source], row)
                yield text
                position += 1

    selection = select_caption_triplets(captions(), id_prefix="caption")
    summary = CaptionSelection(
        files=files,
        captions=selection.captions,
        skipped_rows=reader.skipped,
        without_person=selection.without_person,
        with_indicator=selection.with_indicator,
        duplicates=selection.duplicates,
        indicator_counts=selection.indicator_counts,
        neutral=len(selection.triplets),
    )
    if not selection.triplets:
        raise AuditorError(
            f"no neutral captions in {pattern}: of {selection.captions} captions, {selection.without_person} have no "
            f"'person'/'people' and {selection.with_indicator} also have a word of the paper's Table 2 "
            f"(woman, boy, ...){f', {selection.duplicates} repeat' if selection.duplicates else ''}"
        )
    return [(t, *locations[_position(t.source_id)]) for t in selection.triplets], summary


def profession_set() -> list[Triplet]:
    """The profession set: Table 3's professions in every built-in template, template by template.

    Ordered by template first, so ``--limit N`` takes N different professions.
    """
    from auditor.prompting.triplets import load_profession_templates, load_professions, profession_triplets

    names = [name for topic in load_professions().values() for name in topic]
    templates = load_profession_templates()
    triplets = profession_triplets(names, templates)
    order = sorted(range(len(triplets)), key=lambda i: (i % len(templates), i // len(templates)))
    return [triplets[i] for i in order]


def subject_word(triplet: Triplet, prompt: str) -> str | None:
    """The word whose attention map pictures the triplet: its person word, or the profession's last word."""
    from auditor.prompting.wordlists import words

    if triplet.profession:
        return (words(triplet.profession) or [None])[-1]
    return next((word for word in words(prompt) if word in SUBJECT_WORDS), None)


def trace_triplet(index: int, triplet: Triplet, reader: NounReader, file: str | None, row: int | None) -> TraceTriplet:
    """The record of one triplet: prompts, set ids and noun sets (traced words come with the tokenizer)."""
    prompts = {name: triplet.prompt(name) for name in TRIPLET_SETS}
    return TraceTriplet(
        index=index,
        source_id=triplet.source_id,
        source_file=file,
        source_row=row,
        profession=triplet.profession,
        prompts=prompts,
        prompt_ids={name: f"{index}/{name}" for name in TRIPLET_SETS},
        nouns={name: list(reader.noun_set(prompt)) for name, prompt in prompts.items()},
        traced_words={name: [] for name in TRIPLET_SETS},
        subject_words={name: subject_word(triplet, prompt) for name, prompt in prompts.items()},
    )


def traced_words(
    prompt_words: list[str], nouns: Collection[str], subject: str | None, reader: NounReader
) -> tuple[str, ...]:
    """The prompt's words (as the tokenizer splits them) whose attention maps are kept.

    A word is kept when it reads as a noun of the prompt's noun set ("women" for "woman"),
    is part of one of its compound nouns ("tennis", "court"), or is the subject word.
    """
    parts = {part for noun in nouns for part in noun.split()}
    chosen: dict[str, None] = {}
    for word in prompt_words:
        if word == subject or word in parts or any(noun in nouns for noun in reader.nouns(word)):
            chosen.setdefault(word, None)
    return tuple(chosen)
