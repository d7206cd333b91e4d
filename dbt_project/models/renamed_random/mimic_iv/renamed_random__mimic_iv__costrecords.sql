{{ config(alias=renamed_random_table_name('mimic_iv', 'costrecords')) }}
{{ renamed_random_select('mimic_iv', 'costrecords', table_name_columns=['eventtype']) }}
