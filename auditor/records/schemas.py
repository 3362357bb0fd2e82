"""JSON Schema generated from the record models, one file per top-level record."""

from __future__ import annotations

import json

from pydantic import BaseModel

from auditor.records import (
    AmplificationRecord,
    AuditPlan,
    BatchRecord,
    ExploreRecord,
    OccupationsRecord,
    RunRecord,
    T2IATRecord,
    T2IATTestDefinition,
    TraceRecord,
)

#: File name -> record model. Add a model here when a new kind of record is written.
SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "run_record.schema.json": RunRecord,
    "audit_plan.schema.json": AuditPlan,
    "t2iat_record.schema.json": T2IATRecord,
    "t2iat_occupations_record.schema.json": OccupationsRecord,
    "t2iat_test.schema.json": T2IATTestDefinition,
    "batch_record.schema.json": BatchRecord,
    "explore_record.schema.json": ExploreRecord,
    "amplification_record.schema.json": AmplificationRecord,
    "trace_record.schema.json": TraceRecord,
}


def render_schemas() -> dict[str, str]:
    """File name -> schema text, deterministic so a stale committed copy is caught by a diff."""
    return {
        name: json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"
        for name, model in SCHEMA_MODELS.items()
    }
