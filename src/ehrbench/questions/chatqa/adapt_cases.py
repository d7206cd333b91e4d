"""What AdaptQA can ask: where drugs and lab results are recorded, the task shapes (request in words, final SELECT),
and the cases a database supports (asked name absent, fallback present)."""

from __future__ import annotations

from dataclasses import dataclass

from ehrbench.questions.chatqa.lay_terms import LayTerms
from ehrbench.questions.chatqa.renamed_database import _RenamedDatabase


@dataclass(frozen=True)
class _EventSource:
    """Where a database records drugs or lab results, in compatibility-schema SQL."""

    source: str  # FROM ... [JOIN ...]
    name: str  # the stored drug / lab name column
    patient: str  # the patient id column
    stay: str  # the hospital admission (stay) id column
    time: str
    value: str | None = None  # lab result value


DRUG_SOURCES = {
    "mimic_iv": _EventSource("prescriptions", "prescriptions.drug", "prescriptions.subject_id",
                             "prescriptions.hadm_id", "prescriptions.starttime"),
    "eicu": _EventSource("medication join patient on medication.patientunitstayid = patient.patientunitstayid",
                         "medication.drugname", "patient.uniquepid", "patient.patienthealthsystemstayid",
                         "medication.drugstarttime"),
}
LAB_SOURCES = {
    "mimic_iv": _EventSource("labevents join d_labitems on labevents.itemid = d_labitems.itemid", "d_labitems.label",
                             "labevents.subject_id", "labevents.hadm_id", "labevents.charttime",
                             "labevents.valuenum"),
    "eicu": _EventSource("lab join patient on lab.patientunitstayid = patient.patientunitstayid", "lab.labname",
                         "patient.uniquepid", "patient.patienthealthsystemstayid", "lab.labresulttime",
                         "lab.labresult"),
}


@dataclass(frozen=True)
class _Shape:
    """One AdaptQA task shape: what is asked of the chosen events, in words and as the final SELECT."""

    id: str
    patient_scoped: bool
    ask: str  # the request, with {subject} (e.g. "a medication recorded exactly as 'lipitor'") and {patient}
    select: str  # over `chosen` (columns patient_id, stay_id, event_time, value)
    empty_if: str  # the user's words for "nothing found"


_DRUG_SHAPES = (
    _Shape("patient_count", False, "the number of patients prescribed {subject}",
           "select count(distinct chosen.patient_id) from chosen", "no patients are prescribed"),
    _Shape("stay_count", False, "the number of hospital stays during which {subject} was prescribed",
           "select count(distinct chosen.stay_id) from chosen", "no hospital stays have a prescription"),
    _Shape("patient_first_time", True, "when patient ID {patient} was first prescribed {subject}",
           "select min(chosen.event_time) from chosen", "patient ID {patient} has no prescription"),
)
_LAB_SHAPES = (
    _Shape("patient_count", False, "the number of patients who had a result of {subject}",
           "select count(distinct chosen.patient_id) from chosen", "no results are recorded"),
    _Shape("patient_max_value", True, "the highest value of {subject} ever measured for patient ID {patient}",
           "select max(chosen.value) from chosen", "patient ID {patient} has no result"),
    _Shape("patient_last_time", True, "when patient ID {patient} last had a result of {subject}",
           "select max(chosen.event_time) from chosen", "patient ID {patient} has no result"),
)


@dataclass(frozen=True)
class _AdaptCase:
    category: str  # brand_generic | alternative_lab | drug_class
    key: str  # what the case is about (seeded choice, task id)
    asked: str  # the exact stored name asked for
    fallback: tuple[str, ...]  # names the fallback matches (contained, or exactly for labs)
    exact_fallback: bool
    subject: str  # "a medication recorded exactly as 'lipitor'"
    fallback_words: str  # the user's fallback, in words
    source: _EventSource
    topic: str


def _adapt_cases(lay_terms: LayTerms, database: str, db: _RenamedDatabase) -> dict[str, list[_AdaptCase]]:
    drugs, labs = db.used_values("drugs"), db.used_values("labs")
    source = DRUG_SOURCES[database]
    brand_cases = [
        _AdaptCase("brand_generic", pair.brand, pair.brand, (pair.generic,), False,
                   f"a medication recorded exactly as '{pair.brand}'",
                   "medications whose name contains its generic name", source, "medication prescriptions")
        for pair in lay_terms.brands
        if pair.brand not in drugs and any(pair.generic in d for d in drugs)]
    class_cases = []
    for drug_class in lay_terms.classes.values():
        names = lay_terms.class_names(drug_class)
        present = [n for n in names if any(n in d for d in drugs)]
        for member in drug_class.members:
            # absent even inside longer names, so that only the class can answer
            if present and not any(member in d for d in drugs):
                class_cases.append(_AdaptCase(
                    "drug_class", member, member, tuple(names), False, f"a medication recorded exactly as '{member}'",
                    f"any medication of the same drug class ({drug_class.lay}), recorded under a generic or brand name",
                    source, "medication prescriptions"))
    lab_cases = [
        _AdaptCase("alternative_lab", pair.asked["lay"], pair.asked[database], (pair.alternative[database],), True,
                   f"a lab test recorded exactly as '{pair.asked[database]}'",
                   f"results of {pair.alternative['lay']} instead", LAB_SOURCES[database], "lab tests")
        for pair in lay_terms.alternative_labs
        if pair.asked.get(database) and pair.asked[database] not in labs and pair.alternative.get(database) in labs]
    return {name: cases for name, cases in
            (("brand_generic", brand_cases), ("alternative_lab", lab_cases), ("drug_class", class_cases)) if cases}
