-- EHR-ChatQA's eICU database: treatments (macros/eicu_database.sql).
{{ eicu_events('renamed', 'treatment') }}
