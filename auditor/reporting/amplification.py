"""Bias-amplification reports: terminal, JSON and HTML of a run, and the training side alone.

Like every report these read the record only (or, for ``auditor amplification
captions``, the selections just made). Occupations, prompts and captions are user and
corpus text: the terminal prints them as rich ``Text`` (never markup) and the HTML
template autoescapes them. Wherever T comes from captions rather than images, the words
"caption proxy" stand beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.text import Text

from auditor.core.console import say, say_whole
from auditor.core.store import run_files, run_files_text
from auditor.core.text import first_few
from auditor.corpora.selection import NO_INDICATOR_METHODS, Selection
from auditor.records import (
    AmplificationRecord,
    AmplificationSummary,
    Interval,
    OccupationAmplification,
    Share,
    TBasis,
)
from auditor.reporting.glossary import METRICS
from auditor.reporting.html import GRID_IMAGES, ImageCell, ImageLinks, thumbnail, write_run_page
from auditor.reporting.numbers import p_equals, p_value, with_bounds, with_span
from auditor.reporting.sentences import unfinished_note
from auditor.reporting.tables import column_table
from auditor.reporting.wording import counted, seeds_phrase

#: What the reader is told whenever T is not image-based.
CAPTION_PROXY = (
    "the % female among the selected captions labelled male or female by their gender words, not the % women in "
    "their images (the paper's method)"
)
#: What T is, where it is the caption proxy (the terminal's and --json's words).
T_PROXY = f"T is a caption proxy: {CAPTION_PROXY}"
#: Glossary entries the amplification reports explain.
METRIC_KEYS = ("amplification_g", "amplification_t", "caption_proxy", "amplification", "mean_amplification",
               "amplification_p_value", "flipped")  # fmt: skip
#: A direction of the mean is claimed only when the t-test's adjusted p-value is below this (and the interval excludes 0).
ALPHA = 0.05
AMPLIFIED, DEAMPLIFIED = "amplified", "deamplified"
#: The regions of the G-vs-T plane where |G - 50| > |T - 50| (amplification) and < (de-amplification).
REGIONS = [
    (AMPLIFIED, [(0, 100), (100, 100), (50, 50)]),
    (AMPLIFIED, [(0, 0), (100, 0), (50, 50)]),
    (DEAMPLIFIED, [(0, 0), (0, 100), (50, 50)]),
    (DEAMPLIFIED, [(100, 0), (100, 100), (50, 50)]),
]


# --------------------------------------------------------------------------- numbers as text


def share_text(value: Share, digits: int = 1) -> str:
    """``23.1 [15.2, 33.4]``, or ``–`` without a share (more decimals where fewer would write a share that is not 0
    as 0: :mod:`~auditor.reporting.numbers`)."""
    return with_bounds(value.percent, value.low, value.high, digits, missing="–")


def signed_interval(value: float | None, interval: Interval | None) -> str:
    """``+10.2 [+6.1, +14.3]``, the number alone without an interval, or ``–`` (more decimals where fewer would
    write an amplification that is not 0 as 0)."""
    if value is None:
        return "–"
    return with_span(value, interval, 1, signed=True)


def template_label(template: int | None) -> str:
    return "all prompts" if template is None else f"prompt {template}"


def t_label(basis: TBasis) -> str:
    """How T is named in headers: with the words "caption proxy" when it is one."""
    return "T (caption proxy)" if basis == "caption proxy" else "T"


def finding(summary: AmplificationSummary) -> str:
    """One sentence on a summary row.

    A direction is claimed only when the bootstrap interval of the mean excludes 0 *and*
    the paper's one-sample t-test rejects a mean of 0 at :data:`ALPHA`, its p-value
    Holm-adjusted across the selection methods: with few occupations the percentile
    bootstrap of a mean is too narrow, and the t-test alone says nothing about the size.
    (A record written before adjusted p-values were recorded is read on its raw p.)
    """
    where = f"{summary.method}, {template_label(summary.template)}"
    proxy = " (T: caption proxy)" if summary.basis == "caption proxy" else ""
    if summary.mean is None:
        return f"{where}: no occupation has both G and T{proxy}, so there is no mean amplification."
    number = signed_interval(summary.mean, summary.mean_ci)
    p_claimed = summary.p_adjusted if summary.p_adjusted is not None else summary.p_value
    adjusted = (
        f", Holm-adjusted across the methods to {p_value(p_claimed)}" if p_claimed != summary.p_value else ""
    )
    test = (
        f"; one-sample t-test t = {summary.t_statistic:.2f}, p {p_equals(summary.p_value)} (two-sided){adjusted}"
        if summary.t_statistic is not None
        else "; no t-test (fewer than two occupations, or no spread)"
    )
    occupations = f"over {counted(summary.occupations, 'occupation')}"
    if summary.missing:
        occupations += f" (none for {', '.join(summary.missing)}: no G or no T)"
    if summary.excluded:
        occupations += f"; {', '.join(summary.excluded)} left out by --exclude-flips (G and T lean to opposite sides)"
    ci = summary.mean_ci
    excludes = ci is not None and ci.excludes(0)
    rejects = p_claimed is not None and p_claimed < ALPHA
    if excludes and rejects and summary.mean > 0:
        said = "the generated images lean further from parity than the training examples (amplification)"
    elif excludes and rejects:
        said = "the generated images lean less far from parity than the training examples (de-amplification)"
    elif excludes and p_claimed is None:
        said = "no clear amplification or de-amplification (the interval excludes 0, but a direction needs the t-test too)"
    elif excludes:
        said = f"no clear amplification or de-amplification (the interval excludes 0 but the t-test's{' adjusted' if adjusted else ''} p is not below {ALPHA:g})"
    elif ci is None:
        said = "no clear amplification or de-amplification (one occupation: no interval over occupations)"
    else:
        said = "no clear amplification or de-amplification (the interval includes 0)"
    return f"{where}{proxy}: {said}; mean A {number} points {occupations}{test}."


# --------------------------------------------------------------------------- JSON


def _bounds(value: Share) -> list[float | None] | None:
    return None if value.percent is None else [value.low, value.high]


def amplification_json(record: AmplificationRecord, run_dir: Path) -> dict[str, Any]:
    """What ``auditor amplification run --json`` prints: settings, G, T, A and the summaries as flat rows."""
    config = record.config
    return {
        **run_files(run_dir),
        "status": record.status,
        "basis": record.basis,
        "caption_proxy": T_PROXY if record.basis == "caption proxy" else None,
        "occupations": config.occupations,
        "templates": config.templates,
        "methods": config.methods,
        "settings": {
            "t2i": config.t2i.spec,
            "embedder": config.embedder.spec,
            "text_embedder": config.text_embedder.spec if config.text_embedder else None,
            "face_detector": config.face_detector.name or config.face_detector.spec,
            "threshold": config.classifier.threshold,
            "images_per_prompt": config.images_per_prompt,
            "per_occupation": config.per_occupation,
            "sample_seed": config.sample_seed,
            "names": config.names,
            "exclude_flips": config.exclude_flips,
            "bootstrap": config.bootstrap,
            "ci_seed": config.ci_seed,
            "ci_level": config.ci_level,
        },
        "generated": [
            {
                "occupation": side.occupation,
                "template": side.template,
                "prompt": side.prompt,
                **side.counts.model_dump(exclude={"no_image", "missing"}),
                "g": side.share.percent,
                "g_ci": _bounds(side.share),
            }
            for side in record.generated
        ],
        "training": [
            {
                "occupation": side.occupation,
                "method": side.method,
                "template": side.template,
                "prompt": side.prompt,
                "matched": side.matched,
                "selected": side.selected,
                **side.labels.model_dump(),
                "basis": side.basis,
                "images": side.images.model_dump(exclude={"flagged_nsfw"}) if side.images else None,
                "t": side.share.percent,
                "t_ci": _bounds(side.share),
            }
            for side in record.training
        ],
        "amplification": [_row_json(row) for row in record.amplification],
        "summary": [
            {
                "method": s.method,
                "template": s.template if s.template is not None else "all",
                "basis": s.basis,
                "occupations": s.occupations,
                "mean_a": s.mean,
                "mean_a_ci": s.mean_ci.bounds() if s.mean_ci else None,
                "t_statistic": s.t_statistic,
                "p_value": s.p_value,
                "p_adjusted": s.p_adjusted,
                "excluded": s.excluded,
                "flipped": s.flipped,
                "missing": s.missing,
                "finding": finding(s),
            }
            for s in record.summary
        ],
        "warnings": record.warnings,
        "errors": [error.message for error in record.errors],
        "metrics": {key: METRICS[key].explanation for key in METRIC_KEYS},
    }


def _row_json(row: OccupationAmplification) -> dict[str, Any]:
    return {
        "occupation": row.occupation,
        "method": row.method,
        "template": row.template,
        "g": row.generated.percent,
        "g_ci": _bounds(row.generated),
        "g_n": row.generated.total,
        "t": row.training.percent,
        "t_ci": _bounds(row.training),
        "t_n": row.training.total,
        "basis": row.basis,
        "a": row.amplification,
        "a_ci": row.amplification_ci.bounds() if row.amplification_ci else None,
        "flipped": row.flipped,
        "note": row.note,
    }


# --------------------------------------------------------------------------- terminal


def render_amplification(record: AmplificationRecord, run_dir: Path, console: Console) -> None:
    """The summary table with a sentence per row, then per-occupation tables (the first template), then notes."""
    config = record.config
    say_whole(console, f"Bias amplification of {config.t2i.spec} against the training sample {config.captions}")
    if record.basis == "caption proxy":
        say(console, T_PROXY)
    else:
        say(console, "T: the selected examples' images, through the same face filter and classifier as G")
    say_whole(
        console,
        f"{counted(len(config.occupations), 'occupation')} x {counted(len(config.templates), 'prompt')} x "
        f"{counted(config.images_per_prompt, 'image')}; "
        f"faces: {config.face_detector.name or config.face_detector.spec}; "
        f"classifier: {config.embedder.spec}, threshold {config.classifier.threshold:g}",
    )
    if (unfinished := unfinished_note(record, run_dir)) is not None:
        say_whole(console, unfinished)
    if record.summary:
        console.print(
            Text("Mean amplification A in points (> 0: images further from parity than training)", style="bold")
        )
        table = column_table(
            ("method", "left"), ("prompt", "left"), ("n", "right"), ("mean A [95%]", "right"), ("p", "right"),
            ("Holm p", "right"), first_min_width=10, wrapping={"mean A [95%]"},
        )  # fmt: skip
        for s in record.summary:
            table.add_row(
                Text(s.method), "all" if s.template is None else str(s.template), str(s.occupations),
                signed_interval(s.mean, s.mean_ci), p_value(s.p_value, missing="–"),
                p_value(s.p_adjusted, missing="–"),
            )  # fmt: skip
        console.print(table)
        for s in record.summary:
            if s.template is None or len(config.templates) == 1:
                say(console, finding(s))
    for method in config.methods:
        rows = [r for r in record.amplification if r.method == method and r.template == 1]
        if rows:
            console.print(_occupation_table(rows, method, config.templates[0], record.basis))
            for row in rows:
                if row.note:  # why a cell is empty
                    say(console, f"  {row.occupation}: {row.note}")
    if any(r.template != 1 for r in record.amplification):
        say(console, "The other prompts' tables are in report.html and in --json.")
    for warning in record.warnings:
        say(console, f"note: {warning}")
    say_whole(console, run_files_text(run_dir))


def _occupation_table(rows: Sequence[OccupationAmplification], method: str, template: str, basis: TBasis) -> Group:
    """G, T and A of each occupation under one selection method, to one decimal as on the page: each value may
    break before its interval on a narrow terminal rather than push a column out."""
    shares = ("G % [95%]", f"{t_label(basis)} % [95%]", "A [95%]")
    table = column_table(
        ("occupation", "left"), *((header, "right") for header in shares), ("flip", "left"), first_min_width=10,
        wrapping=set(shares),
    )  # fmt: skip
    for row in rows:
        table.add_row(
            Text(row.occupation),
            share_text(row.generated),
            share_text(row.training),
            signed_interval(row.amplification, row.amplification_ci),
            "yes" if row.flipped else "",
        )
    return Group(Text(f"{method}, prompt 1 ({template})", style="bold"), table)


# --------------------------------------------------------------------------- HTML


def write_amplification_html(record: AmplificationRecord, run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` for ``record`` (atomically) and return its path."""
    return write_run_page(
        run_dir,
        "amplification.html.j2",
        record=record,
        config=record.config,
        seeds=seeds_phrase(record.image_seeds()),
        scatters=_scatters(record),
        undrawn=_undrawn(record),
        point_colours=POINT_COLOURS,
        thumbnails=_thumbnails(record, Path(run_dir)),
        generated={side.prompt_id: side for side in record.generated},
        unfinished=unfinished_note(record, Path(run_dir)),
        findings={(s.method, s.template): finding(s) for s in record.summary},
        signed_interval=signed_interval,
        share_text=share_text,
        t_label=t_label(record.basis),
        caption_proxy=CAPTION_PROXY,
        glossary=[METRICS[key] for key in METRIC_KEYS],
    )


def _scatters(record: AmplificationRecord) -> dict[tuple[str, int], Any]:
    """(method, template) -> the scatter of G against T per occupation, with both diagonals and the shaded regions."""
    from auditor.reporting.html import Point, scatter_chart

    charts = {}
    for method in record.config.methods:
        for template in range(1, len(record.config.templates) + 1):
            rows = [r for r in record.amplification if r.method == method and r.template == template]
            points = [
                Point(
                    label=row.occupation,
                    x=row.training.percent,
                    y=row.generated.percent,
                    title=f"{row.occupation}: G {share_text(row.generated)}, {t_label(row.basis)} "
                    f"{share_text(row.training)}, A {signed_interval(row.amplification, row.amplification_ci)}",
                    x_interval=(row.training.low, row.training.high),
                    y_interval=(row.generated.low, row.generated.high),
                    colour=_point_colour(row),
                )
                for row in rows
                if row.amplification is not None
            ]
            charts[method, template] = scatter_chart(
                points,
                title=f"{method}, {template_label(template)}: G against {t_label(record.basis)}",
                x_label=f"{t_label(record.basis)}: % women in training",
                y_label="G: % women in generated images",
                regions=REGIONS,
            )
    return charts


def _undrawn(record: AmplificationRecord) -> dict[tuple[str, int], str]:
    """(method, template) -> the occupations its scatter leaves out, for want of an A, grouped by why."""
    undrawn: dict[tuple[str, int], dict[str, list[str]]] = {}
    for row in record.amplification:
        if row.amplification is None:
            why = undrawn.setdefault((row.method, row.template), {})
            why.setdefault(row.note or "no A", []).append(row.occupation)
    return {
        key: "; ".join(f"{first_few(occupations)} ({note})" for note, occupations in why.items())
        for key, why in undrawn.items()
    }


#: A point's colour: A's interval above 0 (amplified), below 0 (de-amplified), or neither.
POINT_COLOURS = {"amplified": "#b71c1c", "deamplified": "#1565c0", "undecided": "#757575"}


def _point_colour(row: OccupationAmplification) -> str:
    """Red or blue only where A's interval lies wholly above or below 0: a point on or near the diagonal whose
    interval holds 0 is grey, not the colour of a direction it does not show. Without an interval, A's sign."""
    ci = row.amplification_ci
    if ci is not None and ci.low is not None and ci.high is not None:
        side = ci.low if ci.excludes(0.0) else 0.0
    else:
        side = row.amplification or 0.0
    return POINT_COLOURS["amplified" if side > 0 else "deamplified" if side < 0 else "undecided"]


#: What the face filter decided of an image it did not classify, in the words under its thumbnail.
FACE_CAPTIONS = {
    None: "NSFW-flagged",  # the safety checker blacked it out: no face was looked for
    "no_face": "no face",
    "many_faces": "several faces",
    "small_face": "face too small",
}


def _thumbnails(record: AmplificationRecord, run_dir: Path) -> dict[str, list[ImageCell]]:
    """Prompt id -> its first images, each captioned with the face filter's verdict or the gender decided (the
    tooltip adds P(woman))."""
    links = ImageLinks.between(run_dir, run_dir)
    verdicts = {side.prompt_id: {image.index: image for image in side.images} for side in record.generated}
    cells = {}
    for prompt_set in record.prompt_sets:
        row = []
        for image in prompt_set.images[:GRID_IMAGES]:
            said = verdicts.get(prompt_set.prompt_id, {}).get(image.index)
            title = f"image {image.index}"
            caption = None
            if said is not None:
                verdict = FACE_CAPTIONS.get(said.face, said.face)
                caption = verdict if said.gender is None else said.gender
                title += f": {verdict}"
                if said.gender is not None:
                    title += f", {said.gender} (P(woman) = {said.p_woman:.3f})"
            row.append(thumbnail(image, prompt_set.prompt, links, title, caption))
        cells[prompt_set.prompt_id] = row
    return cells


# --------------------------------------------------------------------------- the training side alone


def _caption_entry(selection: Selection) -> dict[str, Any]:
    counts = selection.counts()
    proxy = selection.caption_proxy()
    return {
        "method": selection.method,
        "matched": selection.matched,
        "n_selected": len(selection.captions),
        **counts,
        "pct_female": proxy.percent,
        "pct_female_ci": _bounds(proxy),
    }


def captions_json(selections: Sequence[Selection], methods: Sequence[str]) -> dict[str, Any]:
    """What ``auditor amplification captions --json`` prints.

    One method: ``{"basis": "caption proxy", "occupations": {NAME: entry}}``. Several:
    ``{"basis": "caption proxy", "methods": {METHOD: {"occupations": {NAME: entry}}}}``, the
    same entry under each method, so a reader of one method's object reads it unchanged.
    An entry is ``{"method", "matched", "n_selected", "male", "female", "both", "none", "pct_female",
    "pct_female_ci"}`` with ``pct_female`` = 100 * female / (male + female) and ``pct_female_ci`` its Wilson interval
    as ``[low, high]``, both null without such captions; ``matched`` counts the captions the keyword matched, of
    which ``n_selected`` were taken.
    """
    by_method = {
        method: {"occupations": {s.occupation: _caption_entry(s) for s in selections if s.method == method}}
        for method in methods
    }
    if len(methods) == 1:
        return {"basis": "caption proxy", **by_method[methods[0]]}
    return {"basis": "caption proxy", "methods": by_method}


def render_captions(
    selections: Sequence[Selection], methods: Sequence[str], template: str, rows: int, skipped: int, console: Console
) -> None:
    """One table per method: matches, selected captions, their labels and the caption proxy with its Wilson interval."""
    say(console, f"Training captions: {rows:,} rows read ({skipped:,} without a caption skipped)")
    indicator_free = any(method in NO_INDICATOR_METHODS for method in methods)
    say(
        console,
        f"% female is a caption proxy: {CAPTION_PROXY}"
        + ("; no-indicator selections have no gendered caption by construction." if indicator_free else "."),
    )
    for method in methods:
        chosen = [s for s in selections if s.method == method]
        ranked = any(s.prompt for s in chosen)
        nearest = f", nearest to {template!r}" if ranked else ""
        console.print(Text(f"{method}{nearest}; % female = caption proxy", style="bold"))
        table = column_table(
            ("occupation", "left"),
            *((header, "right") for header in ("matched", "selected", "male", "female", "both", "none")),
            ("% female [95%]", "right"), first_min_width=10, wrapping={"% female [95%]"},
        )  # fmt: skip
        for s in chosen:
            counts = s.counts()
            proxy = s.caption_proxy()
            shown = "–" if proxy.percent is None else with_bounds(proxy.percent, proxy.low, proxy.high, 1)
            table.add_row(
                Text(s.occupation), f"{s.matched:,}", str(len(s.captions)),
                *(str(counts[k]) for k in ("male", "female", "both", "none")), shown,
            )  # fmt: skip
        console.print(table)
