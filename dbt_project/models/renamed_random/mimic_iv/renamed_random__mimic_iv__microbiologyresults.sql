{{ config(alias=renamed_random_table_name('mimic_iv', 'microbiologyresults')) }}
{{ renamed_random_select('mimic_iv', 'microbiologyresults') }}
