"""Reports of a run record: rich terminal, self-contained HTML and JSON.

Reports only read records. ``build_view`` (in :mod:`auditor.reporting.prompt_audit`) turns a
record into the report view that all three renderers draw, so they agree on order,
wording and metric explanations. jinja2 is imported only when an HTML report is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from auditor.records import RunRecord
from auditor.reporting.html import write_html_report
from auditor.reporting.prompt_audit import build_view
from auditor.reporting.sentences import running_now
from auditor.reporting.terminal import render_terminal


def report_json(record: RunRecord, run_dir: Path | None = None) -> dict[str, Any]:
    """The terminal report's content as plain JSON-ready data (what ``auditor report --json`` prints); with its
    ``run_dir``, a record that says ``running`` reads as running now or stopped, by the folder's lock."""
    return build_view(record, running_now(record, run_dir)).as_dict()


__all__ = ["build_view", "render_terminal", "report_json", "write_html_report"]
