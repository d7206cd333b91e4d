"""Where the stored values of each item kind live in the compatibility schemas (rename_sql makes the renamed forms),
and which template slots name such an item."""

from __future__ import annotations

ITEM_KINDS = {"diagnosis_name": "diagnoses", "procedure_name": "procedures", "lab_name": "labs",
              "drug_name": "drugs", "vital_name": "vitals"}
# values that occur in the event tables, per database and kind
USED_VALUES: dict[str, dict[str, str]] = {
    "mimic_iv": {
        "diagnoses": "select distinct d_icd_diagnoses.long_title from diagnoses_icd join d_icd_diagnoses "
                     "on diagnoses_icd.icd_code = d_icd_diagnoses.icd_code",
        "procedures": "select distinct d_icd_procedures.long_title from procedures_icd join d_icd_procedures "
                      "on procedures_icd.icd_code = d_icd_procedures.icd_code",
        "labs": "select distinct d_labitems.label from labevents join d_labitems "
                "on labevents.itemid = d_labitems.itemid",
        "drugs": "select distinct prescriptions.drug from prescriptions",
        "vitals": "select distinct d_items.label from chartevents join d_items on chartevents.itemid = d_items.itemid",
    },
    "eicu": {
        "diagnoses": "select distinct diagnosis.diagnosisname from diagnosis",
        "procedures": "select distinct treatment.treatmentname from treatment",
        "labs": "select distinct lab.labname from lab",
        "drugs": "select distinct medication.drugname from medication",
    },
}
# values of the dictionaries (MIMIC-IV's hold the whole ICD code sets, most of them never used)
DICTIONARY_VALUES: dict[str, dict[str, str]] = {
    "mimic_iv": {"diagnoses": "select distinct long_title from d_icd_diagnoses",
                 "procedures": "select distinct long_title from d_icd_procedures",
                 "labs": "select distinct label from d_labitems", "vitals": "select distinct label from d_items"},
}


def item_kind(slot: str) -> str | None:
    """The curated kind of a value slot (diagnosis_name1 → diagnoses), or None for non-item slots."""
    return ITEM_KINDS.get(slot.rstrip("0123456789"))
