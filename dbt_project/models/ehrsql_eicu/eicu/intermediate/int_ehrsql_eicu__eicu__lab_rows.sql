-- EHRSQL (2022)'s eICU database: lab results before the cohort and time filters, numbered in the de-identifying shuffle's order (macros/eicu_database.sql).
{{ config(enabled=var('ehrsql_eicu')['deidentify']) }}
{{ eicu_event_rows('ehrsql_eicu', 'lab') }}
