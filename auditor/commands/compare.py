"""``auditor compare``: two runs of the same prompt side by side, with CAS and BAV deltas."""

from __future__ import annotations

from pathlib import Path

import typer

from auditor.commands import common
from auditor.core.console import out, print_json, say_whole


def compare(
    run_a: str = typer.Argument(..., metavar="RUN_A", help="Run A: run id, run folder or record.json path."),
    run_b: str = typer.Argument(..., metavar="RUN_B", help="Run B (deltas are B minus A)."),
    html: Path | None = typer.Option(
        None,
        "--html",
        help="Write the comparison as an HTML page here (it links the images inside both run folders) and print its "
        "path instead of the terminal comparison.",
    ),
    json_output: bool = typer.Option(False, "--json", help="Print the comparison as JSON, without colour codes."),
    runs_dir: Path | None = common.RUNS_DIR,
    bootstrap: int = common.BOOTSTRAP,
    ci_seed: int = common.CI_SEED,
) -> None:
    """Compare two runs per axis and counterfactual (aligned by name and text); unmatched ones are listed."""
    from auditor.core.console import err
    from auditor.core.errors import AuditorError
    from auditor.core.store import RECORD_FILE
    from auditor.records import load_record
    from auditor.reporting.compare import (
        check_page_path,
        check_scored,
        compare_records,
        render_comparison_terminal,
        write_comparison_html,
    )
    from auditor.scoring.comparison import change_intervals
    from auditor.scoring.uncertainty import MIN_SEEDS, BootstrapSettings

    common.check_interval_options(bootstrap, ci_seed=ci_seed)
    if html is not None:
        check_page_path(html)  # before the bootstrap
    store = common.run_store(runs_dir)
    folder_a, folder_b = store.resolve(run_a), store.resolve(run_b)
    if folder_a.resolve() == folder_b.resolve():
        raise AuditorError(f"{run_a} and {run_b} are the same run ({folder_a}): compare two runs")
    record_a, record_b = (
        load_record(folder / RECORD_FILE).model_copy(update={"run_id": _name(store.root, folder)})
        for folder in (folder_a, folder_b)
    )
    check_scored(record_a, "A", folder_a)
    check_scored(record_b, "B", folder_b)
    changes = None
    resamplable = min(record_a.config.images_per_prompt, record_b.config.images_per_prompt) >= MIN_SEEDS
    if bootstrap and resamplable:  # both are scored (check_scored)
        changes = change_intervals(record_a, record_b, BootstrapSettings(resamples=bootstrap, seed=ci_seed))
    view = compare_records(record_a, record_b, changes)
    if html is not None:
        path = write_comparison_html(view, html, folder_a, folder_b)
        say_whole(err if json_output else out, str(path))
    if json_output:
        print_json(view.as_dict())
    elif html is None:
        render_comparison_terminal(view, out)


def _name(root: Path, folder: Path) -> str:
    """How the comparison names a run: by its folder, not the id in its record (a copied run keeps its first id, and
    two batches' audits of one prompt share theirs); under the runs folder, the path it is resolved by there."""
    try:
        return str(folder.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(folder)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)
