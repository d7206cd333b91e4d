"""Seeded synthetic cost per event key, as the published EHRSQL eICU cost table.

numpy default_rng(seed): mean_costs = rng.poisson(lam=10, size=4); then, for diagnosis names,
lab names, treatment names and drug names in that order, one round(rng.normal(mean, 1.0), 2) per
distinct key in order of first appearance (lowest renumbered event id). The published code uses
mean_costs[0] for both diagnoses and labs (mean_costs[1] is never used); kept as published.
"""

import numpy as np
import pyarrow as pa

BLOCKS = (
    # (eventtype, key column, id column, index into mean_costs)
    ("diagnosis", "diagnosisname", "diagnosisid", 0),
    ("lab", "labname", "labid", 0),
    ("treatment", "treatmentname", "treatmentid", 2),
    ("medication", "drugname", "medicationid", 3),
)


def draw_costs(keys_by_block, *, seed):
    """keys_by_block: [(eventtype, mean index, [keys in first-appearance order])]."""
    rng = np.random.default_rng(seed)
    mean_costs = rng.poisson(lam=10, size=4)
    out = []
    for eventtype, mean_index, keys in keys_by_block:
        for key in keys:
            out.append((eventtype, key, round(float(rng.normal(loc=mean_costs[mean_index], scale=1.0)), 2)))
    return out


def model(dbt, session):
    dbt.config(materialized="table")
    seed = int(dbt.config.get("ehrsql_eicu_seed"))

    # dbt needs literal ref() arguments
    relations = {
        "diagnosis": dbt.ref("int_ehrsql_eicu__eicu__diagnosis"),
        "lab": dbt.ref("int_ehrsql_eicu__eicu__lab"),
        "treatment": dbt.ref("int_ehrsql_eicu__eicu__treatment"),
        "medication": dbt.ref("int_ehrsql_eicu__eicu__medication"),
    }
    keys_by_block = []
    for eventtype, key_column, id_column, mean_index in BLOCKS:
        events = relations[eventtype]
        rows = events.aggregate(f"{key_column}, min({id_column}) as first_id", key_column).order("first_id").fetchall()
        keys_by_block.append((eventtype, mean_index, [row[0] for row in rows]))

    drawn = draw_costs(keys_by_block, seed=seed)
    columns = list(zip(*drawn, strict=True)) if drawn else [[], [], []]
    return pa.table(
        {
            "eventtype": pa.array(columns[0], pa.string()),
            "cost_key": pa.array(columns[1], pa.string()),
            "cost": pa.array(columns[2], pa.float64()),
        }
    )
