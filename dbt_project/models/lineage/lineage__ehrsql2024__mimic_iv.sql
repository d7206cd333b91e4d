{{ config(alias='ehrsql2024__mimic_iv') }}
{{ mimic_iv_lineage('ehrsql2024') }}
order by table_name, row_id
