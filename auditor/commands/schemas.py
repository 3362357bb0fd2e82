"""``auditor schemas``: write or check the JSON Schema files generated from the records."""

from __future__ import annotations

from pathlib import Path

import typer

from auditor.core.console import out, say_whole
from auditor.core.errors import AuditorError


def schemas(
    out_dir: Path = typer.Option(Path("schemas"), "--out", help="Folder for the *.schema.json files."),
    check: bool = typer.Option(
        False,
        "--check",
        help="Fail when a record's schema is missing or differs, or a *_record.schema.json is of no current record.",
    ),
) -> None:
    """Generate JSON Schema from the record models (or check that the committed ones are current)."""
    from auditor.records.schemas import render_schemas

    rendered = render_schemas()
    again = "auditor schemas" + ("" if out_dir == Path("schemas") else f" --out {out_dir}")
    if check:
        if not out_dir.is_dir():
            raise AuditorError(f"no schemas to check: {out_dir} is not a folder (give --out the schemas folder)")
        missing = [name for name in rendered if not (out_dir / name).is_file()]
        stale = [name for name, text in rendered.items() if name not in missing and _read(out_dir / name) != text]
        extra = _stale_schemas(out_dir, rendered)
        if missing or stale or extra:
            found = [f"{', '.join(names)} {what}" for names, what in (
                (stale, "differ"), (missing, "missing"), (extra, "of no current record")
            ) if names]  # fmt: skip
            raise AuditorError(f"schemas out of date in {out_dir}: {'; '.join(found)}; run `{again}`")
        say_whole(out, f"{len(rendered)} schemas up to date in {out_dir}")
        return
    from auditor.core.store import atomic_write_text

    for name, text in rendered.items():
        atomic_write_text(out_dir / name, text)
    # A schema of no current record (a kind renamed or gone) would keep `--check` failing: the folder is generated.
    removed = _stale_schemas(out_dir, rendered)
    for name in removed:
        (out_dir / name).unlink()
    gone = f", removed {', '.join(removed)}" if removed else ""
    say_whole(out, f"wrote {len(rendered)} schemas to {out_dir}{gone}")


def _stale_schemas(folder: Path, rendered: dict[str, str]) -> list[str]:
    """Schema files in ``folder`` that auditor wrote for a record it no longer has (a kind renamed or gone). Only a
    record's schema (``*_record.schema.json`` describing ``schema_version`` and ``kind``) counts: anything else in
    the folder is someone else's."""
    import json

    def a_record_schema(path: Path) -> bool:
        try:
            properties = json.loads(path.read_text(encoding="utf-8")).get("properties", {})
        except (OSError, ValueError, AttributeError):
            return False
        return isinstance(properties, dict) and {"schema_version", "kind"} <= properties.keys()

    return sorted(
        path.name for path in folder.glob("*_record.schema.json") if path.name not in rendered and a_record_schema(path)
    )


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None  # not UTF-8: not current


def register(app: typer.Typer) -> None:
    app.command("schemas")(schemas)
