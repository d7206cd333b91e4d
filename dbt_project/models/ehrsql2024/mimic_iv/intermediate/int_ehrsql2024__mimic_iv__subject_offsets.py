"""Per-patient time offset, docs/benchmarks.md#ehrsql-2024-seeded-draws (draw (a)) and docs/benchmarks.md#ehrsql-2024-build-algorithm (step 3).

One seeded draw per patient, in order of the patient's first appearance in admissions (file order),
picks the year the first admission moves to; every time of the patient moves by
(that year - year of the first admission) x 365 days. The generator state after the draws is kept in
`rng_state` so that the cohort draws continue the same sequence.
"""

import json


def model(dbt, session):
    dbt.config(materialized="table")
    from ehrbench.ehrsql.sampling import draw_first_years, new_rng, rng_state

    params = json.loads(dbt.config.get("ehrsql2024_params"))
    admissions = dbt.ref("stg_mimic_iv__admissions")
    subjects = admissions.query("admissions", """
        with ordered as (
            select subject_id, admittime, row_number() over () as file_row from admissions
        )
        select subject_id, min(file_row) as first_row, year(min(admittime)) as earliest_year
        from ordered
        group by subject_id
        order by first_row
    """).fetchall()

    rng = new_rng(int(params["seed"]))
    years = draw_first_years(rng, len(subjects), int(params["start_year"]), int(params["time_span"]))
    state = rng_state(rng)
    earliest = [year for _, _, year in subjects]
    import pandas as pd

    return pd.DataFrame({
        "subject_id": pd.Series([subject for subject, _, _ in subjects], dtype="int64"),
        "appearance_order": pd.Series(range(len(subjects)), dtype="int64"),
        "earliest_year": pd.Series(earliest, dtype="int64"),
        "first_year": pd.Series(years, dtype="int64"),
        # whole years of 365 days, no leap-day correction (as the original, which shifts in minutes)
        "offset_days": pd.Series([(first - early) * 365 for first, early in zip(years, earliest, strict=True)],
                                 dtype="int64"),
        "rng_state": pd.Series([state] * len(subjects), dtype="object"),
    })
