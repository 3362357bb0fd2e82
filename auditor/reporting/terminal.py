"""The rich terminal report: the report view drawn as ranked bars and plain sentences.

Every piece of text that came from a prompt, the LLM or the VQA model is put into a
``rich.text.Text`` (never a markup string), so "[bold]" or "<script>" prints literally.
Tables wrap long prompts instead of cutting them, so the report reads in 80 columns.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from rich.bar import Bar
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from auditor.core.console import say_whole
from auditor.records import RunRecord
from auditor.reporting.glossary import METRICS
from auditor.reporting.numbers import cells, number, with_span
from auditor.reporting.prompt_audit import build_view
from auditor.reporting.sentences import top_axis_phrase
from auditor.reporting.status import running_now
from auditor.reporting.tables import column_table
from auditor.reporting.views import AxisView, Concept, CounterfactualView, ReportView
from auditor.reporting.wording import counted

CAS_COLOUR = "green"
BAV_COLOUR = "dark_orange"
CONCEPT_COLOUR = "blue"
BAR_WIDTH = 20
#: Bars beside interval columns are narrower, so the table still reads in 60 columns.
NARROW_BAR_WIDTH = 10
TOP_CONCEPTS_SHOWN = 10


def _text(*parts: str | tuple[str, str]) -> Text:
    """Plain text from pieces; a ``(text, style)`` pair is styled. No markup is parsed."""
    text = Text()
    for part in parts:
        if isinstance(part, tuple):
            text.append(part[0], style=part[1])
        else:
            text.append(part)
    return text


def _bar_table(*columns: tuple[str, str], bar_width: int = BAR_WIDTH) -> Table:
    """A borderless table; ``columns`` are (header, justify), "bar" for a bar. The first column wraps."""
    return column_table(*columns, first_min_width=8, bar_width=bar_width)


def _section(title: str | Text) -> Group:
    """A section heading: a rule, then the title as wrapping text (a titled rule would cut it short)."""
    heading = title if isinstance(title, Text) else Text(title)
    heading.stylize("bold")
    return Group(Rule(style="dim"), heading)


def _header(view: ReportView) -> Panel:
    status_style = "green" if view.status == "completed" else "red"
    lines = [
        _text(("Prompt  ", "bold"), view.prompt),
        _text(("Run     ", "bold"), view.run_id, "  ", (view.shown_status, status_style), f"  {view.created_at}"),
    ]
    for model in view.models:
        detail = f" ({model.details})" if model.details else ""
        lines.append(_text((f"{model.role:<14}", "dim"), model.spec, (detail, "dim")))
    lines.append(
        _text(
            ("Images  ", "bold"),
            f"{view.images_per_prompt} per prompt, {view.seeding}",
        )
    )
    if view.uncertainty:
        caveat = f". {view.cas_caveat}" if view.cas_caveat else ""
        lines.append(_text(("Uncertainty  ", "bold"), view.uncertainty + caveat))
    lines.append(Text())
    lines.append(_text((view.headline, "bold")))
    return Panel(Group(*lines), title=Text("auditor report", style="bold"), title_align="left", expand=True)


def _ranking(view: ReportView) -> RenderableType:
    intervals = any(axis.bav_ci for axis in view.axes)
    width = NARROW_BAR_WIDTH if intervals else BAR_WIDTH
    columns = [("axis", "left"), ("bar", ""), ("rel.", "right"), ("BAV", "right")]
    table = _bar_table(*columns, *([("interval", "right"), ("top", "right")] if intervals else []), bar_width=width)
    for axis in view.axes:
        row: list[RenderableType] = [
            _text(f"{axis.place}. ", (axis.name, "bold")),
            _bar(axis.relative_bav, BAV_COLOUR, width),
            number(axis.relative_bav),
        ]
        bav, bav_ci = cells(axis.bav, axis.bav_ci, 4, missing="no BAV")
        row.append(bav)
        if intervals:
            top_in = "-" if axis.ranks_first is None else f"{number(axis.ranks_first * 100, 0)}%"
            row += [bav_ci or "-", top_in]
        table.add_row(*row)
    why = [_text((f"{axis.name} has {axis.bav_note}", "dim")) for axis in view.axes if axis.bav_note]
    caption = METRICS["relative_bav"].explanation
    if intervals:
        caption += " Interval: of BAV; top: share of bootstrap resamples in which the axis alone has the largest BAV."
    return Group(_section("Which axes lean most (relative BAV, ranked)"), table, *why, Text(caption, style="dim"))


def _bar(value: float | None, colour: str, width: int = BAR_WIDTH) -> RenderableType:
    """A bar from 0 to 1; nothing for a score that does not exist. Rounded far below a bar's eighth of a cell, so
    values equal but for floating-point noise (tied axes' 1.0 and 0.9999999999999998) draw alike."""
    return Text("") if value is None else Bar(1.0, 0, round(value, 9), width=width, color=colour)


def _cf_prompt(cf: CounterfactualView) -> Text:
    return _text(*[(s.text, "bold") if s.changed else s.text for s in cf.segments])


def _cas_table(axis: AxisView) -> RenderableType:
    """The axis's CAS per counterfactual, with the embedding similarity in a narrow column named under the table."""
    embedding = any(cf.embedding_similarity is not None for cf in axis.counterfactuals)
    intervals = any(cf.cas_ci for cf in axis.counterfactuals)
    columns = [("counterfactual", "left"), ("bar", ""), ("CAS", "right")]
    columns += [("interval", "right")] if intervals else []
    width = NARROW_BAR_WIDTH if intervals else BAR_WIDTH
    table = _bar_table(*columns, *([("emb.", "right")] if embedding else []), bar_width=width)
    for cf in axis.counterfactuals:
        cas, cas_ci = cells(cf.cas, cf.cas_ci, missing="no CAS")
        row: list[RenderableType] = [_cf_prompt(cf), _bar(cf.cas, CAS_COLOUR, width), cas]
        if intervals:
            row.append(cas_ci or "-")
        if embedding:
            row.append(number(cf.embedding_similarity))
        table.add_row(*row)
        for warning in cf.warnings:
            table.add_row(_text(("  warning: ", "yellow"), warning))
    if embedding:
        return Group(table, Text(f"emb.: {METRICS['embedding_similarity'].description}", style="dim"))
    return table


def _concept_table(concepts: list[Concept], title: str) -> RenderableType:
    if not concepts:
        return _text((f"{title}: none recorded", "dim"))
    scale = max(1.0, max(c.frequency for c in concepts))
    table = _bar_table(("concept", "left"), ("bar", ""), ("per image", "right"))
    for concept in concepts[:TOP_CONCEPTS_SHOWN]:
        table.add_row(
            Text(concept.concept),
            Bar(scale, 0, concept.frequency, width=BAR_WIDTH, color=CONCEPT_COLOUR),
            number(concept.frequency),
        )
    return Group(_text((title, "bold")), table)


def _axis(axis: AxisView) -> RenderableType:
    kind = f" ({axis.kind})" if axis.kind else ""
    parts: list[RenderableType] = [
        _section(_text(f"{axis.place}. ", axis.name, kind)),
        Text(axis.finding),
        _text((axis.bav_note, "bold")) if axis.bav_note else
        _text(("BAV ", "bold"), with_span(axis.bav, axis.bav_ci, 4),
              "   relative ", number(axis.relative_bav), "   MAD variant ", number(axis.bav_mad)),
        _text(("CAS per counterfactual, lowest first", "bold")),
        _cas_table(axis),
    ]
    if axis.lean_sentence is not None:
        parts.append(_text((f"{METRICS['lean'].name}: ", "bold"), axis.lean_sentence))
    if axis.association is not None:
        a = axis.association
        how = "exact" if a.exact else "Monte Carlo"
        parts.append(_text(("T2IAT: ", "bold"), a.sentence, (f" [{how}, {a.permutations} splits]", "dim")))
    initial_aligned = axis.aligned_concepts[0].concepts if axis.aligned_concepts else []
    question = f" (asked: {axis.question})" if axis.question else ""
    parts.append(_concept_table(initial_aligned, f"Axis-aligned top concepts of the initial images{question}"))
    return Group(*parts)


def _intersections(view: ReportView) -> Iterable[RenderableType]:
    """The pairs whose axis A is the top-ranked axis; all pairs are in the HTML and JSON reports."""
    top = view.axes[0].name if view.axes else None
    shown = [item for item in view.intersections if item.axis_a == top]
    if not shown:
        return
    yield _section("Intersectionality: axis B's answers across axis A's counterfactuals")
    rest = len(view.intersections) - len(shown)
    more = f"; {counted(rest, 'more pair')} {'is' if rest == 1 else 'are'} in the HTML report and --json" if rest else ""
    yield Text(f"A = {top_axis_phrase(view.axes)}{more}.", style="dim")
    for item in shown:
        answers = "top answers of " + item.axis_b
        # the answers wrap: four long ones would otherwise push the prompt sets' names out of the table
        table = column_table(("prompt set", "left"), (answers, "left"), first_min_width=8, wrapping={answers})
        for column in item.columns:
            top = ", ".join(f"{c.concept} {c.frequency:.2f}" for c in column.concepts[:4]) or "-"
            table.add_row(Text(column.label), Text(top))
        yield _text("A = ", (item.axis_a, "bold"), ", B = ", (item.axis_b, "bold"))
        yield Padding(table, (0, 0, 0, 2))


def _plan(view: ReportView) -> Iterable[RenderableType]:
    yield _section("Plan (axes and counterfactuals; no scores yet)")
    if not view.plan:
        yield Text("No plan was recorded.")
    for axis in view.plan:
        kind = f" ({axis.kind})" if axis.kind else ""
        yield _text((axis.name, "bold"), kind, ("  asked: ", "dim"), axis.question)
        for cf in axis.counterfactuals:
            yield _text("  - ", cf)
    done = sum(1 for s in view.sets if s.images)
    yield _text(f"Prompt sets with images: {done} of {len(view.sets)}.")


def _how_to_read(view: ReportView) -> Iterable[RenderableType]:
    yield _section("How to read these numbers")
    for metric in view.metrics:
        yield _text((metric.name + ": ", "bold"), metric.explanation)


def _notes(view: ReportView) -> Iterable[RenderableType]:
    if view.errors:
        yield _section("Errors")
        yield from (_text(("error: ", "red"), e) for e in view.errors)
    # how a scored run that did not complete ended (the headline says it of a run without scores)
    ended = [f"This run {view.status_phrase}."] if view.scored and view.status != "completed" else []
    if view.notes or ended:
        yield _section("Notes")
        yield from (_text("- ", note) for note in [*ended, *view.notes])


def view_renderables(view: ReportView) -> list[RenderableType]:
    """The report as rich renderables, in display order."""
    parts: list[RenderableType] = [_header(view)]
    if view.scored:
        parts.append(_ranking(view))
        parts += [_axis(axis) for axis in view.axes]
        parts.append(_section("Top concepts of the initial images"))
        parts.append(_concept_table(view.initial_concepts, "All VQA answers and captions"))
        parts += list(_intersections(view))
    else:
        parts += list(_plan(view))
    parts += list(_notes(view))
    parts += list(_how_to_read(view))
    return parts


def render_terminal(record: RunRecord, run_dir: Path | None, console: Console) -> None:
    """Print the report of ``record`` on ``console`` (any width from about 60 columns up), with the arguments every
    study's terminal report takes; with its ``run_dir``, a record that says ``running`` reads as running now or
    stopped, by the folder's lock."""
    view = build_view(record, running_now(record, run_dir), run_dir)
    for part in view_renderables(view):
        console.print(part)
        console.print()
    if view.next_step:  # last, where it is seen, and whole: a command broken at the width would not copy back
        say_whole(console, f"Next: {view.next_step}.")
