{{ config(alias=renamed_random_table_name('mimic_iv', 'outputrecords')) }}
{{ renamed_random_select('mimic_iv', 'outputrecords') }}
