"""Reports of a run record: rich terminal, self-contained HTML and JSON.

Reports only read records. ``build_view`` (in :mod:`auditor.reporting.prompt_audit`) turns a
record into the report view that all three renderers draw, so they agree on order,
wording and metric explanations. The renderers are imported when first named (a command that
only reads a record's words, such as ``auditor runs``, loads none of them), and jinja2 only when
an HTML report is written.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from auditor.records import RunRecord
    from auditor.reporting.html import write_html_report
    from auditor.reporting.prompt_audit import build_view
    from auditor.reporting.terminal import render_terminal

#: The package's renderers, each by the module that defines it.
_RENDERERS = {
    "build_view": "auditor.reporting.prompt_audit",
    "render_terminal": "auditor.reporting.terminal",
    "write_html_report": "auditor.reporting.html",
}


def __getattr__(name: str) -> Any:
    if name in _RENDERERS:
        return getattr(import_module(_RENDERERS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def report_json(record: RunRecord, run_dir: Path | None = None) -> dict[str, Any]:
    """The terminal report's content as plain JSON-ready data (what ``auditor report --json`` and ``auditor prompt
    --json`` print); with its ``run_dir``, first where the run folder and its page are (as every study's JSON says),
    and a record that says ``running`` reads as running now or stopped, by the folder's lock."""
    from auditor.core.store import run_files
    from auditor.reporting.prompt_audit import build_view
    from auditor.reporting.status import running_now

    files = run_files(run_dir) if run_dir is not None else {}
    return files | build_view(record, running_now(record, run_dir), run_dir).as_dict()


__all__ = ["build_view", "render_terminal", "report_json", "write_html_report"]
