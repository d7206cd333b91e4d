"""metadata/subject_splits.parquet: every patient of the export in one of MEDS's splits, train (80 %), tuning (10 %)
and held_out (the rest), by a permutation of the sorted subject ids drawn from keyed_rng(build seed, "meds-splits")."""

import json


def model(dbt, session):
    dbt.config(materialized="table", alias="subject_splits")
    from ehrbench.meds.splits import splits_frame

    params = json.loads(dbt.config.get("ehrsql2024_params"))
    subjects = [row[0] for row in dbt.ref("stg_mimic_iv__patients").query(
        "patients", "select subject_id from patients order by subject_id").fetchall()]
    return splits_frame(subjects, int(params["seed"]))
