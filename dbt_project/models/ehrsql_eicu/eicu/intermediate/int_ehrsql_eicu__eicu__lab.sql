-- EHRSQL (2022)'s eICU database: lab results (macros/eicu_database.sql).
{{ eicu_events('ehrsql_eicu', 'lab') }}
