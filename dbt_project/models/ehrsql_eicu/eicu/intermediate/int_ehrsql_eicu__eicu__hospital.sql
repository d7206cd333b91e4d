-- EHRSQL (2022)'s eICU database: hospitals (macros/eicu_database.sql).
{{ eicu_hospital() }}
