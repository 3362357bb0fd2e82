"""Run records: round trip, strictness, and the committed JSON Schema staying current."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from auditor.core.errors import AuditorError
from auditor.records import (
    RECORD_TYPES,
    SCHEMA_VERSION,
    RunRecord,
    StudyRecord,
    T2IATRecord,
    load_any_record,
    load_record,
)
from auditor.records.loading import load_record_summary
from auditor.records.schemas import SCHEMA_MODELS, render_schemas
from tests.clitools import run_auditor
from tests.factories import make_record

REPO_SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def test_record_round_trips_through_json():
    record = make_record()
    again = RunRecord.model_validate_json(record.model_dump_json())
    assert again == record


def test_unknown_top_level_field_is_rejected():
    data = json.loads(make_record().model_dump_json())
    data["surprise"] = 1
    with pytest.raises(ValidationError, match="surprise"):
        RunRecord.model_validate(data)


def test_unknown_nested_field_is_rejected():
    data = json.loads(make_record().model_dump_json())
    data["config"]["t2i"]["weights_url"] = "http://example"
    with pytest.raises(ValidationError, match="weights_url"):
        RunRecord.model_validate(data)


def test_status_is_a_closed_set():
    data = json.loads(make_record().model_dump_json())
    data["status"] = "done-ish"
    with pytest.raises(ValidationError):
        RunRecord.model_validate(data)


def test_every_field_has_a_description():
    def walk(schema, where):
        for name, prop in schema.get("properties", {}).items():
            assert prop.get("description"), f"{where}.{name} has no description"
        for def_name, sub in schema.get("$defs", {}).items():
            walk(sub, def_name)

    for name, model in SCHEMA_MODELS.items():
        walk(model.model_json_schema(), name)


def test_committed_schemas_are_current():
    rendered = render_schemas()
    for name, text in rendered.items():
        committed = REPO_SCHEMAS / name
        assert committed.is_file(), f"{committed} missing: run `auditor schemas`"
        assert committed.read_text(encoding="utf-8") == text, f"{name} is stale: run `auditor schemas`"


def test_schema_check_command_catches_a_stale_schema(tmp_path):
    folder = tmp_path / "schemas"
    shutil.copytree(REPO_SCHEMAS, folder)
    assert run_auditor("schemas", "--check", "--out", str(folder)).returncode == 0
    stale = folder / "run_record.schema.json"
    stale.write_text(stale.read_text().replace("Run folder name", "Folder"), encoding="utf-8")
    result = run_auditor("schemas", "--check", "--out", str(folder))
    assert result.returncode == 2
    assert result.stderr.startswith("error: schemas out of date") and "run_record.schema.json" in result.stderr
    stale.write_bytes(b"\xff\xfe not UTF-8")  # not even text: out of date, not a UnicodeDecodeError
    result = run_auditor("schemas", "--check", "--out", str(folder))
    assert result.returncode == 2 and result.stderr.startswith("error: schemas out of date")
    gone = (REPO_SCHEMAS / "run_record.schema.json").read_text(encoding="utf-8")
    (folder / "gone_record.schema.json").write_text(gone, encoding="utf-8")  # a record kind auditor no longer has
    theirs = '{"properties": {"invoice": {}}}'
    for name in ("invoice.schema.json", "invoice_record.schema.json"):  # someone else's, in the same folder
        (folder / name).write_text(theirs, encoding="utf-8")
    (folder / "trace_record.schema.json").unlink()
    checked = run_auditor("schemas", "--check", "--out", str(folder)).stderr
    assert checked == (
        f"error: schemas out of date in {folder}: run_record.schema.json differ; trace_record.schema.json missing; "
        f"gone_record.schema.json of no current record; run `auditor schemas --out {folder}`\n"
    )
    rewritten = run_auditor("schemas", "--out", str(folder))  # what --check advises mends it all
    assert rewritten.returncode == 0 and "removed gone_record.schema.json" in " ".join(rewritten.stdout.split())
    assert run_auditor("schemas", "--check", "--out", str(folder)).returncode == 0
    assert all((folder / name).read_text(encoding="utf-8") == theirs
               for name in ("invoice.schema.json", "invoice_record.schema.json"))  # fmt: skip
    (tmp_path / "elsewhere").mkdir()
    elsewhere = run_auditor("schemas", "--check", cwd=tmp_path / "elsewhere")  # no ./schemas: nothing is stale
    assert elsewhere.returncode == 2
    assert elsewhere.stderr == "error: no schemas to check: schemas is not a folder (give --out the schemas folder)\n"


V1_RECORDS = Path(__file__).parent / "fixtures" / "records"


@pytest.mark.parametrize("name, kind", [("prompt_audit_v1.json", RunRecord), ("t2iat_test_v1.json", T2IATRecord)])
def test_version_1_records_load_upgraded_and_a_null_d_reads_undefined(name, kind):
    """Committed records written by schema version 1, where a null d was labelled "large"."""
    path = V1_RECORDS / name
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["schema_version"] == "1"
    record = load_record(path, kind)
    assert record.schema_version == SCHEMA_VERSION == "2"
    associations = [a.association for a in record.scores.axes if a.association] if kind is RunRecord else [record.result]
    undefined = [a for a in associations if a.effect_size is None]
    assert undefined and all(a.effect_label == "undefined" for a in undefined)
    defined = [a for a in associations if a.effect_size is not None]
    assert all(a.effect_label != "undefined" for a in defined)  # a defined d keeps its label


def test_a_record_of_an_unknown_schema_version_is_one_line(tmp_path):
    path = tmp_path / "record.json"
    data = json.loads((V1_RECORDS / "t2iat_test_v1.json").read_text(encoding="utf-8"))
    path.write_text(json.dumps({**data, "schema_version": "9"}), encoding="utf-8")
    with pytest.raises(AuditorError, match="record schema version '9'; this auditor reads versions 1, 2"):
        load_any_record(path)
    for unversioned in ('{"kind": "prompt_audit"}', '{"kind": "prompt_audit", "schema_version": null}'):
        path.write_text(unversioned, encoding="utf-8")  # not "a newer auditor may have written it"
        with pytest.raises(AuditorError, match="names no record schema version: it is not a record auditor wrote"):
            load_any_record(path)
    path.write_text('{"kind": "prompt_audit", "run_id": "r}', encoding="utf-8")
    with pytest.raises(AuditorError, match=r"is not valid JSON: Unterminated string starting at \(line 1, column 36\)"):
        load_any_record(path)


def listed(record: StudyRecord, folder: Path) -> tuple:
    """What ``auditor runs`` shows of a record."""
    return (
        record.kind, record.run_id, record.subject(), record.status, record.created_at, record.models_by_role(),
        record.fails_again_on_resume(), record.resume_command(folder),
    )  # fmt: skip


def test_a_records_summary_shows_what_the_whole_record_shows_and_leaves_its_results_out(tmp_path):
    """``auditor runs`` reads summaries: a paper-size run's images and results are most of its record and none of
    its listing. A record of an older schema version is read whole (and upgraded); a malformed one says why."""
    fixture = Path(__file__).parent / "fixtures" / "runs" / "pharmacist-sd15"
    whole, summary = load_any_record(fixture / "record.json"), load_record_summary(fixture / "record.json")
    assert whole.prompt_sets and whole.answers and whole.scores is not None
    assert listed(summary, fixture) == listed(whole, fixture)
    assert (summary.prompt_sets, summary.answers, summary.concepts, summary.scores) == ([], {}, {}, None)

    for name in ("prompt_audit_v1.json", "t2iat_test_v1.json"):
        old = V1_RECORDS / name
        assert listed(load_record_summary(old), tmp_path) == listed(load_any_record(old), tmp_path)
    broken = tmp_path / "record.json"
    broken.write_text('{"kind": "prompt_audit", "run_id": "r}', encoding="utf-8")
    with pytest.raises(AuditorError, match="is not valid JSON"):
        load_record_summary(broken)


def test_every_record_kind_has_a_schema_and_a_title():
    assert {cls for cls in SCHEMA_MODELS.values()} >= set(RECORD_TYPES)
    assert len({cls.model_fields["kind"].default for cls in RECORD_TYPES}) == len(RECORD_TYPES)
    assert all(cls.title != StudyRecord.title and cls.made_by.startswith("auditor ") for cls in RECORD_TYPES)


#: Libraries auditor imports that change no number, so a record need not name their versions.
NO_NUMBERS = {
    "huggingface_hub": "downloads weights; the weights' digests are recorded",
    "httpx": "carries requests to OpenAI-compatible servers, whose URL and model the record names",
    "Jinja2": "renders the HTML report",
    "pydantic-settings": "reads settings, which the config records",
    "ray": "runs the same stages elsewhere, to the same results (tests/test_executor_ray.py)",
    "rich": "terminal output",
    "typer": "the command line",
    "PyYAML": "reads manifests and batch files, whose content the record holds",
}


def test_every_library_that_can_change_a_number_has_its_version_recorded():
    """Each third-party import of the package maps to a distribution that the environment records, or to one
    named above as changing no number: a new library cannot slip into the computation unrecorded."""
    import ast
    import sys
    from importlib import metadata

    import auditor
    from auditor.core.environment import TRACKED_PACKAGES, collect_environment

    imported = set()
    for path in Path(auditor.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"auditor"}
    distributions = metadata.packages_distributions()
    assert third_party - set(distributions) == set()  # ``make setup`` installs every extra
    unaccounted = {
        module: distributions[module]
        for module in sorted(third_party)
        if not set(distributions[module]) & (set(TRACKED_PACKAGES) | set(NO_NUMBERS))
    }
    assert unaccounted == {}
    assert {"scikit-image", "sentence-transformers", "gender-guesser"} <= set(collect_environment().packages)
