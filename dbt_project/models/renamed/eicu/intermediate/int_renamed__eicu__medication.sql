-- EHR-ChatQA's eICU database: medication orders (macros/eicu_database.sql).
{{ eicu_events('renamed', 'medication') }}
