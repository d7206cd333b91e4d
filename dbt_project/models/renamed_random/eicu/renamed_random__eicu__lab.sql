{{ config(alias=renamed_random_table_name('eicu', 'lab')) }}
{{ renamed_random_select('eicu', 'lab') }}
