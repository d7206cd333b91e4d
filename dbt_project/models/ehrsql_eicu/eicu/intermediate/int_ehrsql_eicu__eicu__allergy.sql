-- EHRSQL (2022)'s eICU database: allergies (macros/eicu_database.sql).
{{ eicu_events('ehrsql_eicu', 'allergy') }}
