{{ config(alias='raw_events', materialized='view') }}
-- The MEDS data of the raw timeline: MIMIC-IV's own (de-identified) times; a view, which ehrbench.meds.export reads a
-- shard at a time. Sorted by subject, then time with the static events first, as MEDS requires within a shard.
select * from {{ ref('int_meds__mimic_iv__events') }}
order by subject_id, time nulls first, code, numeric_value nulls first, text_value nulls first
