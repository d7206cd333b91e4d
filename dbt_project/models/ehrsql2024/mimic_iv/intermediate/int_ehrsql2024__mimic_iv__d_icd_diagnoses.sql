-- The published build drops three diagnosis titles that are also procedure titles (docs/benchmarks.md#ehrsql-2024-build-algorithm (step 5)).
{{ ehrsql2024_icd_dictionary('stg_mimic_iv__d_icd_diagnoses', dropped_titles=[
    'artificial insemination', 'dental examination', 'insertion of intrauterine contraceptive device']) }}
