"""``auditor schemas``: write or check the JSON Schema files generated from the records."""

from __future__ import annotations

from pathlib import Path

import typer

from auditor.core.console import out
from auditor.core.errors import AuditorError


def schemas(
    out_dir: Path = typer.Option(Path("schemas"), "--out", help="Folder for the *.schema.json files."),
    check: bool = typer.Option(False, "--check", help="Fail when a committed schema differs from the models."),
) -> None:
    """Generate JSON Schema from the record models (or check that the committed ones are current)."""
    from auditor.records.schemas import render_schemas

    rendered = render_schemas()
    if check:
        if not out_dir.is_dir():
            raise AuditorError(f"no schemas to check: {out_dir} is not a folder (give --out the schemas folder)")
        stale = [name for name, text in rendered.items() if _read(out_dir / name) != text]
        extra = sorted(p.name for p in out_dir.glob("*.schema.json") if p.name not in rendered)
        if stale or extra:
            raise AuditorError(f"schemas out of date in {out_dir}: {', '.join(stale + extra)}; run `auditor schemas`")
        out.print(f"{len(rendered)} schemas up to date in {out_dir}")
        return
    from auditor.core.store import atomic_write_text

    for name, text in rendered.items():
        atomic_write_text(out_dir / name, text)
    # A schema of no current record (a kind renamed or gone) would keep `--check` failing: the folder is generated.
    removed = sorted(path.name for path in out_dir.glob("*.schema.json") if path.name not in rendered)
    for name in removed:
        (out_dir / name).unlink()
    out.print(f"wrote {len(rendered)} schemas to {out_dir}" + (f", removed {', '.join(removed)}" if removed else ""))


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None  # not UTF-8: not current


def register(app: typer.Typer) -> None:
    app.command("schemas")(schemas)
