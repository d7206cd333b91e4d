"""Synthetic cost per event key, docs/benchmarks.md#ehrsql-2024-seeded-draws (draw (d)).

Continues the generator after the cohort draws: four Poisson(10) mean costs, then one
round(Normal(mean, 1), 2) per distinct key in sorted order for diagnoses (icd_code), labs (itemid,
sorted as integers), procedures (icd_code) and prescriptions (drug), keys taken from the final event
tables. `cost_key` is the key as text.
"""


def model(dbt, session):
    dbt.config(materialized="table")
    import pandas as pd

    from ehrbench.ehrsql.sampling import draw_cost_table, restore_rng

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
    columns = draw_cost_table(restore_rng(state_row[0]), blocks)
    return pd.DataFrame({"event_type": pd.Series(columns["event_type"], dtype="object"),
                         "cost_key": pd.Series(columns["cost_key"], dtype="object"),
                         "cost": pd.Series(columns["cost"], dtype="float64")})
