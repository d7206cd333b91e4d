{{ config(alias=renamed_random_table_name('mimic_iv', 'clinicalitemtypes')) }}
{{ renamed_random_select('mimic_iv', 'clinicalitemtypes', table_name_columns=['itemtype']) }}
