{{ config(alias=renamed_random_table_name('mimic_iv', 'labtesttypes')) }}
{{ renamed_random_select('mimic_iv', 'labtesttypes') }}
