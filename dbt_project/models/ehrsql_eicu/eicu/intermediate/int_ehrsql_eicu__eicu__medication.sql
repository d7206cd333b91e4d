-- EHRSQL (2022)'s eICU database: medication orders (macros/eicu_database.sql).
{{ eicu_events('ehrsql_eicu', 'medication') }}
