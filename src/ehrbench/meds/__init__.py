"""A build's data as MEDS (Medical Event Data Standard) datasets: made by dbt (models/meds/), written and checked
against the `meds` package's schemas here."""
