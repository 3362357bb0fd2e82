"""``auditor score``: TIBET numbers (CAS, BAV, top concepts) from saved answers, without any model.

Takes a result file of the TIBET authors' code or one of our runs (folder, record.json
or run id), recomputes concept histograms from the stored answers and scores them with
the requested CAS normalisation.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.core.console import notice, out, print_json

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import Scores


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
    from auditor.reporting.scores import all_warnings, render_scores, scores_summary

    normalization = cas_normalization.value if cas_normalization else None
    scores, kind, prompt, location = _score_source(source, normalization, runs_dir)
    for warning in all_warnings(scores):
        notice(warning)
    if json_output:
        print_json(scores_summary(scores, source=str(location), kind=kind, prompt=prompt))
    else:
        render_scores(scores, prompt, location, out)


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


def register(app: typer.Typer) -> None:
    app.command("score")(score)
