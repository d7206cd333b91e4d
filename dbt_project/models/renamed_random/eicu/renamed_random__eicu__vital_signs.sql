{{ config(alias=renamed_random_table_name('eicu', 'vital_signs')) }}
{{ renamed_random_select('eicu', 'vital_signs') }}
