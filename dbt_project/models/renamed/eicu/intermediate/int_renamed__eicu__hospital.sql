-- EHR-ChatQA's eICU database: hospitals (macros/eicu_database.sql).
{{ eicu_hospital() }}
