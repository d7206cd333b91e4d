-- The published build drops three diagnosis titles that are also procedure titles (DESIGN §5.1 step 5).
{{ ehrsql2024_icd_dictionary('stg_mimic_iv__d_icd_diagnoses', dropped_titles=[
    'artificial insemination', 'dental examination', 'insertion of intrauterine contraceptive device']) }}
