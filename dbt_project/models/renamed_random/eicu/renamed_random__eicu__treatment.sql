{{ config(alias=renamed_random_table_name('eicu', 'treatment')) }}
{{ renamed_random_select('eicu', 'treatment') }}
