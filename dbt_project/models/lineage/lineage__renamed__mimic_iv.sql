{{ config(alias='renamed__mimic_iv') }}
-- Also the lineage of renamed_random/mimic_iv: same rows and row ids, other names (hidden rename map).
{{ mimic_iv_lineage('renamed') }}
order by table_name, row_id
