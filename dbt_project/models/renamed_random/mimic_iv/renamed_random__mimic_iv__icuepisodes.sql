{{ config(alias=renamed_random_table_name('mimic_iv', 'icuepisodes')) }}
{{ renamed_random_select('mimic_iv', 'icuepisodes') }}
