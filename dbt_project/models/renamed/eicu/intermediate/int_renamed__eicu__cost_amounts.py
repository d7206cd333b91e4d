"""Seeded synthetic cost per event name of EHR-ChatQA's eICU database (docs/benchmarks.md#ehr-chatqa-eicu-database,
draws 3 and 4).

The generator continues from the state the time shift left it in (int_renamed__eicu__admit_dates.rng_state; a new
default_rng(seed) when there was nothing to draw): mean_costs = rng.poisson(lam=10, size=4); then, for diagnosis
names, lab names, treatment names and drug names in that order, one round(rng.normal(mean, 1.0), 2) per distinct
name in order of first appearance in the finished table (its lowest renumbered id, i.e. the source file's row
order). Diagnoses and labs both use mean_costs[0] (mean_costs[1] is never used), as published.
"""

import json

import numpy as np
import pyarrow as pa

BLOCKS = (
    # (eventtype, name column, id column, index into mean_costs)
    ("diagnosis", "diagnosisname", "diagnosisid", 0),
    ("lab", "labname", "labid", 0),
    ("treatment", "treatmentname", "treatmentid", 2),
    ("medication", "drugname", "medicationid", 3),
)


def generator(state, seed):
    """The generator after the time shift's draws (its saved bit-generator state), or a fresh one."""
    rng = np.random.default_rng(seed)
    if state is not None:
        rng.bit_generator.state = json.loads(state)
    return rng


def draw_costs(rng, names_by_block):
    """names_by_block: [(eventtype, mean index, [names in first-appearance order])]."""
    mean_costs = rng.poisson(lam=10, size=4)
    out = []
    for eventtype, mean_index, names in names_by_block:
        for name in names:
            out.append((eventtype, name, round(float(rng.normal(loc=mean_costs[mean_index], scale=1.0)), 2)))
    return out


def model(dbt, session):
    dbt.config(materialized="table")
    seed = int(dbt.config.get("ehrsql_eicu_seed"))

    states = dbt.ref("int_renamed__eicu__admit_dates").project("rng_state").limit(1).fetchall()
    # dbt needs literal ref() arguments
    relations = {
        "diagnosis": dbt.ref("int_renamed__eicu__diagnosis"),
        "lab": dbt.ref("int_renamed__eicu__lab"),
        "treatment": dbt.ref("int_renamed__eicu__treatment"),
        "medication": dbt.ref("int_renamed__eicu__medication"),
    }
    names_by_block = []
    for eventtype, name_column, id_column, mean_index in BLOCKS:
        rows = relations[eventtype].aggregate(
            f"{name_column}, min({id_column}) as first_id", name_column).order("first_id").fetchall()
        names_by_block.append((eventtype, mean_index, [row[0] for row in rows]))

    drawn = draw_costs(generator(states[0][0] if states else None, seed), names_by_block)
    columns = list(zip(*drawn, strict=True)) if drawn else [[], [], []]
    return pa.table(
        {
            "eventtype": pa.array(columns[0], pa.string()),
            "cost_key": pa.array(columns[1], pa.string()),
            "cost": pa.array(columns[2], pa.float64()),
        }
    )
