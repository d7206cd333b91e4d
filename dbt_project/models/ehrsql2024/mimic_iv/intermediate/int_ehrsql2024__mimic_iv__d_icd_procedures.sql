{{ ehrsql2024_icd_dictionary('stg_mimic_iv__d_icd_procedures') }}
