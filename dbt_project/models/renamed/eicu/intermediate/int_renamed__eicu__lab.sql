-- EHR-ChatQA's eICU database: lab results (macros/eicu_database.sql).
{{ eicu_events('renamed', 'lab') }}
