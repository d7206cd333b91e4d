{{ config(alias=renamed_random_table_name('eicu', 'icupatient')) }}
{{ renamed_random_select('eicu', 'icupatient') }}
