"""FHIR R4 view of the MIMIC-IV profiles (DESIGN §5.4): resource ids compatible with MIMIC-IV on FHIR."""
