"""The patients of the database, docs/benchmarks.md#ehrsql-2024-seeded-draws (draws (b)-(c)) and docs/benchmarks.md#ehrsql-2024-build-algorithm (step 4).

Continues the generator of the offset draws: first `num_patients * current_ratio` patients with a
current admission (dischtime NULL after the shift), then the rest among discharged patients; both
pools are unique subject ids in order of first appearance in the shifted admissions. A pool smaller
than its target is taken whole. `rng_state` is the generator state after these draws (for the costs).
"""

import json


def model(dbt, session):
    dbt.config(materialized="table")
    from ehrbench.ehrsql.sampling import restore_rng, rng_state, sample_cohort

    params = json.loads(dbt.config.get("ehrsql2024_params"))
    offsets = dbt.ref("int_ehrsql2024__mimic_iv__subject_offsets")
    state_row = offsets.query("offsets", "select rng_state from offsets limit 1").fetchone()
    admissions = dbt.ref("int_ehrsql2024__mimic_iv__admissions_shifted")
    rows = admissions.query("admissions",
                            "select subject_id, is_current from admissions order by file_row").fetchall()

    rng = restore_rng(state_row[0])
    current, discharged = sample_cohort(rng, [(int(s), bool(c)) for s, c in rows],
                                        int(params["num_patients"]), float(params["current_ratio"]))
    state = rng_state(rng)
    import pandas as pd

    subjects = current + discharged
    return pd.DataFrame({
        "subject_id": pd.Series(subjects, dtype="int64"),
        "sample_order": pd.Series(range(len(subjects)), dtype="int64"),
        "is_current_sample": pd.Series([True] * len(current) + [False] * len(discharged), dtype="bool"),
        "rng_state": pd.Series([state] * len(subjects), dtype="object"),
    })
