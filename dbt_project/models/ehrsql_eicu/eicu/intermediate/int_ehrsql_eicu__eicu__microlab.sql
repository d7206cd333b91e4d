-- EHRSQL (2022)'s eICU database: microbiology cultures (macros/eicu_database.sql).
{{ eicu_events('ehrsql_eicu', 'microlab') }}
