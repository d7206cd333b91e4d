"""The event-modelling tasks' baseline (docs/benchmarks.md#event-modelling-tasks), EHRSHOT's "count" features with a
gradient-boosted tree model: age at the prediction time and, for each of the train rows' most frequent codes, how
often it occurs at or before the prediction time; scikit-learn's HistGradientBoostingClassifier (LightGBM's
algorithm) with fixed hyperparameters — the demo's cohorts are too small to select them on a validation split, as
EHRSHOT's grid does. Scored by the test AUROC, the gate an agent must reach."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from ehrbench.warehouse import open_duckdb

MAX_CODES = 2_000
PARAMETERS = {"max_iter": 200, "learning_rate": 0.05, "max_leaf_nodes": 15, "min_samples_leaf": 2,
              "l2_regularization": 1.0}
BASELINE = {"model": "sklearn HistGradientBoostingClassifier", "parameters": PARAMETERS,
            "features": f"age at the prediction time + counts of the {MAX_CODES:,} most frequent train codes at or "
                        "before it",
            "description": "a count-features gradient-boosting model (age and how often each frequent code occurs up "
                           "to the prediction time)"}


def count_features(events: pa.Table | Path, rows: pa.Table,
                   codes: list[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """One row per label row: age in years at its prediction time, then the count of each of `codes` (default: the
    MAX_CODES most frequent among these rows' events) at or before it. `events`: a table, or a MEDS parquet file
    (read by DuckDB, not into memory)."""
    with open_duckdb() as con:
        if isinstance(events, Path):
            con.execute(f"create view events as select * from read_parquet('{events}')")
        else:
            con.register("events", events)
        con.register("label_rows", rows.select(["subject_id", "prediction_time"])
                     .append_column("row_index", pa.array(range(rows.num_rows), pa.int64())))
        con.execute("create temp table counted as select r.row_index, e.code, count(*)::float as n from label_rows r "
                    "join events e on e.subject_id = r.subject_id and e.time <= r.prediction_time group by all")
        if codes is None:
            codes = [c for (c,) in con.execute(f"select code from counted group by 1 order by sum(n) desc, code "
                                               f"limit {MAX_CODES}").fetchall()]
        ages = con.execute("select r.row_index, date_diff('day', min(e.time), r.prediction_time) / 365.25 "
                           "from label_rows r left join events e on e.subject_id = r.subject_id "
                           "and e.code = 'MEDS_BIRTH' group by r.row_index, r.prediction_time order by 1").fetchall()
        con.register("vocabulary", pa.table({"code": codes, "column": pa.array(range(1, len(codes) + 1), pa.int64())}))
        cells = con.execute("select c.row_index, v.column, c.n from counted c join vocabulary v using (code)"
                            ).fetchnumpy()
    matrix = np.zeros((rows.num_rows, len(codes) + 1), dtype=np.float32)
    for index, age in ages:
        matrix[index, 0] = np.nan if age is None else age
    matrix[cells["row_index"], cells["column"]] = cells["n"]
    return matrix, codes


def train_and_score(train_events: pa.Table | Path, train_rows: pa.Table, test_events: pa.Table | Path,
                    test_rows: pa.Table, seed: int) -> dict:
    """The baseline trained on the train rows and its AUROC over the test rows (what gold/task.json records).
    The events: tables, or MEDS parquet files."""
    x_train, codes = count_features(train_events, train_rows)
    x_test, _ = count_features(test_events, test_rows, codes)
    y_train = np.asarray(train_rows.column("boolean_value").to_pylist(), dtype=bool)
    y_test = np.asarray(test_rows.column("boolean_value").to_pylist(), dtype=bool)
    if len(set(y_train)) < 2 or len(set(y_test)) < 2:
        raise ValueError("the baseline needs positive and negative rows in train and in test")
    # scikit-learn (and scipy) load here, not with the module: 1.5-2.5 s of every CLI start and flow import
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import roc_auc_score
    from threadpoolctl import threadpool_limits

    # One OpenMP thread: the same model on any machine (a parallel sum's order follows the thread count), and fast
    # beside the build's other stages. On the demo's ~100 rows x 2,001 features, two threads whose core is busy spent
    # 26 s per task waiting on each other; one thread fits in 3 s.
    with threadpool_limits(limits=1, user_api="openmp"):
        model = HistGradientBoostingClassifier(**PARAMETERS, random_state=seed % 2**32).fit(x_train, y_train)
        auroc = float(roc_auc_score(y_test, model.predict_proba(x_test)[:, 1]))
    return {**{k: v for k, v in BASELINE.items() if k != "description"}, "codes": len(codes), "auroc": auroc}
