{{ config(alias=renamed_random_table_name('mimic_iv', 'medicationorders')) }}
{{ renamed_random_select('mimic_iv', 'medicationorders') }}
