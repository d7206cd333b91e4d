{{ config(alias=renamed_random_table_name('mimic_iv', 'procedurecodes')) }}
{{ renamed_random_select('mimic_iv', 'procedurecodes') }}
