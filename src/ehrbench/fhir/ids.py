"""FHIR resource ids as MIMIC-IV on FHIR makes them (docs/benchmarks.md#fhir-resource-ids), so that ids match
FHIR-AgentBench's:

    id = uuid5(uuid5(uuid5(NAMESPACE_OID, "MIMIC-IV"), <namespace name>), <key>)

The same ids are computed in SQL by the dbt macro `fhir_id` (dbt_project/macros/fhir_ids.sql), which carries
the namespace UUIDs below as constants; tests/unit/test_fhir_ids.py checks that both agree.
"""

from __future__ import annotations

import uuid
from functools import cache

MIMIC_IV_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_OID, "MIMIC-IV")

# Namespace name -> (source table, key made of these source columns joined by "-").
RESOURCE_KEYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Patient": ("patients", ("subject_id",)),
    "Encounter": ("admissions", ("hadm_id",)),
    "EncounterICU": ("icustays", ("stay_id",)),
    "Condition": ("diagnoses_icd", ("hadm_id", "seq_num", "icd_code")),
    "Procedure": ("procedures_icd", ("hadm_id", "seq_num", "icd_code")),
    "MedicationRequest": ("prescriptions", ("pharmacy_id",)),
    "MedicationPrescriptions": ("prescriptions", ("drug", "formulary_drug_cd", "ndc")),  # see medication_key
    "ObservationLabevents": ("labevents", ("labevent_id",)),
    "ObservationChartevents": ("chartevents", ("stay_id", "charttime", "itemid", "value")),
    "ObservationOutputevents": ("outputevents", ("stay_id", "charttime", "itemid")),
    "MedicationAdministrationICU": ("inputevents", ("stay_id", "orderid", "itemid")),
    "ObservationMicroTest": ("microbiologyevents", ("micro_specimen_id", "test_itemid")),
    "ObservationMicroOrg": ("microbiologyevents", ("test_itemid", "micro_specimen_id", "org_itemid")),
    "ObservationMicroSusc": ("microbiologyevents", ("microevent_id",)),
    "SpecimenMicro": ("microbiologyevents", ("micro_specimen_id",)),
    "Location": ("transfers", ("careunit",)),
    # MIMIC-IV on FHIR's other resources (the mimic_iv_on_fhir view)
    "ProcedureICU": ("procedureevents", ("stay_id", "orderid", "itemid")),
    "SpecimenLab": ("labevents", ("specimen_id",)),
    "ObservationDatetimeevents": ("datetimeevents", ("stay_id", "charttime", "itemid")),
    "MedicationDispense": ("pharmacy", ("pharmacy_id",)),
    "MedicationAdministration": ("emar_detail", ("emar_id", "parent_field_ordinal")),
    "Organization": ("", ("npi",)),  # no source table: the one hospital, key ORGANIZATION_KEY
}

# The key of MIMIC-IV on FHIR's one Organization (Beth Israel Deaconess Medical Center): its NPI as a URL.
ORGANIZATION_KEY = "http://hl7.org/fhir/sid/us-npi/1194052720"

# Namespace name -> the FHIR resource type of its resources.
RESOURCE_TYPES: dict[str, str] = {
    "Patient": "Patient", "Encounter": "Encounter", "EncounterICU": "Encounter", "Condition": "Condition",
    "Procedure": "Procedure", "MedicationRequest": "MedicationRequest", "MedicationPrescriptions": "Medication",
    "ObservationLabevents": "Observation", "ObservationChartevents": "Observation",
    "ObservationOutputevents": "Observation", "MedicationAdministrationICU": "MedicationAdministration",
    "ObservationMicroTest": "Observation", "ObservationMicroOrg": "Observation", "ObservationMicroSusc": "Observation",
    "SpecimenMicro": "Specimen", "Location": "Location", "ProcedureICU": "Procedure", "SpecimenLab": "Specimen",
    "ObservationDatetimeevents": "Observation", "MedicationDispense": "MedicationDispense",
    "MedicationAdministration": "MedicationAdministration", "Organization": "Organization",
}


@cache  # a build computes ids by the hundred thousand, in a handful of namespaces
def namespace(name: str) -> uuid.UUID:
    """The UUID namespace of one resource kind (e.g. "ObservationLabevents")."""
    if name not in RESOURCE_KEYS:
        raise ValueError(f"unknown FHIR id namespace {name!r}; expected one of {', '.join(RESOURCE_KEYS)}")
    return uuid.uuid5(MIMIC_IV_NAMESPACE, name)


def resource_id(namespace_name: str, key: str | int) -> str:
    """The resource id for one key, e.g. resource_id("Patient", 10009628)."""
    return str(uuid.uuid5(namespace(namespace_name), str(key)))


def key_of(*parts: object) -> str:
    """A composite key as MIMIC-IV on FHIR writes it: raw values joined by "-" (e.g. hadm_id-seq_num-icd_code)."""
    if any(part is None for part in parts):
        raise ValueError(f"a FHIR key part is missing in {parts!r}")
    return "-".join(str(part) for part in parts)


def key_from_fields(namespace_name: str, fields: dict) -> str:
    """The key of a resource from the raw source fields it is made of (e.g. a lineage `source_key`)."""
    columns = RESOURCE_KEYS[namespace_name][1]
    if namespace_name == "MedicationPrescriptions":
        return medication_key(*(fields.get(c) for c in columns))
    missing = [c for c in columns if fields.get(c) is None]
    if missing:
        raise ValueError(f"{namespace_name} key needs {', '.join(missing)}; got fields {sorted(fields)}")
    return key_of(*(fields[c] for c in columns))


def medication_key(drug: str, formulary_drug_cd: str | None = None, ndc: str | None = None) -> str:
    """The Medication key of one prescribed drug: drug[--formulary_drug_cd][--ndc zero-filled to 11 digits], raw
    values (the drug name untrimmed). A prescription of several drugs (one pharmacy_id, several rows) references
    a mix Medication whose key joins its drugs' keys with "_" (see dbt_project/macros/fhir_medications.sql)."""
    key = drug
    if formulary_drug_cd:
        key += f"--{formulary_drug_cd}"
    if ndc and str(ndc) != "0":  # MIMIC-IV writes 0 for "no NDC"; MIMIC-IV on FHIR leaves it out
        key += f"--{str(ndc).zfill(11)}"
    return key
