"""FHIR R4 view of the MIMIC-IV profiles (docs/benchmarks.md#fhir-resource-ids): resource ids compatible with MIMIC-IV
on FHIR."""
