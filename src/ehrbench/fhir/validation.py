"""Validation of built FHIR resources: structure and types with fhir.resources (FHIR R4B models;
docs/benchmarks.md#pitfalls: the
package's default is R5, MIMIC-IV on FHIR is R4), plus what fhir.resources does not check: the required-binding
code values of the elements we build, and FHIR JSON's rule that no element is empty (null, "", [] or {}).
References are checked by the callers (they need the whole set)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

# Below this many resources the worker processes' start-up (a fresh interpreter loading the R4B models, ~2 s) costs
# more than it saves.
PARALLEL_FROM = 20_000
MAX_WORKERS = 8  # each holds the R4B models (~150 MB): a large machine's every core would cost memory, not time

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


def validate_resources(resources: Iterable[str], *, max_failures: int = 20, workers: int | None = None,
                       expected: int | None = None) -> ValidationReport:
    """Validate FHIR resources given as JSON text; keeps the first `max_failures` failures (in input order).

    fhir.resources validates ~1,500 resources/s per core, so when `expected` (the number of resources, if known)
    reaches PARALLEL_FROM the work is spread over `workers` processes (default: the CPUs this process may use, at
    most MAX_WORKERS)."""
    workers = workers or min(len(os.sched_getaffinity(0)), MAX_WORKERS)
    if workers < 2 or expected is None or expected < PARALLEL_FROM:
        return _validate_numbered(enumerate(resources), max_failures)
    return _validate_in_processes(resources, max_failures, workers)


def _validate_in_processes(resources: Iterable[str], max_failures: int, workers: int) -> ValidationReport:
    """Deal the resources round-robin into one file per worker and validate the files in `python -m
    ehrbench.fhir.validation` processes. Fresh interpreters rather than multiprocessing: a fork would copy a
    multi-threaded caller (Prefect, DuckDB) mid-lock, and spawn re-runs the caller's main script."""
    report = ValidationReport()
    with tempfile.TemporaryDirectory(prefix="ehrbench-fhir-validation-") as folder:
        parts = [Path(folder) / f"part-{k}.jsonl" for k in range(workers)]
        handles = [part.open("w") for part in parts]
        try:
            for index, text in enumerate(resources):  # [index, text]: one line whatever the text holds
                handles[index % workers].write(json.dumps([index, text]) + "\n")
        finally:
            for handle in handles:
                handle.close()
        processes = [subprocess.Popen([sys.executable, "-m", "ehrbench.fhir.validation", str(part), str(max_failures)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for part in parts]
        failures = []
        for process in processes:
            out, err = process.communicate()
            if process.returncode != 0:
                raise RuntimeError(f"FHIR validation worker failed (exit {process.returncode}): {err.strip()[-2000:]}")
            part = json.loads(out)
            report.checked += part["checked"]
            failures += part["failures"]
    report.failures = [(label, message) for _, label, message in sorted(failures)[:max_failures]]
    return report


def _validate_numbered(resources: Iterable[tuple[int, str]], max_failures: int,
                       indices: list[int] | None = None) -> ValidationReport:
    """Validate (index, text) pairs; `indices`, if given, receives the index of each failure kept."""
    report = ValidationReport()
    for index, text in resources:
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
                if indices is not None:
                    indices.append(index)
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


def _validate_file(path: Path, max_failures: int) -> dict:
    """A worker's part: lines of [index, text]; its report with each failure's index."""
    indices: list[int] = []
    with path.open() as handle:
        report = _validate_numbered((tuple(json.loads(line)) for line in handle), max_failures, indices)
    return {"checked": report.checked,
            "failures": [[index, label, message] for index, (label, message) in zip(indices, report.failures,
                                                                                      strict=True)]}


if __name__ == "__main__":  # a worker of _validate_in_processes
    print(json.dumps(_validate_file(Path(sys.argv[1]), int(sys.argv[2]))))
