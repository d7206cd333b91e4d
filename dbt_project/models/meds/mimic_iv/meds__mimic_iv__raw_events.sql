{{ config(alias='raw_events', materialized='view') }}
-- The MEDS data of the raw timeline: MIMIC-IV's own (de-identified) times; a view, which ehrbench.meds.export reads a
-- shard at a time and sorts as MEDS requires within a shard (subject, then time with the static events first). Not
-- sorted here: the build copies this view's rows for the meds stage (ehrbench.side_stages), and a sort of every event
-- there (at 10,000 patients 103 M: 40 s against 14 s) would only be done again per shard.
select * from {{ ref('int_meds__mimic_iv__events') }}
