"""FHIR resource ids as MIMIC-IV on FHIR makes them (DESIGN §5.4), so that ids match FHIR-AgentBench's:

    id = uuid5(uuid5(uuid5(NAMESPACE_OID, "MIMIC-IV"), <namespace name>), <key>)

The same ids are computed in SQL by the dbt macro `fhir_id` (dbt_project/macros/fhir_ids.sql), which carries
the namespace UUIDs below as constants; tests/unit/test_fhir_ids.py checks that both agree.
"""

from __future__ import annotations

import uuid

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
}


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


def medication_key(drug: str, formulary_drug_cd: str | None = None, ndc: str | None = None) -> str:
    """The Medication key: drug[--formulary_drug_cd][--ndc zero-filled to 11 digits]."""
    key = drug
    if formulary_drug_cd:
        key += f"--{formulary_drug_cd}"
    if ndc:
        key += f"--{str(ndc).zfill(11)}"
    return key
