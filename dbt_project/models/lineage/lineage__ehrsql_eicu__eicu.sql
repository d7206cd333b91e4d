{{ config(alias='ehrsql_eicu__eicu') }}
{{ eicu_lineage('ehrsql_eicu') }}
order by table_name, row_id
