{{ config(alias='cost') }}
{{ mimic_iv_cost_rows('ehrsql2024') }}
order by row_id
