"""``auditor score``: TIBET numbers (CAS, BAV, top concepts) from saved answers, without any model.

Takes a result file of the TIBET authors' code or one of our runs (folder, record.json
or run id), recomputes concept histograms from the stored answers and scores them with
the requested CAS normalisation.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from auditor.core.console import notice, out, print_json

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import Scores

#: Concepts shown per prompt set in the table (``--json`` has the record's top-K).
TABLE_TOP_CONCEPTS = 5


class Normalization(str, Enum):
    """CAS histogram normalisation (see ScoringSettings.cas_normalization)."""

    distribution = "distribution"
    frequency = "frequency"


def score(
    source: str = typer.Argument(..., help="TIBET result file (JSON), run folder, record.json or run id."),
    cas_normalization: Normalization | None = typer.Option(
        None,
        "--cas-normalization",
        help="'distribution' rescales histograms to sum 1 before the IoU (authors' code); 'frequency' uses "
        "per-image frequencies (paper Eq. 1-3). Default: the run's setting, 'distribution' for TIBET files.",
    ),
    runs_dir: Path | None = typer.Option(None, "--runs-dir", help="Where run ids are looked up (default: ./runs)."),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Score a TIBET result file or a run from its stored answers: CAS per counterfactual, BAV per axis."""
    normalization = cas_normalization.value if cas_normalization else None
    scores, kind, prompt, location = _score_source(source, normalization, runs_dir)
    for warning in _all_warnings(scores):
        notice(warning)
    if json_output:
        print_json(scores_summary(scores, source=str(location), kind=kind, prompt=prompt))
    else:
        _print_tables(scores, prompt, location)


def _score_source(
    source: str, normalization: str | None, runs_dir: Path | None
) -> tuple[Scores, str, str | None, Path]:
    """Scores, format ('tibet' or 'record'), prompt and resolved location of SOURCE."""
    from auditor.core.errors import AuditorError
    from auditor.core.settings import get_settings
    from auditor.core.store import RECORD_FILE, RunStore, load_json
    from auditor.records import ScoringSettings, load_record
    from auditor.scoring.tibet import score_record, score_tibet_result
    from auditor.scoring.tibet_files import TIBET_KEYS, is_tibet_result, load_tibet_file

    path = Path(source)
    if not path.is_file():
        folder = RunStore(runs_dir or get_settings().runs_dir).resolve(source)
        record = load_record(folder / RECORD_FILE)
        return score_record(record, normalization), "record", record.config.prompt, folder
    data = load_json(path)
    if is_tibet_result(data):
        result = load_tibet_file(path)
        settings = ScoringSettings(cas_normalization=normalization or "distribution")
        return score_tibet_result(result, settings), "tibet", result.prompt, path
    if isinstance(data, dict) and ("run_id" in data or "schema_version" in data):
        record = load_record(path)
        return score_record(record, normalization), "record", record.config.prompt, path
    raise AuditorError(
        f"{path} is neither a TIBET result file (keys {', '.join(TIBET_KEYS)}) nor a run record"
    )


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
                "bav": axis.bav,
                "bav_mad": axis.bav_mad,
                "relative_bav": axis.relative_bav,
                "lean": axis.lean,
                "warnings": [f"{cf.prompt_id}: {w}" for cf in axis.counterfactuals for w in cf.warnings],
            }
            for axis in scores.axes
        },
        "top_concepts": dump["top_concepts"],
        "axis_top_concepts": dump["axis_top_concepts"],
        "intersectionality": dump["intersectionality"],
        "warnings": scores.warnings,
    }


def _all_warnings(scores: Scores) -> list[str]:
    per_pair = [f"{cf.prompt_id}: {w}" for axis in scores.axes for cf in axis.counterfactuals for w in cf.warnings]
    return scores.warnings + per_pair


def _print_tables(scores: Scores, prompt: str | None, source: Path) -> None:
    from rich.table import Table

    title = f"{prompt!r}" if prompt else str(source)
    table = Table(title=f"TIBET scores of {title} (CAS normalisation: {scores.cas_normalization})")
    for column in ("axis", "counterfactual", "CAS", "BAV", "rel. BAV", "BAV (MAD)", "lean"):
        table.add_column(column, justify="left" if column in ("axis", "counterfactual") else "right")
    for axis in scores.axes:
        for k, cf in enumerate(axis.counterfactuals):
            first = k == 0
            lean = f"{axis.lean:+.3f}" if first and axis.lean is not None else ""
            table.add_row(
                axis.axis if first else "",
                cf.prompt + (" [!]" if cf.warnings else ""),
                _number(cf.cas, ".3f", "no CAS"),
                _number(axis.bav, ".4f", "no BAV") if first else "",
                _number(axis.relative_bav, ".2f", "-") if first else "",
                _number(axis.bav_mad, ".3f", "-") if first else "",
                lean,
                end_section=k == len(axis.counterfactuals) - 1,
            )
    out.print(table)
    concepts = Table(title=f"top concepts (per image, top {TABLE_TOP_CONCEPTS})")
    concepts.add_column("prompt set")
    concepts.add_column("concepts")
    for prompt_id, top in scores.top_concepts.items():
        words = ", ".join(f"{item.concept} {item.frequency:.2f}" for item in top[:TABLE_TOP_CONCEPTS])
        concepts.add_row(prompt_id, words or "(none)")
    out.print(concepts)


def _number(value: float | None, spec: str, missing: str) -> str:
    """A table cell: the number, or what stands for a score that does not exist (see the warnings)."""
    return missing if value is None else format(value, spec)


def register(app: typer.Typer) -> None:
    app.command("score")(score)
