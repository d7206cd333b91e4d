{{ config(alias=renamed_random_table_name('mimic_iv', 'hospitaladmissions')) }}
{{ renamed_random_select('mimic_iv', 'hospitaladmissions') }}
