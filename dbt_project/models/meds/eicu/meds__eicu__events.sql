{{ config(alias='events', materialized='view') }}
-- The MEDS data of eICU-CRD on the ETL's own pseudo-timeline (eICU has no dates; see int_meds__eicu__events); a view,
-- which ehrbench.meds.export reads a shard at a time. Sorted by subject, then time with the static events first.
select * from {{ ref('int_meds__eicu__events') }}
order by subject_id, time nulls first, code, numeric_value nulls first, text_value nulls first
