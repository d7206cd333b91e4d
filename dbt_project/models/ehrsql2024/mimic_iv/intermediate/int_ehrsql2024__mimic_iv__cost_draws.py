"""Synthetic cost per event key, DESIGN §5.1 draw (d).

Continues the generator after the cohort draws: four Poisson(10) mean costs, then one
round(Normal(mean, 1), 2) per distinct key in sorted order for diagnoses (icd_code), labs (itemid,
sorted as integers), procedures (icd_code) and prescriptions (drug), keys taken from the final event
tables. `cost_key` is the key as text.
"""


def model(dbt, session):
    dbt.config(materialized="table")
    from ehrbench.ehrsql.sampling import draw_costs, draw_mean_costs, restore_rng

    cohort = dbt.ref("int_ehrsql2024__mimic_iv__cohort")
    state_row = cohort.query("cohort", "select rng_state from cohort limit 1").fetchone()

    def keys(relation, column):
        return [row[0] for row in relation.query("events", f"select distinct {column} from events").fetchall()]

    blocks = [
        ("diagnoses_icd", keys(dbt.ref("ehrsql2024__mimic_iv__diagnoses_icd"), "icd_code")),
        ("labevents", [int(k) for k in keys(dbt.ref("ehrsql2024__mimic_iv__labevents"), "itemid")]),
        ("procedures_icd", keys(dbt.ref("ehrsql2024__mimic_iv__procedures_icd"), "icd_code")),
        ("prescriptions", keys(dbt.ref("ehrsql2024__mimic_iv__prescriptions"), "drug")),
    ]

    rng = restore_rng(state_row[0])
    means = draw_mean_costs(rng)
    event_types, cost_keys, costs = [], [], []
    for (event_type, block_keys), mean in zip(blocks, means, strict=True):
        for key, cost in draw_costs(rng, block_keys, mean).items():
            event_types.append(event_type)
            cost_keys.append(str(key))
            costs.append(cost)
    import pandas as pd

    return pd.DataFrame({
        "event_type": pd.Series(event_types, dtype="object"),
        "cost_key": pd.Series(cost_keys, dtype="object"),
        "cost": pd.Series(costs, dtype="float64"),
    })
