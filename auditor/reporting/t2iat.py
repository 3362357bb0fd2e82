"""T2IAT reports: a test's association, the occupation study's table, the built-in tests.

Like every report, these read records (or a scored association) only. Text that came from
a user (test names, stimuli, occupations) is printed literally, never as rich markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from auditor.core.console import say, say_whole
from auditor.core.store import run_files, run_files_text
from auditor.records import (
    AssociationResult,
    OccupationsRecord,
    T2IATRecord,
    T2IATTestDefinition,
)
from auditor.reporting.numbers import decimals, number, p_value, with_span
from auditor.reporting.sentences import (
    OTHER_SEEDS_CAVEAT,
    association_span,
    partial_interval_note,
    seeds_reach_zero,
    unfinished_note,
    why_no_effect_size,
)
from auditor.reporting.tables import column_table, say_facts
from auditor.reporting.wording import counted
from auditor.scoring.uncertainty import no_interval_reason

#: Below this p-value a test's direction is stated without a caveat (the conventional level; the paper reports p).
SIGNIFICANCE = 0.05


def association_reading(result: AssociationResult, x: str, y: str, a: str, b: str) -> str:
    """Which way S points, in words, for the terminal and the page alike: no direction where S is 0, and where p is
    not below :data:`SIGNIFICANCE` no lean claimed, only the way S points and that random regroupings match it.

    A lean p claims while S's interval over seeds reaches 0 says so (:data:`OTHER_SEEDS_CAVEAT`)."""
    towards = a if result.association > 0 else b
    if result.association == 0:
        reading = f"{x} and {y} images lean the same way"
    elif result.p_value >= SIGNIFICANCE:
        reading = f"No clear lean: S points {x} images towards {towards} more than {y} images"
    else:
        reading = f"{x} images lean towards {towards} more than {y} images do"
        if seeds_reach_zero(result):
            reading += f", but {OTHER_SEEDS_CAVEAT}"
    if result.p_value >= SIGNIFICANCE:
        reading += f", but regrouping the images at random gives a difference this large as often (p ≥ {SIGNIFICANCE})"
    return reading


def _p_text(result: AssociationResult) -> str:
    how = f"exact over {result.permutations:,} splits" if result.exact else f"Monte Carlo, {result.permutations:,} permutations"
    return f"{p_value(result.p_value)} ({how})"


#: What a d over the combined sd (``--effect-size-sd combined``) says after its label; the pooled sd says nothing.
COMBINED_SD_NOTE = "sd of X and Y together"


def effect_size_text(result: AssociationResult, digits: int, undefined: str) -> str:
    """d with its interval and label, e.g. ``+0.45 [+0.12, +0.80] (small)``, saying when it divides by the combined
    sd, and when the interval is over only the resamples in which d exists (a draw of seeds with no spread has
    none); ``undefined`` when d is."""
    if result.effect_size is None:
        return undefined
    ci = result.effect_size_ci
    partial = None if ci is None else partial_interval_note(ci)
    notes = [
        result.effect_label,
        *([COMBINED_SD_NOTE] if result.effect_size_sd == "combined" else []),
        *([f"the interval {partial}"] if partial is not None else []),
    ]
    return f"{with_span(result.effect_size, ci, digits, signed=True)} ({'; '.join(notes)})"


#: Decimals of S and of d, in the terminal and on the page alike (more where a small value would read as 0).
ASSOCIATION_DIGITS = 5
EFFECT_SIZE_DIGITS = 3


def render_association(
    result: AssociationResult, x_name: str, y_name: str, console: Console, more: Sequence[tuple[str, str]] = ()
) -> None:
    """S and d (with their intervals over seeds, where the run made them), d's label, p and the group sizes, one
    per line, then ``more`` (label, text) lines alike."""
    d = effect_size_text(result, EFFECT_SIZE_DIGITS, f"undefined (the {why_no_effect_size(result)})")
    facts = [
        ("association S", association_span(result, ASSOCIATION_DIGITS)),
        ("effect size d", d),
        ("p-value", _p_text(result)),
        ("images", f"{x_name}: {result.n_x}, {y_name}: {result.n_y}"),
    ]
    say_facts(console, [*facts, *more])


def intervals_note(record: T2IATRecord) -> str | None:
    """Why S and d have no intervals, for a scored run without them (None otherwise): a bare number would read as
    if its interval had been left out of the page, and the direction then rests on p alone."""
    config = record.config
    if record.result is None or record.intervals is not None:
        return None
    reason = no_interval_reason(config.bootstrap, config.images_per_prompt)
    return None if reason is None else f"no intervals ({reason}); the direction rests on p alone"


def test_run_json(record: T2IATRecord, run_dir: Path) -> dict[str, Any]:
    """What ``auditor t2iat run --json`` prints: the test's names, its result's fields, and the reading the terminal
    states (the sentence that makes or declines the claim; null without a result)."""
    test, result = record.config.test, record.result
    x, y, a, b = test.x.name, test.y.name, test.a.name, test.b.name
    names = {"test": test.name, "title": test.title, "x": x, "y": y, "a": a, "b": b}
    reading = None if result is None else association_reading(result, x, y, a, b)
    return {
        **run_files(run_dir),
        **run_outcome(record),
        **names,
        **(result.model_dump() if result else {}),
        "intervals": record.intervals.model_dump() if record.intervals else None,
        "intervals_note": intervals_note(record),
        "reading": reading,
    }


def run_outcome(record: T2IATRecord | OccupationsRecord) -> dict[str, Any]:
    """How the run ended, for a program reading the JSON: its status and its errors' messages (as the terminal says
    for a run that did not complete), and the models it ran."""
    return {
        "status": record.status,
        "errors": [error.message for error in record.errors],
        "models": [model.spec for model in record.models()],
    }


def _unfinished(record: T2IATRecord | OccupationsRecord, run_dir: Path, console: Console) -> None:
    """For a run that did not complete (``auditor t2iat report``): how it ended, its last error, and the command
    that continues it."""
    if (note := unfinished_note(record, run_dir)) is not None:
        say_whole(console, note)


def render_test_run(record: T2IATRecord, run_dir: Path, console: Console) -> None:
    """A test: which test, how it ended if not completed, its numbers, and which way S points."""
    test, result = record.config.test, record.result
    say(console, f"T2IAT {test.title or test.name}: {test.x.name} vs {test.y.name} with {test.a.name} vs {test.b.name}")
    _unfinished(record, run_dir, console)
    if result is not None:
        note = intervals_note(record)
        reading = association_reading(result, test.x.name, test.y.name, test.a.name, test.b.name)
        more = [*([("intervals", note)] if note is not None else []), ("reading", reading)]
        render_association(result, test.x.name, test.y.name, console, more)
    say_whole(console, run_files_text(run_dir))


def render_test_list(tests: list[T2IATTestDefinition], console: Console) -> None:
    """The built-in tests, one short block each (name and kind, then concepts, attributes and neutral prompt): a
    table of five columns cut the names at 80 columns."""
    for index, test in enumerate(tests):
        if index:
            console.print()
        console.print(Text.assemble((test.name, "bold"), f" ({test.kind})"))
        for label, value in (
            ("concepts X vs Y", f"{test.x.name} vs {test.y.name}"),
            ("attributes A vs B", f"{test.a.name} vs {test.b.name}"),
            ("neutral prompt", test.prompt),
        ):
            console.print(Text(f"  {label:<18} {value}"))


def occupations_json(record: OccupationsRecord, run_dir: Path) -> dict[str, Any]:
    """What ``auditor t2iat occupations --json`` prints: every occupation's numbers, image counts for the scores."""
    return {
        **run_files(run_dir),
        **run_outcome(record),
        "occupations": [
            result.model_dump(exclude={"image_scores", "prompt_ids"}) | {"images": len(result.image_scores)}
            for result in record.occupations
        ],
    }


#: Where :func:`occupation_values` puts the image and the text association in a row.
IMAGE_COLUMN, TEXT_COLUMN = 3, 4


def occupation_values(record: OccupationsRecord) -> tuple[list[tuple[float | None, ...]], list[int]]:
    """Per occupation: the image scores' Q1, median and Q3, the image and text associations, image − text, and S
    against the mix (None where missing); and each column's decimals, 4 or as many more as a small value in it
    needs not to read as 0. The terminal's table and the page's write them alike."""
    rows = [
        (*(result.quartiles or (None, None, None)), result.image_association, result.text_association,
         result.amplification, None if result.test is None else result.test.association)
        for result in record.occupations
    ]  # fmt: skip
    return rows, [decimals(column, 4) for column in zip(*rows)]


def render_occupations(record: OccupationsRecord, run_dir: Path, console: Console) -> None:
    """The occupation study's table (paper Fig. 3 quartiles and Fig. 4 text vs image), then its notes."""
    _unfinished(record, run_dir, console)

    rows, places = occupation_values(record)

    tests = [result.test for result in record.occupations if result.test is not None]
    # a record scored before the occupations' p-values were adjusted shows them as they are, and says so
    adjusted = any(test.p_adjusted is not None for test in tests)
    console.print(Text("Gender association per occupation (> 0: closer to the male images)", style="bold"))
    table = column_table(
        ("occupation", "left"), *((header, "right") for header in ("n", "Q1", "median", "Q3", "image", "text",
                                                                    "image-text", "Holm p" if adjusted else "p")),
        first_min_width=10,
    )  # fmt: skip
    for result, values in zip(record.occupations, rows):
        test = result.test
        table.add_row(
            Text(result.occupation),
            str(len(result.image_scores)),
            # all but the last column, S against the mix, which only the page shows
            *(number(value, digits, signed=True, missing="—") for value, digits in zip(values[:-1], places)),
            p_value(None if test is None else test.p_adjusted if adjusted else test.p_value, missing="—"),
        )
    console.print(table)
    p_note = f"Holm-adjusted over the {counted(len(tests), 'occupation')} tested" if adjusted else "not adjusted"
    console.print(
        "Q1/median/Q3 and image: Asc of the neutral images (Fig. 3); text: the same on the prompts' text "
        f"embeddings; image-text: amplification (Fig. 4); p: neutral images vs a balanced male/female mix "
        f"(permutation test, {p_note})"
    )
    for result in record.occupations:
        for warning in result.warnings:
            say(console, f"note: {result.occupation}: {warning}")
    say_whole(console, run_files_text(run_dir))
