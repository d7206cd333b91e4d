-- EHR-ChatQA's eICU database: diagnoses (macros/eicu_database.sql).
{{ eicu_events('renamed', 'diagnosis') }}
