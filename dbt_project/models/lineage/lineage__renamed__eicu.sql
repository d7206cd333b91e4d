{{ config(alias='renamed__eicu') }}
-- Also the lineage of renamed_random/eicu: same rows and ids, other names (hidden rename map).
{{ eicu_lineage('renamed') }}
order by table_name, row_id
