-- EHRSQL (2022)'s eICU database: intake/output rows (macros/eicu_database.sql).
{{ eicu_events('ehrsql_eicu', 'intakeoutput') }}
