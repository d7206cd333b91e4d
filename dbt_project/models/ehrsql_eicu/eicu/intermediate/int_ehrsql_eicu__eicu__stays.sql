-- EHRSQL (2022)'s eICU database: accepted unit stays with shifted times, before the patient sample (macros/eicu_database.sql).
{{ eicu_shifted_stays('ehrsql_eicu') }}
