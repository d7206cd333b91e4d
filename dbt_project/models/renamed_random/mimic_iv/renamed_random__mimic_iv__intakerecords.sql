{{ config(alias=renamed_random_table_name('mimic_iv', 'intakerecords')) }}
{{ renamed_random_select('mimic_iv', 'intakerecords') }}
