{{ config(alias='observation_micro_susc') }}
-- FHIR Observations of the antibiotic susceptibilities of the MIMIC-IV profiles: one per EHRSQL-2024
-- microbiologyevents row with an antibiotic (id from microevent_id; shifted charttime), shaped like MIMIC-IV on FHIR's
-- ObservationMicroSusc: code = antibiotic (original MIMIC-IV name), value = the interpretation (S/R/I/P mapped to
-- v3-ObservationInterpretation as MIMIC-IV on FHIR maps them), derivedFrom -> its organism observation, the dilution
-- (with its comparator) in the dilution-details extension, comments as note.
{{ fhir_micro_susc_resources('int_ehrsql2024__mimic_iv__microbiologyevents') }}
