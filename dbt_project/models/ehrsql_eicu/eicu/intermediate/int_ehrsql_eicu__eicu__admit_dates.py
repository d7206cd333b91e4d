"""The time shift's draws (ehrbench.ehrsql.eicu_sampling.draw_admit_dates): one sampled hospital admission date per
hospital stay, and the generator's state afterwards (rng_state), which the next draws continue. Only the small list
of (patient, discharge year, number of stays) goes through Python."""

import pyarrow as pa


def model(dbt, session):
    dbt.config(materialized="table")
    from ehrbench.ehrsql.eicu_sampling import draw_admit_dates
    from ehrbench.ehrsql.sampling import new_rng, rng_state

    stays = dbt.ref("int_ehrsql_eicu__eicu__unit_stays")
    keys = "uniquepid, patient_order, hospitaldischargeyear, first_dischargeyear"
    rows = stays.aggregate(
        f"{keys}, max(visits_in_year) as visits_in_year, bool_and(year_reached) as year_reached", keys
    ).order("patient_order, hospitaldischargeyear").fetchall()

    rng = new_rng(int(dbt.config.get("ehrsql_eicu_seed")))
    drawn = draw_admit_dates(rng, rows, start_year=int(dbt.config.get("ehrsql_eicu_start_year")),
                             time_span=int(dbt.config.get("ehrsql_eicu_time_span")))
    state = rng_state(rng)
    columns = list(zip(*drawn, strict=True)) if drawn else [[], [], [], [], []]
    return pa.table(
        {
            "uniquepid": pa.array(columns[0], pa.string()),
            "hospitaldischargeyear": pa.array(columns[1], pa.int32()),
            "visit_seq": pa.array(columns[2], pa.int64()),
            "sampled_first_year": pa.array(columns[3], pa.int32()),
            "hospitaladmitdate": pa.array(columns[4], pa.date32()),
            "rng_state": pa.array([state] * len(drawn), pa.string()),
        }
    )
