{{ config(alias=renamed_random_table_name('eicu', 'microbiology')) }}
{{ renamed_random_select('eicu', 'microbiology') }}
