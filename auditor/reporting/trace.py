"""The trace report: terminal, ``--json`` and ``report.html``, all read from a :class:`TraceRecord`.

What a reader gets, in the paper's order: per stage (prompt, denoising, image, objects)
whether the neutral prompts are closer to the masculine or the feminine ones (the
paper's Table 5, with intervals); the objects that lean masculine or feminine by bias
score, with counts and intervals, and the human words apart; the χ² tests with
Holm-adjusted p-values and the notes of those skipped; the dependency-group table; and
pictures of a few triplets with the attention map of their gender word.

Sentences claim a side only with evidence recorded beside the number: a stage's
difference only when its interval excludes 0 and its swap test's p, Holm-adjusted over the
stages, is below 1 - the level; an object's lean only when its bias score's interval
excludes 0.5 and its swap test's p, Holm-adjusted over its ranking, is too; a χ²
difference only when its Holm-adjusted p is below alpha. Text from prompts and the VQA model goes into ``rich.text.Text`` in the terminal
and is autoescaped in HTML.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from auditor.core.console import say, say_whole
from auditor.core.store import run_files, run_files_text
from auditor.metrics.trace import significance, smallest_swap_p, triplets_needed
from auditor.records import TRIPLET_SETS, ChiSquareResult, ObjectCount, StageSimilarity, TraceRecord
from auditor.reporting.glossary import METRICS
from auditor.reporting.numbers import number, p_equals, p_value, with_span
from auditor.reporting.sentences import error_line, partial_interval_note, status_phrase
from auditor.reporting.status import running_now
from auditor.reporting.tables import column_table
from auditor.reporting.wording import counted, describe_seeds

#: Triplets listed in full in the reports (the record holds all of them).
TRIPLETS_SHOWN = 10
#: Glossary entries the trace report explains.
TRACE_METRICS = (
    "trace_difference", "swap_p", "sign_p", "co_occurrence", "bias_score", "trace_p_adjusted", "dependency_group",
)  # fmt: skip
GROUP_NAMES = {
    "explicitly_guided": "explicitly guided",
    "implicitly_guided": "implicitly guided",
    "explicitly_independent": "explicitly independent",
    "implicitly_independent": "implicitly independent",
    "hidden": "hidden",
}
SPACE_NAMES = {"prompt": "prompt space", "denoising": "denoising space", "image": "image space", "objects": "objects"}


# --------------------------------------------------------------------------- sentences


def closeness_sentence(row: StageSimilarity) -> str:
    """Which gender the neutral prompts are closer to at one stage, claimed only when the interval excludes 0 and
    the swap test agrees."""
    where = f"{SPACE_NAMES[row.space]}, {row.measure}" + (f" ({row.model})" if row.model else "")
    if row.difference is None:
        return f"{where}: {row.note or 'no pairs'}."
    evidence = f"s(n,m) - s(n,f) = {with_span(row.difference, row.ci, 4, signed=True)}"
    sign = f"; swap test p {p_equals(row.swap_p)}" if row.swap_p is not None else ""
    if row.swap_p_adjusted is not None:
        sign += f", Holm-adjusted over the stages to {p_value(row.swap_p_adjusted)}"
    sign += f"; sign test p {p_equals(row.sign_p)}" if row.sign_p is not None else ""
    triplets = counted(row.units, "triplet")
    if row.closer_to == "undecided":
        why = row.note or "no clear difference"
        return f"{where}: {why} ({evidence} over {triplets}{sign})."
    return f"{where}: neutral prompts are closer to the {row.closer_to} ones ({evidence} over {triplets}{sign})."


def closer_cell(row: StageSimilarity) -> str:
    """The "closer" column: the record's decision, or "–" for a stage with no data (no pair has its measure),
    where no test ran to leave it undecided."""
    return "–" if row.difference is None else row.closer_to


def undecided_notes(record: TraceRecord) -> list[str]:
    """Why stages are undecided where their record says (one triplet: no interval), each reason once with the
    stages it holds for: the table's "closer" column shows only the word."""
    stages: dict[str, list[str]] = {}
    for row in record.similarity:
        if row.closer_to == "undecided" and row.note:
            stages.setdefault(row.note, []).append(short_measure(row))
    every = len(record.similarity)
    return [
        f"{'every stage' if len(names) == every > 1 else ', '.join(names)}: {note}" for note, names in stages.items()
    ]


def too_few_triplets(record: TraceRecord) -> str | None:
    """Why no stage could be called closer to either side whatever the images, when the triplets are too few for
    the swap test (Holm-adjusted over the stages) to go below the level; None when one could have been."""
    tested = [row for row in record.similarity if row.swap_p is not None]
    if not tested:
        return None
    family = len(tested) if adjusted_over_stages(record) else 1
    alpha = significance(record.config.scoring.ci_level)
    draws = record.config.scoring.bootstrap
    if any(family * smallest_swap_p(row.units, draws) < alpha for row in tested):
        return None
    units = max(row.units for row in tested)
    adjusted = f", Holm-adjusted over the {family} stages," if family > 1 else ""  # Holm's p is at most 1
    needed = triplets_needed(family, alpha, draws)
    takes = (
        f"that takes {needed} triplets"
        if needed is not None
        else f"no number of triplets does with --bootstrap {draws} (its p cannot go below 1/{draws + 1}): raise it"
    )
    return (
        f"with {counted(units, 'triplet')} no stage can be called closer to either side: the swap test's smallest "
        f"p{adjusted} is {p_value(min(1.0, family * smallest_swap_p(units, draws)))}, not below {alpha:g}; {takes}"
    )


def lean_lists(ranking: list[ObjectCount], top_k: int) -> tuple[list[ObjectCount], list[ObjectCount]]:
    """The ``top_k`` most masculine (BS > 0.5, highest first) and most feminine (BS < 0.5, lowest first) objects."""
    masculine = [row for row in ranking if row.bias_score is not None and row.bias_score > 0.5][:top_k]
    feminine = sorted(
        (row for row in ranking if row.bias_score is not None and row.bias_score < 0.5),
        key=lambda row: (row.bias_score, row.name),
    )[:top_k]
    return masculine, feminine


def lean_word(row: ObjectCount, level: float) -> str:
    """ "masculine"/"feminine" when the bias score's interval (at ``level``) excludes 0.5 and its swap test's p,
    Holm-adjusted over the ranking, is below 1 - ``level``, else "unclear". A record scored before the adjustment
    is read on its raw p, as its stages' decisions were made (:func:`lean_rule` says so); one scored before the
    swap test has no p and names no lean."""
    ci = row.bias_score_ci
    if ci is None or ci.low is None or ci.high is None or not ci.excludes(0.5):
        return "unclear"
    p = row.bias_score_p if row.bias_score_p_adjusted is None else row.bias_score_p_adjusted
    if p is None or p >= significance(level):
        return "unclear"
    return "masculine" if ci.low > 0.5 else "feminine"


def partial_intervals(rows: list[ObjectCount]) -> list[str]:
    """``hat: the interval is over the 64.5% of resamples in which the number exists``, for each of ``rows`` whose
    bias score is undefined in some resamples (drawn without every triplet where it was seen): such an interval
    can look certain, [0.00, 0.00], from a single triplet."""
    notes = []
    for row in rows:
        if row.bias_score_ci is not None and (partial := partial_interval_note(row.bias_score_ci)) is not None:
            notes.append(f"{row.name}: the interval {partial}")
    return notes


def ranked_when(record: TraceRecord) -> str:
    """``ranked when seen 2 times in a set``: which objects the ranking takes."""
    times = record.config.scoring.min_count
    return f"ranked when seen {counted(int(times), 'time') if times == int(times) else f'{times:g} times'} in a set"


def adjusted_over_stages(record: TraceRecord) -> bool:
    """Whether the record's stage decisions rest on swap p-values Holm-adjusted over the stages: False only for a
    record scored before the adjustment (a swap p without its adjusted value), whose stored decisions rest on the
    raw p. A record with no swap p at all (one triplet) has nothing to adjust."""
    return not any(row.swap_p is not None and row.swap_p_adjusted is None for row in record.similarity)


def lean_rule(record: TraceRecord) -> str:
    """When an object's lean is named, in words (the terminal's, the page's and ``--json``'s), saying how a record
    scored before the swap test or before its adjustment is read."""
    level = f"{1 - record.config.scoring.ci_level:.2g}"
    rule = "masculine or feminine only when the bias score's interval over triplets excludes 0.5 and its swap test's p"
    rescore = "`auditor trace --resume` rescores it from the cache"
    tested = [row for row in record.ranking if row.bias_score_p is not None]
    if any(row.bias_score_ci is not None and row.bias_score_p is None for row in record.ranking):  # an interval, no p
        return f"{rule} is below {level}. This record was scored before the swap test, so it names none: {rescore}."
    if any(row.bias_score_p_adjusted is None for row in tested):
        return (
            f"{rule} is below {level}; unclear otherwise. This record was scored before the p-values were adjusted "
            f"over the ranking: {rescore}."
        )
    family = counted(len(tested), "ranked object") if tested else "ranked objects"
    return f"{rule}, Holm-adjusted over the {family}, is below {level}; unclear otherwise."


def chi_square_summary(record: TraceRecord) -> str:
    """How many χ² tests ran, how their p-values were adjusted, and what they support at alpha."""
    tests = record.chi_square
    ran = [t for t in tests if t.p_value is not None]
    if not tests:
        return "No χ² test was run."
    alpha = record.config.scoring.alpha
    skipped = len(tests) - len(ran)
    summary = f"{len(ran)} of {len(tests)} χ² tests ran"
    summary += f" ({skipped} skipped, see their notes)" if skipped else ""
    if not ran:
        return summary + "; none could be applied, so no difference in object distributions is claimed."
    summary += f"; p-values are Holm-adjusted over the {len(ran)} tests that ran."
    if rough := sum(1 for t in ran if t.note):
        summary += f" {rough} of them had expected counts below 5, where χ² is approximate (see their notes)."
    significant = [t for t in ran if t.p_adjusted is not None and t.p_adjusted < alpha]
    if significant:
        listed = "; ".join(
            f"{_scope(t)}, {_sets(t)} (adjusted p {p_equals(t.p_adjusted)}{', approximate' if t.note else ''})"
            for t in significant
        )
        summary += f" Object distributions differ (adjusted p below {alpha:g}) in: {listed}."
    else:
        summary += f" No adjusted p-value is below {alpha:g}: no difference in object distributions is claimed."
    return summary


def _scope(test: ChiSquareResult) -> str:
    return "all objects" if test.scope == "objects" else GROUP_NAMES.get(test.scope, test.scope)


def _sets(test: ChiSquareResult) -> str:
    return " vs ".join(test.sets)


def _bs(row: ObjectCount) -> str:
    return with_span(row.bias_score, row.bias_score_ci, 2)


# --------------------------------------------------------------------------- JSON


def _counts(row: ObjectCount, level: float) -> dict[str, Any]:
    return row.model_dump(mode="json") | {"lean": lean_word(row, level) if row.bias_score_ci else None}


def trace_json(record: TraceRecord, run_dir: Path) -> dict[str, Any]:
    """What ``auditor trace --json`` prints: the findings, with human words apart from objects."""
    top_k, level = record.config.scoring.top_k, record.config.scoring.ci_level
    masculine, feminine = lean_lists(record.ranking, top_k)
    groups = None
    if record.groups is not None:
        groups = []
        for summary in record.groups:
            group_m, group_f = lean_lists(summary.ranking, top_k)
            groups.append(
                {
                    "group": summary.group,
                    "objects": {name: sum(getattr(r, name) for r in summary.objects) for name in TRIPLET_SETS},
                    "humans": {name: sum(getattr(r, name) for r in summary.humans) for name in TRIPLET_SETS},
                    "images_with": summary.images_with,
                    "masculine_objects": [_counts(r, level) for r in group_m],
                    "feminine_objects": [_counts(r, level) for r in group_f],
                    "human_words": [_counts(r, level) for r in summary.humans],
                }
            )
    ran = [t for t in record.chi_square if t.p_value is not None]
    return {
        **run_files(run_dir),
        "status": record.status,
        "models": [model.spec for model in record.models()],
        "scored": scored(record),
        "triplets": len(record.triplets),
        "seeds": record.config.seeds,
        "selection": record.selection.model_dump(mode="json") if record.selection else None,
        "similarity": [row.model_dump(mode="json") | {"finding": closeness_sentence(row)} for row in record.similarity],
        "set_sizes": record.set_sizes,
        "adjusted_over_stages": adjusted_over_stages(record),
        "too_few_triplets": too_few_triplets(record),
        "lean_rule": lean_rule(record),
        "masculine_objects": [_counts(row, level) for row in masculine],
        "feminine_objects": [_counts(row, level) for row in feminine],
        "human_words": [_counts(row, level) for row in record.humans],
        "interval_notes": partial_intervals([*masculine, *feminine, *record.humans]),
        "chi_square": {
            "tests": len(record.chi_square),
            "ran": len(ran),
            "correction": record.config.scoring.correction,
            "alpha": record.config.scoring.alpha,
            "summary": chi_square_summary(record),
            "results": [test.model_dump(mode="json") for test in record.chi_square],
        },
        "dependency_groups": groups,
        "pictures": [picture.model_dump(mode="json") for picture in record.pictures],
        "notes": list(record.notes),
        "errors": [error.model_dump(mode="json") for error in record.errors],
    }


# --------------------------------------------------------------------------- terminal


#: Short names of the measures, for the terminal's narrow first column.
SHORT_MEASURES = {
    "prompt_eos": "text encoder, EOS",
    "prompt_mean": "text encoder, mean",
    "denoising_z0": "latent z0",
    "image_ssim": "SSIM",
    "objects": "objects s_O",
}


def short_measure(row: StageSimilarity) -> str:
    """ "SSIM", "latent z0", "clip embedding": a measure's name in a few words."""
    return SHORT_MEASURES.get(row.key) or row.measure.replace(" image embedding", " embedding")


def _table(*columns: tuple[str, str], wrapping: tuple[str, ...] = ()) -> Table:
    return column_table(*columns, first_min_width=10, wrapping=wrapping)


def _objects(console: Console, title: str, rows: list[ObjectCount], lean_level: float | None) -> None:
    """A titled table of objects (or human words) with their counts and bias scores, and each one's lean at
    ``lean_level`` unless it is None; "none" when empty."""
    say(console, Text(title, style="bold"))
    if not rows:
        say(console, "  none")
        return
    columns = [("name", "left"), ("BS [interval]", "right"), ("C n", "right"), ("C f", "right"), ("C m", "right")]
    table = _table(*columns, *([("lean", "left")] if lean_level is not None else []))
    for row in rows:
        cells = [Text(row.name), _bs(row), str(row.neutral), str(row.feminine), str(row.masculine)]
        table.add_row(*cells, *([lean_word(row, lean_level)] if lean_level is not None else []))
    console.print(table)


#: Prompt sets by their initial, for the terminal's narrow columns.
SET_INITIALS = {"neutral": "n", "feminine": "f", "masculine": "m"}


def scored(record: TraceRecord) -> bool:
    """Whether the run got as far as scoring its images (:func:`~auditor.scoring.trace.score_trace` always counts
    the usable images of each set); a run stopped before then has no tables to show."""
    return bool(record.set_sizes)


def no_scores(record: TraceRecord, run_dir: Path) -> str | None:
    """What the reports say instead of their tables for a run stopped before scoring (empty tables would read as
    "nothing leans"); None for a scored run."""
    if scored(record):
        return None
    made = sum(len(prompt_set.images) for prompt_set in record.prompt_sets)
    so_far = f"{counted(len(record.triplets), 'triplet')}, {counted(made, 'image')} made so far"
    if running_now(record, run_dir):
        return f"No scores yet: the run is running now and has not scored its images ({so_far})."
    return (
        f"No scores: the run stopped before its images were scored ({so_far}); "
        f"{record.resume_command(run_dir)} goes on with it."
    )


def render_trace(record: TraceRecord, run_dir: Path, console: Console) -> None:
    """The report in the terminal (readable at 80 columns)."""
    config = record.config
    say(console, Text(f"Prompt-to-image {record.subject()}", style="bold"))
    say(console, f"run {record.run_id} {status_phrase(record, run_dir)}; {len(config.seeds)} seed(s) per triplet")
    for error in record.errors:
        say(console, f"error: {error_line(error)}")
    if (instead := no_scores(record, run_dir)) is not None:
        say_whole(console, instead)
        say_whole(console, run_files_text(run_dir))
        return

    say(console, Text("\nIs the neutral prompt closer to the masculine or the feminine one?", style="bold"))
    adjusted = adjusted_over_stages(record)  # else shown as scored: on the raw p
    table = _table(
        ("stage", "left"), ("s(n,f)", "right"), ("s(n,m)", "right"), ("m - f [interval]", "right"),
        ("Holm p" if adjusted else "swap p", "right"), ("sign p", "right"), ("closer", "left"),
        wrapping=("m - f [interval]",),
    )  # fmt: skip
    for row in record.similarity:
        difference = with_span(row.difference, row.ci, 4, signed=True)
        table.add_row(
            Text(short_measure(row)), number(row.mean_neutral_feminine, 4), number(row.mean_neutral_masculine, 4),
            difference, p_value(row.swap_p_adjusted if adjusted else row.swap_p), p_value(row.sign_p),
            closer_cell(row),
        )  # fmt: skip
    console.print(table)
    for row in record.similarity:
        if row.model:
            say(console, Text(f"  {short_measure(row)}: {row.model}"))
    swap = "the swap test's p, Holm-adjusted over the stages," if adjusted else "the swap test's p"
    before = "" if adjusted else " Scored before the p-values were adjusted: auditor trace --resume rescores it."
    say(
        console,
        f"closer: the side the interval of s(n,m) - s(n,f) over triplets supports, when {swap} is below "
        f"{1 - record.config.scoring.ci_level:.2g}; undecided otherwise.{before}",
    )
    if (few := too_few_triplets(record)) is not None:
        say(console, f"note: {few}.")
    for note in undecided_notes(record):
        say(console, f"note: {note}.")

    sizes = ", ".join(f"{name} {record.set_sizes.get(name, 0)}" for name in TRIPLET_SETS)
    say(console, f"\nObjects (images looked at: {sizes}); {ranked_when(record)}.")
    masculine, feminine = lean_lists(record.ranking, config.scoring.top_k)
    _objects(console, "Most masculine objects (bias score BS near 1)", masculine, config.scoring.ci_level)
    _objects(console, "Most feminine objects (BS near 0)", feminine, config.scoring.ci_level)
    if masculine or feminine:
        say(console, f"lean: {lean_rule(record)}")
    humans = sorted(record.humans, key=lambda r: (-(r.neutral + r.feminine + r.masculine), r.name))[
        : 2 * config.scoring.top_k
    ]
    _objects(console, "Human words (counted apart from objects)", humans, None)
    for note in partial_intervals([*masculine, *feminine, *humans]):
        say(console, note)

    say(console, Text("\nχ² tests of the object counts (n, f, m: neutral, feminine, masculine)", style="bold"))
    tests = _table(("table", "left"), ("sets", "left"), ("χ²", "right"), ("p", "right"), ("Holm p", "right"))
    for test in record.chi_square:
        sets = "-".join(SET_INITIALS[name] for name in test.sets)
        skipped = "skipped" if test.p_value is None else p_value(test.p_value)
        tests.add_row(_scope(test), sets, number(test.statistic, 2), skipped, p_value(test.p_adjusted))
    console.print(tests)
    say(console, chi_square_summary(record))
    if any(test.note for test in record.chi_square):
        say(console, "Why tests were skipped, and where expected counts were small: in report.html and --json.")

    if record.groups is not None:
        say(console, Text("\nPrompt-image dependency groups (counts n/f/m)", style="bold"))
        groups = _table(("group", "left"), ("objects", "right"), ("images with", "right"), ("human words", "right"))
        for summary in record.groups:
            totals = "/".join(str(sum(getattr(r, name) for r in summary.objects)) for name in TRIPLET_SETS)
            humans_total = "/".join(str(sum(getattr(r, name) for r in summary.humans)) for name in TRIPLET_SETS)
            images = "/".join(str(summary.images_with[name]) for name in TRIPLET_SETS)
            groups.add_row(GROUP_NAMES[summary.group], totals, images, humans_total)
        console.print(groups)
    if record.pictures:
        say(
            console, f"\nTriplets pictured with their attention maps: {len(record.pictures)} in {run_dir / 'pictures'}"
        )
    for note in record.notes:  # whole: a note may give a command to copy
        say_whole(console, Text(f"note: {note}"))
    say_whole(console, run_files_text(run_dir))


# --------------------------------------------------------------------------- HTML


@dataclass(frozen=True)
class PictureView:
    """A triplet picture as the page shows it."""

    src: str | None
    missing: str | None
    prompts: dict[str, str]
    words: dict[str, str | None]
    #: "triplet 3, seed 42": which images the picture shows (trace is diffusers-only, so every image has a seed).
    heading: str


def write_trace_report(record: TraceRecord, run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` for ``record`` (atomically) and return its path."""
    from auditor.reporting.html import ImageLinks, write_run_page

    run_dir = Path(run_dir)
    links = ImageLinks.between(run_dir, run_dir)
    pictures = []
    seeds = record.config.seeds
    for picture in record.pictures:
        src, missing = links.url(picture.file)
        triplet = record.triplets[picture.triplet]
        index = picture.image_index
        heading = f"triplet {picture.triplet}, " + (f"seed {seeds[index]}" if index < len(seeds) else f"image {index}")
        pictures.append(PictureView(src, missing, dict(triplet.prompts), dict(picture.words), heading))
    top_k = record.config.scoring.top_k
    masculine, feminine = lean_lists(record.ranking, top_k)
    humans = sorted(record.humans, key=lambda r: (-(r.neutral + r.feminine + r.masculine), r.name))
    groups = [
        {"summary": summary, "leans": lean_lists(summary.ranking, top_k), "name": GROUP_NAMES[summary.group]}
        for summary in record.groups or []
    ]
    return write_run_page(
        run_dir,
        "trace.html.j2",
        record=record,
        sets=TRIPLET_SETS,
        findings=[closeness_sentence(row) for row in record.similarity],
        closer_cell=closer_cell,
        too_few_triplets=too_few_triplets(record),
        seeds=describe_seeds(record.config.seeds),
        masculine=masculine,
        feminine=feminine,
        humans=humans,
        interval_notes=partial_intervals([*masculine, *feminine, *humans]),
        ranked_when=ranked_when(record),
        chi_square_summary=chi_square_summary(record),
        lean_rule=lean_rule(record),
        adjusted_over_stages=adjusted_over_stages(record),
        scope=_scope,
        lean_word=partial(lean_word, level=record.config.scoring.ci_level),
        no_scores=no_scores(record, run_dir),
        groups=groups,
        pictures=pictures,
        triplets=record.triplets[:TRIPLETS_SHOWN],
        status_phrase=status_phrase(record, run_dir),
        glossary=[METRICS[key] for key in TRACE_METRICS],
        config=record.config.model_dump(mode="json"),
    )
