-- EHRSQL (2022)'s eICU database: diagnoses (macros/eicu_database.sql).
{{ eicu_events('ehrsql_eicu', 'diagnosis') }}
