"""Synthetic cost per event key of the renamed (EHR-ChatQA) MIMIC-IV database, docs/benchmarks.md#ehr-chatqa-renamed-schemas.

EHR-ChatQA's own cost values come from draws that cannot be reproduced; this applies the docs/benchmarks.md#ehrsql-2024-seeded-draws (draw (d))
procedure to this profile's own keys: the same generator state (after the cohort draws) and key order as
int_ehrsql2024__mimic_iv__cost_draws, over the event tables without the label-owner filter. ICD keys keep
the 'icd<version>|<code>' form so that they sort as in the ehrsql2024 profile.
"""


def model(dbt, session):
    dbt.config(materialized="table")
    import pandas as pd

    from ehrbench.ehrsql.sampling import draw_cost_table, restore_rng

    cohort = dbt.ref("int_ehrsql2024__mimic_iv__cohort")
    state_row = cohort.query("cohort", "select rng_state from cohort limit 1").fetchone()

    def keys(relation, expression):
        return [row[0] for row in relation.query("events", f"select distinct {expression} from events").fetchall()]

    icd_key = "'icd' || icd_version || '|' || icd_code"
    blocks = [
        ("diagnoses_icd", keys(dbt.ref("int_ehrsql2024__mimic_iv__diagnoses_icd"), icd_key)),
        ("labevents", [int(k) for k in keys(dbt.ref("int_ehrsql2024__mimic_iv__labevents"), "itemid")]),
        ("procedures_icd", keys(dbt.ref("int_ehrsql2024__mimic_iv__procedures_icd"), icd_key)),
        ("prescriptions", keys(dbt.ref("int_ehrsql2024__mimic_iv__prescriptions"), "drug")),
    ]
    columns = draw_cost_table(restore_rng(state_row[0]), blocks)
    return pd.DataFrame({"event_type": pd.Series(columns["event_type"], dtype="object"),
                         "cost_key": pd.Series(columns["cost_key"], dtype="object"),
                         "cost": pd.Series(columns["cost"], dtype="float64")})
