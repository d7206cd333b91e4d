{{ config(alias=renamed_random_table_name('eicu', 'allergy_reaction')) }}
{{ renamed_random_select('eicu', 'allergy_reaction') }}
