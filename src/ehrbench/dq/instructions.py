"""The agent-visible instruction of an audit task. It describes the extract in neutral words: no source dataset,
project or benchmark is named (FORBIDDEN_NAMES is checked on every agent-visible file of a build)."""

from __future__ import annotations

from collections.abc import Mapping

FAMILIES = {
    "impossible_values": "Impossible values: measurements no living patient can have, or that cannot be true in "
                         "the unit recorded with them.",
    "inconsistency": "Inconsistencies: the same measurement recorded more than once with values that cannot all "
                     "be true.",
    "demographic_contradiction": "Demographic contradictions: a patient's recorded sex or age that the rest of "
                                 "their record contradicts.",
    "temporal_violation": "Temporal violations: events recorded in an order that cannot happen.",
    "orphan_reference": "Broken references: rows that point at an admission or a code that does not exist, or "
                        "that belongs to someone else.",
}

SUBTYPES = {
    "range_extreme": "a value far beyond the range a human body can produce",
    "decimal_shift": "a value multiplied by 10, 100 or 1000, as if its decimal point had slipped",
    "unit_confusion": "a value converted into another unit while the row still carries its original unit",
    "unit_label_mismatch": "a unit replaced by another unit of the same quantity while the value was left as it was",
    "in_table_duplicate": "a measurement repeated in the same table a few minutes apart with a different value",
    "cross_table_copy": "a lab result repeated in the bedside chart at the same time with a different value",
    "sex_flip": "a patient's sex changed although their record holds findings only the original sex can have",
    "opposite_sex_marker_drug": "a medication order that only patients of the other sex receive",
    "geriatric_drug_age": "an implausibly young age at an admission during which drugs for older adults were given",
    "discharge_before_admission": "a hospital discharge recorded before its admission",
    "stop_before_start": "a medication order that stops before it starts",
    "death_before_admission": "a date of death before one of the patient's admissions",
    "unknown_admission": "a row referring to an admission that does not exist",
    "other_patients_admission": "a row referring to an admission of a different patient",
    "unknown_code": "a lab test or chart item code that its dictionary does not define",
}

TABLES = {
    "patients": "one row per patient: sex, date of birth, date of death",
    "admissions": "hospital admissions: admission and discharge times, type, origin and destination, insurance, "
                  "age at admission",
    "icu_stays": "intensive-care stays within admissions",
    "diagnoses": "billed diagnoses per admission (ICD-9 or ICD-10 code and title)",
    "lab_tests": "dictionary of lab test codes",
    "lab_results": "numeric lab results with unit, reference range and flag",
    "chart_items": "dictionary of bedside chart item codes with their unit and normal range",
    "chart_observations": "numeric bedside observations (vital signs, respiratory and point-of-care values) of "
                          "intensive-care stays",
    "medication_orders": "medication orders with drug, dose, route, start and stop times",
}

FORBIDDEN_NAMES = ("mimic", "physionet", "eicu", "ehrsql", "chatqa", "agentbench", "beth israel", "bidmc",
                   "deaconess", "mit-lcp", "philips")


def instruction(families: list[str], tables: Mapping[str, tuple[int, list[str]]],
                clues: Mapping[str, list[str]] | None = None) -> str:
    """The task text. `tables`: name -> (rows, columns); `clues` (the clues variant): sub-type -> tables it
    touched."""
    lines = [
        "# Data-quality audit", "",
        "You are auditing an extract of a hospital's electronic health records before it is released for research. "
        "Errors were introduced into some of its rows. They are of the following kind"
        + ("s" if len(families) > 1 else "") + ":", "",
        *(f"- {FAMILIES[family]}" for family in families), "",
    ]
    if clues:
        lines += ["The errors are of these sub-types (tables where they occur in brackets):", "",
                  *(f"- {SUBTYPES[subtype]} ({', '.join(touched)})" for subtype, touched in clues.items()), ""]
    lines += [
        "Find every row that is part of an introduced error.", "",
        "## The extract", "",
        "`data/` holds the tables as gzip-compressed CSV files, one per table. The first column, `_row_id`, "
        "identifies a row within its table. Times read `YYYY-MM-DD HH:MM:SS`, dates `YYYY-MM-DD`; an empty cell "
        "is a missing value. Dates were moved into the future to protect the patients; the time between a "
        "patient's events is real.", "",
        "| table | rows | content | columns |", "|---|---|---|---|",
        *(f"| `{name}` | {rows} | {TABLES[name]} | {', '.join(columns)} |" for name, (rows, columns) in tables.items()),
        "",
        "## What to submit", "",
        "A CSV file `flagged_rows.csv` with the header `table,_row_id` and one line per flagged row; `table` is the "
        "file name without `.csv.gz`.", "",
        "## Scoring", "",
        "An error may span several rows (a record and its repetition, or a changed row and the rows it now "
        "contradicts); flagging any one of them finds the error. Recall is the share of errors found; precision is "
        "the share of flagged rows that belong to an error. The audit passes when every error is found and at "
        "least 1 % of the flagged rows belong to errors. Genuine clinical abnormalities and the ordinary "
        "imperfections of hospital records are not introduced errors.", "",
    ]
    return "\n".join(lines)
