-- EHR-ChatQA's eICU database: microbiology cultures (macros/eicu_database.sql).
{{ eicu_events('renamed', 'microlab') }}
