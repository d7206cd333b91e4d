"""Seeded cost per event name (ehrbench.ehrsql.eicu_sampling.draw_event_costs), continuing the generator from the
state int_renamed__eicu__admit_dates left it in (a new default_rng(seed) when there was nothing to draw): for
diagnosis, lab, treatment and drug names in that order, one draw per distinct name in order of first appearance in
the finished table (its lowest renumbered id)."""

import pyarrow as pa


def model(dbt, session):
    dbt.config(materialized="table")
    from ehrbench.ehrsql.eicu_sampling import COST_BLOCKS, draw_event_costs
    from ehrbench.ehrsql.sampling import new_rng, restore_rng

    states = dbt.ref("int_renamed__eicu__admit_dates").project("rng_state").limit(1).fetchall()
    # dbt needs literal ref() arguments
    relations = {
        "diagnosis": dbt.ref("int_renamed__eicu__diagnosis"),
        "lab": dbt.ref("int_renamed__eicu__lab"),
        "treatment": dbt.ref("int_renamed__eicu__treatment"),
        "medication": dbt.ref("int_renamed__eicu__medication"),
    }
    names = {eventtype: [row[0] for row in relations[eventtype].aggregate(
        f"{name_column}, min({id_column}) as first_id", name_column).order("first_id").fetchall()]
        for eventtype, name_column, id_column, _ in COST_BLOCKS}

    rng = restore_rng(states[0][0]) if states else new_rng(int(dbt.config.get("ehrsql_eicu_seed")))
    drawn = draw_event_costs(rng, names)
    columns = list(zip(*drawn, strict=True)) if drawn else [[], [], []]
    return pa.table(
        {
            "eventtype": pa.array(columns[0], pa.string()),
            "cost_key": pa.array(columns[1], pa.string()),
            "cost": pa.array(columns[2], pa.float64()),
        }
    )
