"""EHRSQL (2022)'s patient sample (docs/benchmarks.md#ehrsql-eicu-database), continuing the time shift's generator
(ehrbench.ehrsql.sampling.sample_cohort): int(num_patients * current_ratio) patients among those with a current
stay (hospital discharge time NULL after the shift), then the rest among the others; both pools are unique
uniquepids in order of first appearance in patient.csv. A pool smaller than its target is taken whole (numpy raises
before drawing, so nothing is drawn; `pool_taken_whole` says so). num_patients null keeps every patient, with no
draw. rng_state is the generator's state afterwards (for the costs)."""

import pyarrow as pa


def model(dbt, session):
    dbt.config(materialized="table")
    from ehrbench.ehrsql.sampling import restore_rng, rng_state, sample_cohort

    num_patients = dbt.config.get("ehrsql_eicu_num_patients")
    state_rows = dbt.ref("int_ehrsql_eicu__eicu__admit_dates").project("rng_state").limit(1).fetchall()
    stays = dbt.ref("int_ehrsql_eicu__eicu__stays").query(
        "stays", "select uniquepid, hospitaldischargetime is null from stays order by file_row").fetchall()
    if not state_rows:  # no stay at all
        return pa.table({"uniquepid": pa.array([], pa.string()), "is_current_sample": pa.array([], pa.bool_()),
                         "pool_taken_whole": pa.array([], pa.bool_()), "rng_state": pa.array([], pa.string())})

    rng = restore_rng(state_rows[0][0])
    if num_patients in (None, "", "None"):
        patients = list(dict.fromkeys(uniquepid for uniquepid, _ in stays))
        current = {uniquepid for uniquepid, is_current in stays if is_current}
        flags = [uniquepid in current for uniquepid in patients]
        whole = [True] * len(patients)
    else:
        num_patients, ratio = int(num_patients), float(dbt.config.get("ehrsql_eicu_current_ratio"))
        current, others = sample_cohort(rng, [(uniquepid, bool(is_current)) for uniquepid, is_current in stays],
                                        num_patients, ratio)
        patients = current + others
        flags = [True] * len(current) + [False] * len(others)
        whole = ([len(current) < int(num_patients * ratio)] * len(current)
                 + [len(others) < num_patients - int(num_patients * ratio)] * len(others))
    state = rng_state(rng)
    return pa.table({
        "uniquepid": pa.array(patients, pa.string()),
        "is_current_sample": pa.array(flags, pa.bool_()),
        "pool_taken_whole": pa.array(whole, pa.bool_()),
        "rng_state": pa.array([state] * len(patients), pa.string()),
    })
