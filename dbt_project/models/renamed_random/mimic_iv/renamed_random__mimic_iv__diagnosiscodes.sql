{{ config(alias=renamed_random_table_name('mimic_iv', 'diagnosiscodes')) }}
{{ renamed_random_select('mimic_iv', 'diagnosiscodes') }}
