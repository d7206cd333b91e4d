-- EHR-ChatQA's eICU database: periodic vital signs (macros/eicu_database.sql).
{{ eicu_events('renamed', 'vitalperiodic') }}
