-- EHR-ChatQA's eICU database: the stays of the database (macros/eicu_database.sql).
{{ eicu_patient('renamed') }}
