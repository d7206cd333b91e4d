{{ config(alias=renamed_random_table_name('eicu', 'hospital')) }}
{{ renamed_random_select('eicu', 'hospital') }}
