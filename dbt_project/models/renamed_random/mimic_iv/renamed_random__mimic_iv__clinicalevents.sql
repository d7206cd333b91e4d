{{ config(alias=renamed_random_table_name('mimic_iv', 'clinicalevents')) }}
{{ renamed_random_select('mimic_iv', 'clinicalevents') }}
