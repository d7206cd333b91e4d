"""The columns of the audit extract's tables (dbt_project/models/dq/), for hand-made extracts in tests."""

COLUMNS = {
    "patients": ["patient_id", "sex", "birth_date", "death_date"],
    "admissions": ["admission_id", "patient_id", "admit_time", "discharge_time", "admission_type",
                   "admission_location", "discharge_location", "insurance", "marital_status", "age_at_admission"],
    "icu_stays": ["stay_id", "patient_id", "admission_id", "first_care_unit", "last_care_unit", "in_time", "out_time"],
    "diagnoses": ["patient_id", "admission_id", "sequence", "icd_code", "icd_version", "description"],
    "lab_tests": ["test_code", "name", "fluid", "category"],
    "lab_results": ["patient_id", "admission_id", "test_code", "charted_at", "value", "unit", "ref_low", "ref_high",
                    "flag", "priority"],
    "chart_items": ["item_code", "name", "abbreviation", "category", "unit", "low_normal", "high_normal"],
    "chart_observations": ["patient_id", "admission_id", "stay_id", "item_code", "charted_at", "value", "unit"],
    "medication_orders": ["patient_id", "admission_id", "start_time", "stop_time", "drug_type", "drug",
                          "product_strength", "dose", "dose_unit", "route"],
}
