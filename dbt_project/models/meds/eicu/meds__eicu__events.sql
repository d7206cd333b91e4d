{{ config(alias='events', materialized='view') }}
-- The MEDS data of eICU-CRD on the ETL's own pseudo-timeline (eICU has no dates; see int_meds__eicu__events); a view,
-- which ehrbench.meds.export reads a shard at a time and sorts (subject, then time with the static events first; not
-- sorted here, as meds__mimic_iv__raw_events).
select * from {{ ref('int_meds__eicu__events') }}
