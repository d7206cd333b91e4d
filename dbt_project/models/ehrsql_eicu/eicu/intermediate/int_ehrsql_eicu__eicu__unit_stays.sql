-- EHRSQL (2022)'s eICU database: unit stays passing the published filters, in the loop order (macros/eicu_database.sql).
{{ eicu_unit_stays('ehrsql_eicu') }}
