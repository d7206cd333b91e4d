{{ config(alias=renamed_random_table_name('mimic_iv', 'admissiondiagnoses')) }}
{{ renamed_random_select('mimic_iv', 'admissiondiagnoses') }}
