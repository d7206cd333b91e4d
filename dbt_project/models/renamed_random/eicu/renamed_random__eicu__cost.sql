{{ config(alias=renamed_random_table_name('eicu', 'cost')) }}
{{ renamed_random_select('eicu', 'cost', table_name_columns=['event_type']) }}
