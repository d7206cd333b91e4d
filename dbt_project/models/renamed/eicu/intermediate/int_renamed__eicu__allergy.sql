-- EHR-ChatQA's eICU database: allergies (macros/eicu_database.sql).
{{ eicu_events('renamed', 'allergy') }}
