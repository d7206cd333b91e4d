-- EHRSQL (2022)'s eICU database: the stays of the database (macros/eicu_database.sql).
{{ eicu_patient('ehrsql_eicu') }}
