"""``auditor score``: TIBET numbers (CAS, BAV, top concepts) from saved answers, without any model.

Takes a result file of the TIBET authors' code or one of our runs (folder, record.json
or run id), recomputes concept histograms from the stored answers and scores them with
the requested CAS normalisation.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from auditor.commands import common
from auditor.core.console import notice, out, print_json

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import Scores


def score(
    source: str = typer.Argument(
        ..., metavar="SOURCE", help="TIBET result file (JSON), run folder, record.json or run id."
    ),
    cas_normalization: common.CasNormalizationChoice | None = common.CAS_NORMALIZATION_OPTIONAL,
    bootstrap: int | None = common.BOOTSTRAP_OPTIONAL,
    ci_method: common.IntervalMethodChoice | None = common.CI_METHOD_OPTIONAL,
    ci_seed: int | None = common.CI_SEED_OPTIONAL,
    runs_dir: Path | None = common.RUNS_DIR,
    json_output: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Score a TIBET result file or a run from its stored answers: CAS per counterfactual, BAV per axis,
    each with its paired-bootstrap interval over seeds."""
    from auditor.reporting.scores import all_warnings, render_scores, scores_summary

    common.check_interval_options(bootstrap, ci_method.value if ci_method else None, ci_seed)
    overrides = {
        "cas_normalization": cas_normalization.value if cas_normalization else None,
        "bootstrap": bootstrap,
        "ci_method": ci_method.value if ci_method else None,
        "ci_seed": ci_seed,
    }
    scores, kind, prompt, location, seeded = _score_source(source, overrides, runs_dir)
    for warning in all_warnings(scores):
        notice(warning)
    if json_output:
        print_json(scores_summary(scores, source=str(location), kind=kind, prompt=prompt))
    else:
        render_scores(scores, prompt, location, out, seeded)


def _score_source(
    source: str, overrides: dict[str, Any], runs_dir: Path | None
) -> tuple[Scores, str, str | None, Path, bool]:
    """Scores, format ('tibet' or 'record'), prompt, resolved location of SOURCE and whether seed i made image i of
    every set (a TIBET file's image i is its seed i; a run's backend may take no seed, as its report says).

    ``overrides`` replace the run's scoring settings where not None. A run recorded
    without intervals (``--bootstrap 0``, or before intervals existed) gets the default
    resamples unless ``--bootstrap`` says otherwise: intervals are what rescoring adds.
    """
    from auditor.core.errors import AuditorError
    from auditor.core.store import RECORD_FILE, load_json
    from auditor.records import ScoringSettings, load_record
    from auditor.scoring.intervals import score_run, score_tibet_file
    from auditor.scoring.tibet_files import TIBET_KEYS, is_tibet_result, load_tibet_file

    given = {name: value for name, value in overrides.items() if value is not None}

    def settings_of(base: ScoringSettings) -> ScoringSettings:
        changed = {"bootstrap": ScoringSettings().bootstrap} if base.bootstrap == 0 else {}
        return ScoringSettings.model_validate({**base.model_dump(), **changed, **given})

    location = Path(source)
    if location.is_file():
        data = load_json(location)
        is_record = isinstance(data, dict) and ("run_id" in data or "schema_version" in data)
        if not is_record and is_tibet_result(data):  # a record first: another study's may have a 'result' key
            result = load_tibet_file(location)
            return score_tibet_file(result, settings_of(ScoringSettings())), "tibet", result.prompt, location, True
        if not is_record:
            raise AuditorError(
                f"{location} is neither a TIBET result file (keys {', '.join(TIBET_KEYS)}) nor a run record"
            )
        record = load_record(location)
        run_dir = location.parent if location.name == RECORD_FILE else None
    else:
        location = run_dir = common.run_store(runs_dir).resolve(source)
        record = load_record(location / RECORD_FILE)
    from auditor.reporting.sentences import TRY_AGAIN, unfinished_note

    try:
        scores = score_run(record, settings_of(record.config.scoring))
    except AuditorError as exc:  # a run that did not finish its answers: say how it ended and what continues it
        if run_dir is None or (note := unfinished_note(record, run_dir, TRY_AGAIN)) is None:
            raise
        raise AuditorError(f"{exc}: {note}") from None
    if run_dir is not None and (note := unfinished_note(record, run_dir)) is not None:
        notice(note)  # every answer is in (else the scoring refused), though the run itself did not finish
    return scores, "record", record.config.prompt, location, record.image_seeds() is not None


def register(app: typer.Typer) -> None:
    app.command("score")(score)
