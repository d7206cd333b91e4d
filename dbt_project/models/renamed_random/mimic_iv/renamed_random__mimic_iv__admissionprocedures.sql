{{ config(alias=renamed_random_table_name('mimic_iv', 'admissionprocedures')) }}
{{ renamed_random_select('mimic_iv', 'admissionprocedures') }}
