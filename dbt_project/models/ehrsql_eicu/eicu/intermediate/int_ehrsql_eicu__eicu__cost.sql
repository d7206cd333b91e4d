-- EHRSQL (2022)'s eICU database: one cost row per diagnosis, lab, treatment and medication event (macros/eicu_database.sql).
{{ eicu_cost('ehrsql_eicu') }}
