"""``report.html`` of the T2IAT studies: a test's S, d and p with the spread of its images' Asc, and the
occupation study's image vs text association per occupation (the paper's Figures 3 and 4), each with
the images behind the numbers.

Like every page, it reads the record only and escapes every text (test names, stimuli,
occupations and prompts come from users).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from auditor.metrics.t2iat import quartiles
from auditor.records import AssociationResult, GeneratedImage, OccupationsRecord, PromptSet, T2IATRecord
from auditor.reporting.glossary import METRICS
from auditor.reporting.html import GRID_IMAGES, ImageCell, ImageLinks, Spread, range_chart, thumbnail, write_run_page
from auditor.reporting.numbers import number, p_value
from auditor.reporting.sentences import association_span, unfinished_note
from auditor.reporting.t2iat import (
    ASSOCIATION_DIGITS,
    EFFECT_SIZE_DIGITS,
    IMAGE_COLUMN,
    TEXT_COLUMN,
    association_reading,
    effect_size_text,
    intervals_note,
    occupation_values,
)
from auditor.reporting.wording import seeds_phrase
from auditor.scoring.t2iat import occupation_ids

#: What a test's page explains, in this order.
TEST_METRICS = ("asc", "test_association", "effect_size", "p_value")
#: What the occupation study's page explains, in this order.
OCCUPATION_METRICS = (
    "asc", "image_association", "text_association", "stereotype_amplification", "occupation_association", "p_value",
)  # fmt: skip


@dataclass(frozen=True)
class ImageRow:
    """One prompt set on the page: its prompt and its first images (URL or why missing, and a tooltip)."""

    label: str
    prompt: str
    images: list[ImageCell]
    more: int


def association_text(result: AssociationResult) -> str:
    """``S = +0.0123 [+0.0050, +0.0190], d = +0.45 [+0.12, +0.80] (small), p = 0.031 (exact over 924 splits)``
    (the intervals where the run made them)."""
    d = effect_size_text(result, EFFECT_SIZE_DIGITS, "undefined")
    how = f"exact over {result.permutations:,} splits" if result.exact else f"{result.permutations:,} permutations"
    return f"S = {association_span(result, ASSOCIATION_DIGITS)}, d = {d}, p = {p_value(result.p_value)} ({how})"


def _image_title(image: GeneratedImage) -> str:
    seed = "" if image.seed is None else f", seed {image.seed}"
    return f"image {image.index}{seed}{' (flagged NSFW)' if image.flagged_nsfw else ''}"


def _shown_phrase(record: T2IATRecord) -> str:
    """Which images the page shows of each prompt: all of them, or the first :data:`GRID_IMAGES`."""
    if all(len(prompt_set.images) <= GRID_IMAGES for prompt_set in record.prompt_sets):
        return "Every image of every prompt"
    return f"The first {GRID_IMAGES} images of every prompt"


def _image_rows(record: T2IATRecord | OccupationsRecord, labelled: list[tuple[str, str]], run_dir: Path) -> list[ImageRow]:
    """(label, prompt set id) -> rows of thumbnails, the first :data:`GRID_IMAGES` of each set."""
    sets: dict[str, PromptSet] = {s.prompt_id: s for s in record.prompt_sets}
    links = ImageLinks.between(run_dir, run_dir)
    rows = []
    for label, prompt_id in labelled:
        prompt_set = sets.get(prompt_id)
        if prompt_set is None:
            continue
        cells = [
            thumbnail(image, prompt_set.prompt, links, _image_title(image))
            for image in prompt_set.images[:GRID_IMAGES]
        ]
        rows.append(ImageRow(label, prompt_set.prompt, cells, max(0, len(prompt_set.images) - GRID_IMAGES)))
    return rows


def test_page(record: T2IATRecord, run_dir: Path) -> dict[str, Any]:
    """What the test's page shows: the result in words, the Asc spread of X's and Y's images, the images."""
    test = record.config.test
    names = {"X": test.x.name, "Y": test.y.name, "A": test.a.name, "B": test.b.name}
    group_names = {
        "X": names["X"], "Y": names["Y"],
        "XA": f"{names['X']} + {names['A']}", "XB": f"{names['X']} + {names['B']}",
        "YA": f"{names['Y']} + {names['A']}", "YB": f"{names['Y']} + {names['B']}",
    }  # fmt: skip
    spreads = []
    for group in ("X", "Y"):
        scores = record.association_scores.get(group, [])
        mean = float(np.mean(scores)) if scores else None
        spreads.append(
            Spread(
                label=f"{group}: {names[group]}",
                quartiles=quartiles(scores) if scores else None,
                mean=mean,
                value_text=(
                    "no usable image" if mean is None else f"mean {number(mean, 4, signed=True)} (n = {len(scores)})"
                ),
                title=f"Asc of {len(scores)} images of {names[group]} against {group}A and {group}B",
            )
        )
    chart = range_chart(
        spreads,
        title=f"Asc of the neutral images: towards {names['A']} (> 0) or {names['B']} (< 0)",
        axis_label=f"Asc (> 0: closer to the {names['A']}-guided images)",
    )
    result = record.result
    reading = None
    if result is not None:
        reading = association_reading(result, names["X"], names["Y"], names["A"], names["B"])
    groups = [
        (group_names[group], _image_rows(record, [(pid, pid) for pid in record.groups.get(group, [])], run_dir))
        for group in ("X", "Y", "XA", "XB", "YA", "YB")
    ]
    return {
        "names": names,
        "chart": chart,
        "summary": association_text(result) if result is not None else None,
        "reading": reading,
        "intervals_note": intervals_note(record),
        "groups": groups,
        "shown": _shown_phrase(record),
        "glossary": [METRICS[key] for key in TEST_METRICS],
    }


def occupations_page(record: OccupationsRecord, run_dir: Path) -> dict[str, Any]:
    """What the occupation study's page shows: Fig. 3 and Fig. 4 in one chart, the table, the images.

    Every occupation of the config is listed, scored or not (a run that stopped before
    scoring still shows the images it made).
    """
    scored = {o.occupation: o for o in record.occupations}
    numbers, places = occupation_values(record)  # the table's values and each column's decimals
    spreads = []
    for occupation in record.config.occupations:
        o = scored.get(occupation)
        if o is None or o.image_association is None:
            spreads.append(
                Spread(
                    label=occupation,
                    quartiles=None,
                    mean=None,
                    reference=None if o is None else o.text_association,
                    value_text="not scored" if o is None else "no usable image",
                )
            )
            continue
        spreads.append(
            Spread(
                label=occupation,
                quartiles=(o.quartiles[0], o.quartiles[1], o.quartiles[2]) if len(o.quartiles) == 3 else None,
                mean=o.image_association,
                reference=o.text_association,
                value_text=f"image {number(o.image_association, places[IMAGE_COLUMN], signed=True)}, text "
                f"{number(o.text_association, places[TEXT_COLUMN], signed=True)}",  # as the table writes them
                title=f"{occupation}: {len(o.image_scores)} neutral images",
            )
        )
    chart = range_chart(
        spreads,
        title="Gender association per occupation: images (box and dot) against the prompts' text (ring)",
        axis_label="Asc (> 0: closer to the male images or prompt)",
    )
    images = {
        occupation: _image_rows(
            record, [(kind, prompt_id) for kind, prompt_id in occupation_ids(occupation).items()], run_dir
        )
        for occupation in record.config.occupations
    }
    return {
        "chart": chart,
        "numbers": numbers,  # the table's, with each column's decimals
        "decimals": places,
        "images": images,
        "glossary": [METRICS[key] for key in OCCUPATION_METRICS],
    }


def write_t2iat_report(record: T2IATRecord | OccupationsRecord, run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` for a T2IAT test or occupation study (atomically) and return its path."""
    run_dir = Path(run_dir)
    page = test_page(record, run_dir) if isinstance(record, T2IATRecord) else occupations_page(record, run_dir)
    return write_run_page(
        run_dir, "t2iat.html.j2", record=record, config=record.config, page=page,
        seeds=seeds_phrase(record.image_seeds()), unfinished=unfinished_note(record, run_dir),
    )  # fmt: skip
