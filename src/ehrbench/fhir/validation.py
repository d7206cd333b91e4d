"""Validation of built FHIR resources: structure and types with fhir.resources (FHIR R4B models;
docs/benchmarks.md#pitfalls: the
package's default is R5, MIMIC-IV on FHIR is R4), plus what fhir.resources does not check: the required-binding
code values of the elements we build, and FHIR JSON's rule that no element is empty (null, "", [] or {}).
References are checked by the callers (they need the whole set)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache

# Top-level `code` elements with a required binding in R4, per resource type: element -> allowed codes.
REQUIRED_CODES: dict[str, dict[str, frozenset[str]]] = {
    "Patient": {"gender": frozenset({"male", "female", "other", "unknown"})},
    "Encounter": {"status": frozenset({"planned", "arrived", "triaged", "in-progress", "onleave", "finished",
                                       "cancelled", "entered-in-error", "unknown"})},
    "Procedure": {"status": frozenset({"preparation", "in-progress", "not-done", "on-hold", "stopped", "completed",
                                       "entered-in-error", "unknown"})},
    "Observation": {"status": frozenset({"registered", "preliminary", "final", "amended", "corrected", "cancelled",
                                         "entered-in-error", "unknown"})},
    "MedicationRequest": {
        "status": frozenset({"active", "on-hold", "cancelled", "completed", "entered-in-error", "stopped", "draft",
                             "unknown"}),
        "intent": frozenset({"proposal", "plan", "order", "original-order", "reflex-order", "filler-order",
                             "instance-order", "option"})},
    "MedicationAdministration": {"status": frozenset({"in-progress", "not-done", "on-hold", "completed",
                                                      "entered-in-error", "stopped", "unknown"})},
    "Medication": {"status": frozenset({"active", "inactive", "entered-in-error"})},
    "Specimen": {"status": frozenset({"available", "unavailable", "unsatisfactory", "entered-in-error"})},
    "Location": {"status": frozenset({"active", "suspended", "inactive"})},
}


@cache
def _model(resource_type: str):
    from fhir.resources.R4B import get_fhir_model_class  # imported late: loading the models takes a while

    return get_fhir_model_class(resource_type)


@dataclass
class ValidationReport:
    checked: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (resource type/id, first error line)

    @property
    def ok(self) -> bool:
        return not self.failures


def validate_resources(resources: Iterable[str], *, max_failures: int = 20) -> ValidationReport:
    """Validate FHIR resources given as JSON text; keeps the first `max_failures` failures."""
    report = ValidationReport()
    for text in resources:
        report.checked += 1
        try:
            data = json.loads(text)
            _model(data["resourceType"]).model_validate_json(text)
            _check_codes(data)
            _check_no_empty_elements(data, data["resourceType"])
        except (ValueError, KeyError, TypeError) as exc:  # bad JSON, unknown type, pydantic errors: report them
            # (an ImportError or the like is the environment's fault, not the resource's: it propagates)
            if len(report.failures) < max_failures:
                label = _label(text)
                report.failures.append((label, str(exc).splitlines()[0] + ": " + " ".join(str(exc).split())[:300]))
    return report


def _check_codes(data: dict) -> None:
    for element, allowed in REQUIRED_CODES.get(data["resourceType"], {}).items():
        if element in data and data[element] not in allowed:
            raise ValueError(f"{data['resourceType']}.{element} {data[element]!r} is not one of "
                             f"{', '.join(sorted(allowed))} (required binding)")


def _check_no_empty_elements(value, path: str) -> None:
    """FHIR JSON: an element is absent or has content, never null, "", [] or {} (fhir.resources lets them pass)."""
    if value is None or value in ("", [], {}):
        raise ValueError(f"{path} is empty ({json.dumps(value)}); FHIR JSON leaves empty elements out")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_no_empty_elements(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_no_empty_elements(item, f"{path}[{i}]")


def _label(text: str) -> str:
    try:
        data = json.loads(text)
        return f"{data.get('resourceType', '?')}/{data.get('id', '?')}"
    except ValueError:
        return text[:60]
