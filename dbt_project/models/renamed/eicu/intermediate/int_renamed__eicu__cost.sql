-- EHR-ChatQA's eICU database: one cost row per diagnosis, lab, treatment and medication event (macros/eicu_database.sql).
{{ eicu_cost('renamed') }}
