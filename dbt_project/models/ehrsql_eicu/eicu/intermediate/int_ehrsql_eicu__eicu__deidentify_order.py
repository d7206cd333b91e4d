"""EHRSQL (2022)'s de-identification (docs/benchmarks.md#ehrsql-eicu-database): per event table, row `position`
takes the shuffled columns of row `source_position` (ehrbench.ehrsql.eicu_sampling.deidentify_order, a fresh
default_rng(0) per table). Positions number the rows of int_ehrsql_eicu__eicu__<table>_rows. Enabled, with those
models, only when the var group's `deidentify` is true."""

import pyarrow as pa

TABLES = ("diagnosis", "treatment", "lab", "medication", "allergy", "intakeoutput", "microlab")


def model(dbt, session):
    dbt.config(materialized="table")
    from ehrbench.ehrsql.eicu_sampling import deidentify_order

    # dbt needs literal ref() arguments
    relations = {
        "diagnosis": dbt.ref("int_ehrsql_eicu__eicu__diagnosis_rows"),
        "treatment": dbt.ref("int_ehrsql_eicu__eicu__treatment_rows"),
        "lab": dbt.ref("int_ehrsql_eicu__eicu__lab_rows"),
        "medication": dbt.ref("int_ehrsql_eicu__eicu__medication_rows"),
        "allergy": dbt.ref("int_ehrsql_eicu__eicu__allergy_rows"),
        "intakeoutput": dbt.ref("int_ehrsql_eicu__eicu__intakeoutput_rows"),
        "microlab": dbt.ref("int_ehrsql_eicu__eicu__microlab_rows"),
    }
    parts = []
    for table in TABLES:
        n_rows = relations[table].aggregate("count(*)").fetchone()[0]
        parts.append(pa.table({
            "table_name": pa.array([table] * n_rows, pa.string()),
            "position": pa.array(range(n_rows), pa.int64()),
            "source_position": pa.array(deidentify_order(n_rows), pa.int64()),
        }))
    return pa.concat_tables(parts)
