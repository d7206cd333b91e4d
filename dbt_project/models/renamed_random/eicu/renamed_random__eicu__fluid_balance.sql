{{ config(alias=renamed_random_table_name('eicu', 'fluid_balance')) }}
{{ renamed_random_select('eicu', 'fluid_balance') }}
