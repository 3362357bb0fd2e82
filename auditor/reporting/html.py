"""The self-contained HTML report: ``report.html`` in the run folder.

One file beside ``images/``: images are referenced by their path relative to the run
folder, charts are inline SVG drawn here from the report view (no plotting library, no
script), the style sheet is inline and uses the reader's system fonts, so the folder can
be zipped and opened anywhere without a network. jinja2 runs with autoescape on, so
prompt, LLM and VQA text (in HTML, attributes and SVG alike) is always escaped.
"""

from __future__ import annotations

import json
import math
import os
import textwrap
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from auditor.core.errors import AuditorError
from auditor.core.store import REPORT_FILE
from auditor.records import GeneratedImage, RunRecord
from auditor.reporting.glossary import METRICS
from auditor.reporting.numbers import IntervalLike, cells, number, p_value, written_apart
from auditor.reporting.prompt_audit import build_view
from auditor.reporting.sentences import defined_share, error_line, partial_interval_note, unstated_errors
from auditor.reporting.status import running_now, shown_status
from auditor.reporting.views import AxisView, Concept, ConceptColumn, ImageView, ReportView, SetView
from auditor.reporting.wording import setting_text

if TYPE_CHECKING:
    import jinja2

TEMPLATES = Path(__file__).with_name("templates")
#: Images per prompt set shown in the seed-aligned grid; the rest sit in a "more" fold.
GRID_IMAGES = 8

CAS_COLOUR = "#2e7d32"
BAV_COLOUR = "#e65100"
CONCEPT_COLOUR = "#1565c0"
RUN_A_COLOUR = "#5e35b1"
RUN_B_COLOUR = "#00897b"


# --------------------------------------------------------------------------- SVG bar charts


@dataclass(frozen=True)
class ChartRow:
    """One bar: its wrapped label lines, geometry and printed value; ``missing`` draws no bar, only the text."""

    lines: list[str]
    title: str
    value_text: str
    y: float
    height: float
    bar_y: float
    bar_width: float
    colour: str
    missing: bool = False
    #: x of the interval's ends (an error bar across the bar), or None without an interval.
    whisker: tuple[float, float] | None = None

    @property
    def value_x(self) -> float:
        """Where the printed value starts: after the bar, or after the error bar when that reaches further."""
        return max(self.bar_width, self.whisker[1] if self.whisker else 0.0)


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Chart:
    """A horizontal bar chart laid out in SVG user units; the template only draws it."""

    title: str
    width: float
    height: float
    label_width: float
    plot_width: float
    plot_top: float
    plot_bottom: float
    rows: list[ChartRow]
    ticks: list[Tick]
    axis_label: str


@dataclass(frozen=True)
class Bar:
    """Input of :func:`bar_chart`: a label, a value, how to print it, and a tooltip.

    A value of None (a score that does not exist, e.g. no CAS) gets a row without a bar,
    so the chart still lists it and ``value_text`` says why.
    """

    label: str
    value: float | None
    value_text: str
    title: str = ""
    colour: str = CONCEPT_COLOUR
    #: The value's interval ``(low, high)``, drawn as an error bar.
    interval: tuple[float, float] | None = None


LINE = 14.0
CHAR = 7.0  # generous width of a 12px system-font character, for label layout
VALUE_CHAR = 6.4  # the same for the 11px value labels


def _nice_max(value: float) -> float:
    """Round a chart's upper bound up to a multiple of 0.5 (at least 1), like the paper's [0, 1] / [0, 3] axes."""
    return max(1.0, math.ceil(value * 2 - 1e-9) / 2)


def _wrap(label: str, wrap: int) -> list[str]:
    return textwrap.wrap(label, wrap, break_on_hyphens=False) or [""]


def label_chars(labels: list[str], wrap: int) -> int:
    """Characters of the longest wrapped label line: the label column of a chart (or of a group of charts)."""
    return max((len(line) for label in labels for line in _wrap(label, wrap)), default=4)


def bar_chart(
    bars: list[Bar],
    *,
    title: str,
    axis_label: str,
    scale_max: float,
    width: float = 560,
    wrap: int = 28,
    label_columns: int | None = None,
    value_columns: int | None = None,
) -> Chart:
    """Lay out horizontal bars from 0 to ``scale_max``; long labels wrap onto several lines.

    ``label_columns`` and ``value_columns`` fix the label and value space, so small multiples
    drawn side by side share one scale position.
    """
    wrapped = [_wrap(bar.label, wrap) for bar in bars]
    columns = label_columns or label_chars([bar.label for bar in bars], wrap)
    label_width = min(wrap, max(columns, 4)) * CHAR + 16
    values = value_columns or max((len(bar.value_text) for bar in bars), default=4)
    value_room = values * VALUE_CHAR + 14
    plot_width = max(60.0, width - label_width - value_room)
    rows, y = [], 8.0
    for bar, lines in zip(bars, wrapped, strict=True):
        height = max(22.0, len(lines) * LINE + 8)
        value = 0.0 if bar.value is None else bar.value

        def position(x: float) -> float:
            return round((0.0 if scale_max <= 0 else min(max(x, 0.0), scale_max) / scale_max) * plot_width, 2)

        whisker = (position(bar.interval[0]), position(bar.interval[1])) if bar.interval and bar.value is not None else None
        rows.append(
            ChartRow(
                lines=lines,
                title=bar.title or bar.label,
                value_text=bar.value_text,
                y=y,
                height=height,
                bar_y=y + (height - 14) / 2,
                bar_width=position(value),
                colour=bar.colour,
                missing=bar.value is None,
                whisker=whisker,
            )
        )
        y += height
    fractions = (0, 0.25, 0.5, 0.75, 1) if rows else ()  # no rows: the template says "nothing recorded"
    return Chart(
        title=title,
        width=width,
        height=y + 36 if rows else 36.0,
        label_width=label_width,
        plot_width=plot_width,
        plot_top=4.0,
        plot_bottom=y + 4,
        rows=rows,
        ticks=[Tick(round(label_width + plot_width * f, 2), f"{scale_max * f:g}") for f in fractions],
        axis_label=axis_label,
    )


@dataclass(frozen=True)
class Point:
    """Input of :func:`scatter_chart`: a labelled point with optional intervals on each axis."""

    label: str
    x: float
    y: float
    title: str = ""
    x_interval: tuple[float, float] | None = None
    y_interval: tuple[float, float] | None = None
    colour: str = CONCEPT_COLOUR


@dataclass(frozen=True)
class PlacedPoint:
    """A point in SVG user units, with its error bars' ends (None without an interval)."""

    cx: float
    cy: float
    label: str
    title: str
    colour: str
    x_whisker: tuple[float, float] | None
    y_whisker: tuple[float, float] | None


@dataclass(frozen=True)
class Scatter:
    """A square scatter plot of two percentages with both diagonals, y = x and y = 100 - x (where an amplification
    A = |y - 50| - |x - 50| is 0); the template only draws it.

    ``regions`` are shaded polygons (SVG ``points`` strings) with their CSS class.
    """

    title: str
    width: float
    height: float
    left: float
    top: float
    size: float
    points: list[PlacedPoint]
    ticks: list[tuple[float, str]]
    x_label: str
    y_label: str
    regions: list[tuple[str, str]]


def scatter_chart(
    points: list[Point],
    *,
    title: str,
    x_label: str,
    y_label: str,
    scale_max: float = 100.0,
    size: float = 300,
    regions: list[tuple[str, list[tuple[float, float]]]] | None = None,
) -> Scatter:
    """Lay out points on [0, ``scale_max``] squared; ``regions`` are (CSS class, polygon in data units)."""
    left, top = 48.0, 24.0

    def x_of(value: float) -> float:
        return round(left + min(max(value, 0.0), scale_max) / scale_max * size, 2)

    def y_of(value: float) -> float:
        return round(top + size - min(max(value, 0.0), scale_max) / scale_max * size, 2)

    placed = [
        PlacedPoint(
            cx=x_of(p.x),
            cy=y_of(p.y),
            label=p.label,
            title=p.title or p.label,
            colour=p.colour,
            x_whisker=(x_of(p.x_interval[0]), x_of(p.x_interval[1])) if p.x_interval else None,
            y_whisker=(y_of(p.y_interval[0]), y_of(p.y_interval[1])) if p.y_interval else None,
        )
        for p in points
    ]
    shaded = [
        (css, " ".join(f"{x_of(x)},{y_of(y)}" for x, y in corners)) for css, corners in (regions or [])
    ]
    return Scatter(
        title=title,
        width=left + size + 120,
        height=top + size + 44,
        left=left,
        top=top,
        size=size,
        points=placed,
        ticks=[(round(size * f, 2), f"{scale_max * f:g}") for f in (0, 0.25, 0.5, 0.75, 1)],
        x_label=x_label,
        y_label=y_label,
        regions=shaded,
    )


# --------------------------------------------------------------------------- SVG range charts (signed values)


@dataclass(frozen=True)
class Spread:
    """Input of :func:`range_chart`: one row's values as quartiles and a mean, and optionally a reference value
    the mean is compared with (drawn as an arrow from the reference to the mean)."""

    label: str
    quartiles: tuple[float, float, float] | None
    mean: float | None
    value_text: str
    title: str = ""
    reference: float | None = None


@dataclass(frozen=True)
class PlacedSpread:
    """A row of a :class:`RangeChart` in SVG user units (None: nothing of that kind to draw)."""

    lines: list[str]
    title: str
    value_text: str
    y: float
    middle: float
    box: tuple[float, float] | None
    median: float | None
    mean: float | None
    reference: float | None


@dataclass(frozen=True)
class RangeChart:
    """Rows of signed values around a zero line: quartile boxes, means and references; the template only draws it."""

    title: str
    width: float
    height: float
    label_width: float
    plot_width: float
    zero: float
    plot_bottom: float
    rows: list[PlacedSpread]
    ticks: list[Tick]
    axis_label: str


def _nice_bound(value: float) -> float:
    """The smallest of 1, 2, 2.5 or 5 times a power of ten that is at least ``value`` (0.01 when it is 0 or too
    small to draw)."""
    if not value > 1e-300:  # 0, a subnormal, or NaN: no scale of its own
        return 0.01
    power = 10.0 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= value * (1 - 1e-9))


def range_chart(spreads: list[Spread], *, title: str, axis_label: str, width: float = 760, wrap: int = 24) -> RangeChart:
    """Lay out the rows on one symmetric scale around 0, wide enough for every quartile, mean and reference."""
    values = [
        abs(v)
        for s in spreads
        for v in (*(s.quartiles or ()), s.mean, s.reference)
        if v is not None and math.isfinite(v)
    ]
    bound = _nice_bound(max(values, default=0.0))
    label_width = min(wrap, label_chars([s.label for s in spreads], wrap)) * CHAR + 16
    value_room = max((len(s.value_text) for s in spreads), default=4) * VALUE_CHAR + 14
    plot_width = max(120.0, width - label_width - value_room)

    def x_of(value: float | None) -> float | None:
        if value is None or not math.isfinite(value):
            return None
        return round(label_width + (min(max(value, -bound), bound) + bound) / (2 * bound) * plot_width, 2)

    rows, y = [], 8.0
    for spread in spreads:
        lines = _wrap(spread.label, wrap)
        height = max(26.0, len(lines) * LINE + 10)
        low, median, high = (x_of(q) for q in spread.quartiles) if spread.quartiles else (None, None, None)
        rows.append(
            PlacedSpread(
                lines=lines,
                title=spread.title or spread.label,
                value_text=spread.value_text,
                y=y,
                middle=y + height / 2,
                box=(low, high) if low is not None and high is not None else None,
                median=median,
                mean=x_of(spread.mean),
                reference=x_of(spread.reference),
            )
        )
        y += height
    fractions = (-1, -0.5, 0, 0.5, 1) if rows else ()  # no rows: the template says "nothing recorded"
    return RangeChart(
        title=title,
        width=width,
        height=y + 36 if rows else 36.0,
        label_width=label_width,
        plot_width=plot_width,
        zero=x_of(0.0) or 0.0,
        plot_bottom=y + 4,
        rows=rows,
        ticks=[Tick(x_of(f * bound) or 0.0, f"{f * bound:+g}" if f else "0") for f in fractions],
        axis_label=axis_label,
    )


def concept_charts(columns: list[ConceptColumn], *, axis_label: str) -> list[Chart]:
    """Small multiples, one chart per prompt set on a shared scale (the paper's Figures 19-21)."""
    concepts = [c for column in columns for c in column.concepts]
    scale = _nice_max(max((c.frequency for c in concepts), default=1.0))
    shared = label_chars([c.concept for c in concepts], 14)
    return [
        bar_chart(
            [_concept_bar(c) for c in column.concepts],
            title=column.prompt,
            axis_label=axis_label,
            scale_max=scale,
            width=260,
            wrap=14,
            label_columns=shared,
            value_columns=4,
        )
        for column in columns
    ]


def _concept_bar(concept: Concept) -> Bar:
    return Bar(concept.concept, concept.frequency, f"{concept.frequency:.2f}")


def _bav_bar(axis: AxisView) -> Bar:
    """An axis's bar: its relative BAV, labelled with that and its BAV (small BAVs with the decimals they need)."""
    if axis.bav is None or axis.relative_bav is None:
        return Bar(axis.name, None, "no BAV", axis.bav_note, BAV_COLOUR)
    tooltip = f"relative BAV {number(axis.relative_bav, 2)}"
    if axis.relative_bav_ci is not None:
        _, low, high = written_apart(axis.relative_bav, *axis.relative_bav_ci)
        tooltip += f", interval {low} to {high} (the error bar)"
    tooltip += f"; BAV {number(axis.bav, 4)}"
    if axis.bav_ci is not None:
        _, low, high = written_apart(axis.bav, *axis.bav_ci, 4)
        tooltip += f", interval {low} to {high}"
    label = f"{number(axis.relative_bav, 2)} · {number(axis.bav, 4)}"
    return Bar(axis.name, axis.relative_bav, label, tooltip, BAV_COLOUR, axis.relative_bav_ci)


def _report_charts(view: ReportView) -> dict[str, Any]:
    """Every chart of the report, keyed so the template can find them."""
    bav = bar_chart(
        [_bav_bar(axis) for axis in view.axes],
        title="Relative BAV per axis",
        axis_label="relative BAV (value shown: relative · BAV; error bar: relative BAV's interval, at most 1)",
        scale_max=1.0,
    )
    cas = {
        a.name: bar_chart(
            [
                Bar(cf.label, cf.cas, _number(cf.cas, missing="no CAS"), cf.prompt, CAS_COLOUR, cf.cas_ci)
                for cf in a.counterfactuals  # lowest first, no CAS last, as in the view
            ],
            title=f"CAS of the {a.name} counterfactuals",
            axis_label="CAS with the initial images",
            scale_max=1.0,
        )
        for a in view.axes
    }
    overall = {a.name: concept_charts(a.overall_concepts, axis_label="per image") for a in view.axes}
    aligned = {a.name: concept_charts(a.aligned_concepts, axis_label="per image") for a in view.axes}
    intersections = [concept_charts(i.columns, axis_label="per image") for i in view.intersections]
    initial = concept_charts(
        [ConceptColumn("initial", view.prompt, "initial", view.initial_concepts)], axis_label="per image"
    )
    return {
        "bav": bav,
        "cas": cas,
        "overall": overall,
        "aligned": aligned,
        "intersections": intersections,
        "initial": initial[0],
    }


# --------------------------------------------------------------------------- images


@dataclass(frozen=True)
class ImageCell:
    """An image as the page shows it: a relative URL, or why it cannot be shown."""

    index: int
    seed: int | None
    src: str | None
    missing: str | None
    alt: str
    title: str
    flagged_nsfw: bool
    #: A few words under the image, where what a study decided about it should show without hovering.
    caption: str | None = None


@dataclass(frozen=True)
class ImageLinks:
    """How a page in ``page_dir`` links the images of the run in ``run_dir``: both folders resolved once, not once
    per image (a paper-size page links 1,488 of them).

    Only files inside the run folder are linked, so a tampered record cannot point the
    page at other files on the reader's disk.
    """

    run_dir: Path
    #: ``run_dir`` and ``page_dir`` resolved (links followed).
    root: Path
    page: Path

    @classmethod
    def between(cls, run_dir: Path, page_dir: Path) -> ImageLinks:
        return cls(Path(run_dir), Path(run_dir).resolve(), Path(page_dir).resolve())

    def url(self, file: str) -> tuple[str | None, str | None]:
        """(URL of ``file`` relative to the page, None) or (None, why it is not shown)."""
        posix = PurePosixPath(file.replace("\\", "/"))
        if posix.is_absolute() or ".." in posix.parts:
            return None, "outside the run folder"
        target = self.run_dir / Path(*posix.parts)
        if not target.is_file():
            return None, "file missing"
        resolved = target.resolve()
        if not resolved.is_relative_to(self.root):  # a link in the folder to a file elsewhere
            return None, "outside the run folder"
        relative = Path(os.path.relpath(resolved, self.page))
        return "/".join(quote(part) for part in relative.parts), None


def thumbnail(
    image: GeneratedImage | ImageView, prompt: str, links: ImageLinks, title: str, caption: str | None = None
) -> ImageCell:
    """One image of ``prompt``'s set as a page shows it, ``title`` as its tooltip and ``caption`` under it."""
    src, missing = links.url(image.file)
    return ImageCell(
        index=image.index,
        seed=image.seed,
        src=src,
        missing=missing,
        alt=f"image {image.index} of '{prompt}'",
        title=title,
        flagged_nsfw=image.flagged_nsfw,
        caption=caption,
    )


def image_cells(sets: list[SetView], links: ImageLinks) -> dict[str, list[ImageCell]]:
    """Prompt id -> its images ready for the page, what the VQA model said about each as its tooltip."""
    cells: dict[str, list[ImageCell]] = {}
    for prompt_set in sets:
        row = []
        for image in prompt_set.images:
            said = [f"{axis}: {answer}" for axis, answer in image.answers.items()]
            said += [f"caption: {image.caption}"] if image.caption else []
            row.append(thumbnail(image, prompt_set.prompt, links, "\n".join(said) or f"image {image.index}"))
        cells[prompt_set.prompt_id] = row
    return cells


# --------------------------------------------------------------------------- rendering


def _number(value: float | None, digits: int = 2, signed: bool = False, missing: str = "–") -> str:
    """A number for a table cell; None is ``missing`` (a dash, or what a score that does not exist reads as)."""
    return number(value, digits, signed=signed, missing=missing)


def _cells(
    value: float | None, interval: IntervalLike | None, digits: int = 2, signed: bool = False, missing: str = "–"
) -> tuple[str, str]:
    """A number and its interval written with shared decimals (:func:`~auditor.reporting.numbers.cells`), for the
    ``valued`` macro and a template that styles the number apart; ``signed`` as the terminal writes a difference,
    change or lean."""
    return cells(value, interval, digits, signed=signed, missing=missing)


def template_environment() -> jinja2.Environment:
    """The jinja2 environment of all report templates: autoescape on, undefined names are errors."""
    import jinja2

    from auditor import __version__

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        finalize=bidi_controls_shown,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["number"] = _number
    env.filters["error_line"] = error_line
    env.filters["setting"] = setting_text
    env.filters["json_text"] = json_text
    env.globals["unstated_errors"] = unstated_errors
    env.globals["cells"] = _cells
    env.globals["defined_share"] = defined_share
    env.globals["partial_interval_note"] = partial_interval_note
    env.filters["p_value"] = partial(p_value, missing="–")
    env.globals["metrics"] = METRICS
    env.globals["auditor_version"] = __version__  # every page's generator tag and footer
    return env


#: Unicode's explicit bidirectional controls (embeddings, overrides, isolates) -> how a page shows them.
BIDI_CONTROLS = {code: f"[U+{code:04X}]" for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}


def bidi_controls_shown(value: Any) -> Any:
    """Every value a page prints, with each explicit bidirectional control written as its code point: one in a
    prompt, an LLM's counterfactual or a VQA answer would otherwise reverse how the rest of its line reads (a finding
    spoofed) and be seen by no one. Right-to-left scripts need none of them. Safe markup stays markup."""
    if not isinstance(value, str):
        return value
    shown = value.translate(BIDI_CONTROLS)
    return type(value)(shown) if shown != value else value


def json_text(value: Any) -> str:
    """``value`` as indented JSON for a ``<pre>`` a person reads: escaped as any text is. (Jinja's ``tojson`` is for
    scripts: it writes ``<``, ``&`` and ``'`` as ``\\u003c`` and the like, which a page then shows as they are.)"""
    return json.dumps(value, indent=2, ensure_ascii=False)


def render_page(template: str, **context: Any) -> str:
    """A page: ``template`` rendered with ``context``."""
    return template_environment().get_template(template).render(**context)


def write_run_page(run_dir: Path, template: str, **context: Any) -> Path:
    """Render ``template`` with ``context`` into ``run_dir/report.html`` (atomically; every study's page is this
    file of its run folder) and return its path. A page given its ``record`` also gets ``shown_status``, the status
    as ``auditor runs`` shows it (``stopped`` for a record saying ``running`` that no process runs)."""
    from auditor.core.store import atomic_write_text

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AuditorError(f"run folder {run_dir} does not exist")
    if (record := context.get("record")) is not None:
        context["shown_status"] = shown_status(record.status, running_now(record, run_dir))
    path = run_dir / REPORT_FILE
    atomic_write_text(path, render_page(template, **context))
    return path


def _report_context(view: ReportView, run_dir: Path) -> dict[str, Any]:
    """What the prompt audit's page shows of ``view``, for a page saved in ``run_dir``."""
    initial = [s for s in (view.set_by_id("initial"),) if s is not None]
    axis_sets = {
        axis.name: initial + [s for s in (view.set_by_id(cf.prompt_id) for cf in axis.counterfactuals) if s]
        for axis in view.axes
    }
    return {
        "view": view,
        "axis_sets": axis_sets,
        "charts": _report_charts(view),
        "images": image_cells(view.sets, ImageLinks.between(run_dir, run_dir)),
        "grid_images": GRID_IMAGES,
    }


def write_html_report(record: RunRecord, run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` for ``record`` (atomically) and return its path."""
    view = build_view(record, running_now(record, Path(run_dir)), Path(run_dir))
    return write_run_page(run_dir, "report.html.j2", **_report_context(view, Path(run_dir)))
