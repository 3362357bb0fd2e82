"""Run records: round trip, strictness, and the committed JSON Schema staying current."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from auditor.records import AssociationResult, RunRecord
from auditor.schemas import SCHEMA_MODELS, render_schemas
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


def test_a_null_d_reads_undefined_whatever_label_an_older_record_gave_it():
    # Before "undefined" existed, a null d was labelled "large" (S != 0) or "negligible" (S == 0).
    old = {"association": 0.4, "effect_size": None, "effect_label": "large", "p_value": 0.33,
           "exact": True, "permutations": 6, "n_x": 2, "n_y": 2}  # fmt: skip
    assert AssociationResult.model_validate(old).effect_label == "undefined"
    assert AssociationResult.model_validate(old | {"association": 0.0, "effect_label": "negligible"}).effect_label == (
        "undefined"
    )
    for label in ("negligible", "small", "medium", "large"):  # every label of a defined d still loads as it was
        assert AssociationResult.model_validate(old | {"effect_size": 0.9, "effect_label": label}).effect_label == label
