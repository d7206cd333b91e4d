{{ config(alias=renamed_random_table_name('mimic_iv', 'patienttransfers')) }}
{{ renamed_random_select('mimic_iv', 'patienttransfers') }}
