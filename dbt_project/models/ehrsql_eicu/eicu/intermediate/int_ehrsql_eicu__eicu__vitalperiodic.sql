-- EHRSQL (2022)'s eICU database: periodic vital signs (macros/eicu_database.sql).
{{ eicu_events('ehrsql_eicu', 'vitalperiodic') }}
