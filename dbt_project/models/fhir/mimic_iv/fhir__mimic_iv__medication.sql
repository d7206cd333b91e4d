{{ config(alias='medication') }}
-- FHIR Medications of the prescriptions that the MIMIC-IV profiles' patients have a MedicationRequest for (namespace
-- MedicationPrescriptions, key drug[--formulary_drug_cd][--ndc] of raw values; see fhir_prescription_drugs):
-- one per drug of those prescriptions, identified and coded by NDC, formulary code and original-case name (as
-- MIMIC-IV on FHIR's identifiers; the NDC coding in HL7's NDC system), and one per mix (a pharmacy_id with several
-- drugs, e.g. a drug and its base bag) whose ingredients are its drugs. A Medication has no patient.
{{ fhir_medication_resources('int_ehrsql2024__mimic_iv__prescriptions') }}
