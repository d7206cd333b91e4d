{{ config(alias=renamed_random_table_name('eicu', 'condition')) }}
{{ renamed_random_select('eicu', 'condition') }}
