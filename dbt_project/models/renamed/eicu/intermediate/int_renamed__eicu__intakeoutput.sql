-- EHR-ChatQA's eICU database: intake/output rows (macros/eicu_database.sql).
{{ eicu_events('renamed', 'intakeoutput') }}
