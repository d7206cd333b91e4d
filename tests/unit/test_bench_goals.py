"""bench/goals.py's verdicts: a stage grows faster than its rows when its time's growth over the rows' exceeds 1."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

# bench/ on the path only for this import: its fhir.py would shadow the fhir package (fhir.resources) for later tests
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
try:
    growth_rows = importlib.import_module("goals").growth_rows
finally:
    sys.path.pop(0)


def _factor(factor: int, patient_rows: int, stages: dict[str, tuple[float, float]]) -> dict:
    return {"factor": factor, "patient_rows": patient_rows,
            "stages": {name: {"seconds": {"median": wall}, "cpu_seconds": {"median": cpu}}
                       for name, (wall, cpu) in stages.items()}}


def test_the_fastest_growing_stage_is_named_and_judged_against_the_rows_growth():
    before = _factor(10, 1_000, {"fhir": (10.0, 10.0), "meds": (20.0, 10.0), "questions": (30.0, 30.0)})
    # 10x the rows: fhir's wall time 12x (1.2 per row), meds' 9x; CPU: meds 8x, fhir 10x (exactly linear)
    after = _factor(100, 10_000, {"fhir": (120.0, 100.0), "meds": (180.0, 80.0), "questions": (33.0, 33.0)})
    wall, cpu = growth_rows(before, after)
    assert wall[1:] == ("fhir 1.20", "<= 1.00", "NOT met")
    assert cpu[1:] == ("fhir 1.00", "<= 1.00", "met")
    assert wall[0].startswith("x10 -> x100")


def test_a_stage_missing_at_the_smaller_factor_is_left_out():
    before = _factor(1, 100, {"ingest": (2.0, 2.0)})
    after = _factor(10, 1_000, {"ingest": (10.0, 10.0), "fhir": (500.0, 500.0)})
    wall, _ = growth_rows(before, after)
    assert wall[1] == "ingest 0.50"
