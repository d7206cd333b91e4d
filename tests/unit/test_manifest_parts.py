"""The manifest's stage parts are typed, and a manifest written before they were reads and writes back the same."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from ehrbench.manifest import Manifest
from ehrbench.manifest_parts import DatabaseEntry, DqEntry, FhirEntry, QuestionsEntry

from .test_publish import _manifest

# Parts as the stages of a build published before the models existed wrote them (keys and nesting of a demo build).
DATABASES = {"renamed/eicu": {"schema": "renamed__eicu", "duckdb": "db/renamed/eicu.duckdb",
                              "sqlite": "db/renamed/eicu.sqlite", "row_counts": {"hospital": 186, "lab": 29961},
                              "hidden": {"lineage": "hidden/lineage/renamed/eicu.parquet",
                                         "rename_map": "hidden/rename_maps/renamed/eicu.json"}}}
FHIR = {"counts": {"Patient": 94, "Encounter": 300}, "files": {"duckdb": "fhir/resources.duckdb",
                                                              "Patient": "fhir/Patient.ndjson"},
        "validated": 394, "validated_patients": None}
QUESTIONS = {"settings": {"per_template": 5}, "generated": 10, "kept": 9, "quarantined": 1,
             "by_suite": {"ehrsql/mimic_iv": 6, "chatqa/eicu": 3}, "validation": {"coverage": {}},
             "a_later_key": {"kept": "as written"}}
DQ = {"recipes": "src/ehrbench/dq/recipes/default.yaml", "extract_rows": {"patients": 100},
      "tasks": [{"task_id": "impossible_values", "recipe": "impossible_values", "variant": "base",
                 "folder": "dq/impossible_values", "families": ["impossible_values"], "clusters": 12,
                 "labelled_rows": 12, "shortfalls": {}}],
      "calibration": [{"task": "impossible_values", "clusters": 12, "oracle_passed": True, "auditor_recall": 1.0,
                       "auditor_precision": 0.0033, "auditor_f1": 0.0067, "auditor_passed": False,
                       "auditor_flagged_rows": 3588, "auditor_recall_by_family": {"impossible_values": 1.0}}]}


def test_a_manifest_written_as_plain_dicts_reads_typed_and_writes_back_identical():
    written = json.loads(_manifest("20261120T100000Z").model_dump_json())
    written.update(databases=DATABASES, fhir=FHIR, questions=QUESTIONS, dq=DQ)
    manifest = Manifest.model_validate_json(json.dumps(written))

    assert manifest.databases["renamed/eicu"].warehouse_schema == "renamed__eicu"
    assert manifest.databases["renamed/eicu"].hidden["rename_map"] == "hidden/rename_maps/renamed/eicu.json"
    assert manifest.fhir.validated == 394 and manifest.fhir.ground_truth == {}
    assert manifest.questions.by_suite == {"ehrsql/mimic_iv": 6, "chatqa/eicu": 3}
    assert manifest.dq.tasks[0].clusters == 12 and manifest.dq.calibration[0].oracle_passed
    again = json.loads(manifest.model_dump_json())
    for part in ("databases", "fhir", "questions", "dq"):
        assert again[part] == written[part], part  # no key added as null, none lost, `schema` kept as the key


def test_unset_keys_are_not_written_and_extra_keys_are_kept():
    assert FhirEntry(counts={"Patient": 1}).model_dump() == {"counts": {"Patient": 1}}
    assert QuestionsEntry(kept=3, later={"x": 1}).model_dump() == {"kept": 3, "later": {"x": 1}}
    assert DatabaseEntry(schema="s", duckdb="a", sqlite="b").model_dump(by_alias=True) == {
        "schema": "s", "duckdb": "a", "sqlite": "b"}


def test_a_part_of_the_wrong_type_is_refused_naming_the_field():
    with pytest.raises(ValidationError, match=r"tasks\.0\.clusters"):
        DqEntry.model_validate({"tasks": [{"task_id": "t", "recipe": "r", "variant": "base", "folder": "dq/t",
                                           "clusters": "many"}]})
