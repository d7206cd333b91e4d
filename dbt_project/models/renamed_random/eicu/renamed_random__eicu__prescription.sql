{{ config(alias=renamed_random_table_name('eicu', 'prescription')) }}
{{ renamed_random_select('eicu', 'prescription') }}
