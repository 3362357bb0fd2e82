"""``auditor score``'s report: TIBET numbers recomputed from stored answers, as tables or JSON.

User text (prompts, concepts, axis names) goes into rich ``Text`` objects, never markup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from auditor.records import Interval, Scores
from auditor.reporting.numbers import with_span
from auditor.reporting.sentences import interval_notes, named_intervals
from auditor.reporting.tables import column_table
from auditor.reporting.wording import prompt_label, resampled

#: Concepts shown per prompt set in the table (``--json`` has the record's top-K).
TABLE_TOP_CONCEPTS = 5
#: The columns whose value and interval break apart on a narrow terminal.
WRAPPING = ("CAS", "BAV", "lean")


def scores_summary(scores: Scores, *, source: str, kind: str, prompt: str | None) -> dict[str, Any]:
    """The JSON ``auditor score`` prints: per-axis numbers keyed by axis, plus the top concepts."""
    dump = scores.model_dump(mode="json")
    return {
        "source": source,
        "format": kind,
        "prompt": prompt,
        "cas_normalization": scores.cas_normalization,
        "axes": {
            axis.axis: {
                "counterfactuals": [cf.prompt for cf in axis.counterfactuals],
                "prompt_ids": [cf.prompt_id for cf in axis.counterfactuals],
                "cas": [cf.cas for cf in axis.counterfactuals],
                "cas_ci": [_bounds(cf.cas_ci) for cf in axis.counterfactuals],
                "bav": axis.bav,
                "bav_ci": _bounds(axis.bav_ci),
                "bav_mad": axis.bav_mad,
                "bav_mad_ci": _bounds(axis.bav_mad_ci),
                "relative_bav": axis.relative_bav,
                "relative_bav_ci": _bounds(axis.relative_bav_ci),
                "ranks_first": axis.ranks_first,
                "lean": axis.lean,
                "lean_ci": _bounds(axis.lean_ci),
                "spread": axis.spread.model_dump(mode="json") if axis.spread else None,
                "warnings": [f"{cf.prompt_id}: {w}" for cf in axis.counterfactuals for w in cf.warnings],
            }
            for axis in scores.axes
        },
        "intervals": scores.intervals.model_dump(mode="json") if scores.intervals else None,
        "top_concepts": dump["top_concepts"],
        "axis_top_concepts": dump["axis_top_concepts"],
        "intersectionality": dump["intersectionality"],
        "warnings": scores.warnings,
        "interval_notes": interval_notes(scores),
    }


def all_warnings(scores: Scores) -> list[str]:
    """Every warning of the scores, the per-counterfactual ones prefixed with their prompt set, then the
    intervals that are not what the method line says."""
    per_pair = [f"{cf.prompt_id}: {w}" for axis in scores.axes for cf in axis.counterfactuals for w in cf.warnings]
    return scores.warnings + per_pair + interval_notes(scores)


def render_scores(scores: Scores, prompt: str | None, source: Path, console: Console, seeded: bool = True) -> None:
    """CAS, BAV and lean per counterfactual and axis, then each prompt set's top concepts (as tables); ``seeded``:
    whether seed i made image i of every set, else the intervals resample image positions (as the run's report
    says)."""
    title = f"{prompt!r}" if prompt else str(source)
    console.print(Text(f"TIBET scores of {title} (CAS normalisation: {scores.cas_normalization})", style="bold"))
    # One row per axis (its numbers), then one per counterfactual, indented, with its CAS: a borderless table of
    # wrapping value columns, so 80 columns hold each number beside its interval and no prompt is cut.
    table = column_table(
        ("axis / counterfactual", "left"), ("CAS", "right"), ("BAV", "right"), ("rel. BAV", "right"),
        ("BAV (MAD)", "right"), ("lean", "right"), first_min_width=14, wrapping=WRAPPING,
    )  # fmt: skip
    for axis in scores.axes:
        table.add_row(
            Text(axis.axis, style="bold"),
            "",
            _number(axis.bav, 4, "no BAV", axis.bav_ci),
            _number(axis.relative_bav, 2, "-"),
            _number(axis.bav_mad, 3, "-"),
            _number(axis.lean, 3, "", axis.lean_ci, signed=True),
        )
        for cf in axis.counterfactuals:
            # what it changes of the prompt ("female"), read at a glance where whole prompts would fill the column
            label = cf.prompt if prompt is None else prompt_label(prompt, cf.prompt)
            table.add_row(Text(f"  {label}" + (" [!]" if cf.warnings else "")), _number(cf.cas, 3, "no CAS", cf.cas_ci))
    console.print(table)
    if scores.intervals is not None:
        i = scores.intervals
        fell_back = any(ci.note for _, ci in named_intervals(scores))
        console.print(
            Text(
                f"[lo, hi]: {i.level:.0%} {i.method} intervals{' (percentile where noted)' if fell_back else ''} "
                f"from {i.resamples} paired-bootstrap resamples of the {resampled(i.seeds, seeded)} "
                f"(--ci-seed {i.seed}). They show how a score moves with other {'seeds' if seeded else 'images'}; "
                "CAS is biased low at small sizes, so compare counterfactuals through their difference: each axis's "
                "spread, with its interval, in --json (and for a run, auditor report).",
                style="dim",
            )
        )
    console.print(Text(f"Top concepts (per image, top {TABLE_TOP_CONCEPTS})", style="bold"))
    concepts = column_table(("prompt set", "left"), ("concepts", "left"), first_min_width=10, wrapping={"concepts"})
    for prompt_id, top in scores.top_concepts.items():
        words = ", ".join(f"{item.concept} {item.frequency:.2f}" for item in top[:TABLE_TOP_CONCEPTS])
        concepts.add_row(Text(prompt_id), Text(words or "(none)"))
    console.print(concepts)


def _number(value: float | None, digits: int, missing: str, ci: Interval | None = None, signed: bool = False) -> str:
    """A table cell: the number with its interval, or what stands for a score that does not exist."""
    if value is None:
        return missing
    return with_span(value, ci, digits, signed=signed)


def _bounds(interval: Interval | None) -> list[float | None] | None:
    return None if interval is None else interval.bounds()
