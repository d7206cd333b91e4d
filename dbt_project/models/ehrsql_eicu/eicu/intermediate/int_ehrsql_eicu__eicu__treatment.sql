-- EHRSQL (2022)'s eICU database: treatments (macros/eicu_database.sql).
{{ eicu_events('ehrsql_eicu', 'treatment') }}
