"""The clinical knowledge the audit suite corrupts and checks (`data/clinical_facts.yaml`): plausible value bands,
unit conversions, lab→chart item pairs, sex-specific evidence, marker orders and geriatric drugs."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

FACTS_FILE = Path(__file__).parent / "data" / "clinical_facts.yaml"


class Band(BaseModel):
    name: str
    unit: str
    low: float
    high: float


class UnitConversion(BaseModel):
    table: str
    code: int
    factor: float
    to_unit: str


class SexEvidence(BaseModel):
    icd: dict[int, list[str]]
    drugs: list[str]
    lab_tests: list[int]


class MarkerOrder(BaseModel):
    drug: str
    product_strength: str
    dose: str
    dose_unit: str
    route: str


class ClinicalFacts(BaseModel):
    model_config = ConfigDict(frozen=True)

    plausible: dict[str, dict[int, Band]]
    unit_conversions: list[UnitConversion]
    lab_to_chart: dict[int, int]
    sex_specific: dict[str, SexEvidence]
    marker_orders: dict[str, list[MarkerOrder]]
    geriatric_drugs: list[str]

    def band(self, table: str, code: str | int) -> Band | None:
        return self.plausible.get(table, {}).get(int(code))


@cache
def load_facts(path: Path = FACTS_FILE) -> ClinicalFacts:
    with path.open() as handle:
        return ClinicalFacts.model_validate(yaml.safe_load(handle))
