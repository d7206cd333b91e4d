{{ config(alias=renamed_random_table_name('mimic_iv', 'labresults')) }}
{{ renamed_random_select('mimic_iv', 'labresults') }}
