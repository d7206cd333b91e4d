{{ config(alias=renamed_random_table_name('mimic_iv', 'demographics')) }}
{{ renamed_random_select('mimic_iv', 'demographics') }}
