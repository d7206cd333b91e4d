"""metadata/subject_splits.parquet of the eICU export: every subject (health-system stay) in one of MEDS's splits,
train (80 %), tuning (10 %) and held_out, by a permutation of the sorted subject ids drawn from
keyed_rng(build seed, "meds-splits") (ehrbench.meds.splits), as the MIMIC-IV export's."""

import json


def model(dbt, session):
    dbt.config(materialized="table", alias="subject_splits")
    from ehrbench.meds.splits import splits_frame

    params = json.loads(dbt.config.get("ehrsql2024_params"))
    subjects = [row[0] for row in dbt.ref("int_meds__eicu__events").query(
        "events", "select distinct subject_id from events order by subject_id").fetchall()]
    return splits_frame(subjects, int(params["seed"]))
