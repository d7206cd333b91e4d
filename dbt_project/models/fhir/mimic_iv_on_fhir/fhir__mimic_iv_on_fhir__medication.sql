{{ config(alias='medication') }}
-- The Medications of every prescriptions drug and mix (kind-lab/mimic-fhir sql/medication/medication_prescriptions.sql,
-- medication_mix.sql; key drug[--formulary_drug_cd][--ndc], the key FHIR-AgentBench's gold ids have).
{{ fhir_medication_resources(none) }}
