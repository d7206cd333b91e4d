"""An evaluation run's report data: DuckDB over the run's parquet parts, the build folder and the earlier runs of
its series (`trends`), gathered into one `ReportData` for the site."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import duckdb

from ehrbench.dq.score import read_submission
from ehrbench.errors import MissingInputError
from ehrbench.evaluation import results
from ehrbench.evaluation.results import load_trials, readable_parts
from ehrbench.reports import aggregates, catalog
from ehrbench.reports.model import (
    Bootstrap,
    Estimate,
    LeaderboardRow,
    ReportData,
    TaskDetail,
    TrendPoint,
    TrialDetail,
)
from ehrbench.tasks import SUITES
from ehrbench.warehouse import open_duckdb

RUN_TIME = re.compile(r"\d{8}T\d{6}Z$")  # the UTC time evaluate-agents appends to a run prefix
MAX_TREND_RUNS = 30


def newest_run(results_root: Path) -> str:
    """The id of the run with the most recently written results."""
    runs = [p for p in Path(results_root).glob("run_id=*") if any(p.glob("part-*.parquet"))]
    if not runs:
        raise MissingInputError(f"{results_root}: no evaluation runs; run `ehrbench evaluate` first")
    # lstat: a FIFO or a dangling symlink named like a part is only looked at, never opened or followed
    newest = max(runs, key=lambda p: max(part.lstat().st_mtime for part in p.glob("part-*.parquet")))
    return newest.name.removeprefix("run_id=")


def open_run(run_folder: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the run's trials as the table `trials`."""
    con = open_duckdb()
    _use_run(con, run_folder)
    return con


def _use_run(con: duckdb.DuckDBPyConnection, run_folder: Path) -> None:
    # one row per trial (a resumed run's re-run, not the error it replaced); columns a part predates are null, i.e.
    # unknown (the aggregation and the task pages allow for it)
    load_trials(con, run_folder)
    # an imported task set's trials get a leaderboard of their own, `<suite>@<task set>`, apart from the generated
    # suite they run in (parts older than the taskset column have none)
    if "taskset" in {name for (name,) in con.execute("select column_name from (describe trials)").fetchall()}:
        con.execute(f"update trials set suite = suite || '{aggregates.TASKSET_MARK}' || taskset "
                    "where taskset is not null")


def trend_prefix(run_id: str) -> str | None:
    """The series a run belongs to: its id without the trailing UTC time (None: a hand-named run, no series)."""
    return RUN_TIME.sub("", run_id) if RUN_TIME.search(run_id) else None


def series_runs(results_root: Path, run_id: str, prefix: str | None, max_runs: int = MAX_TREND_RUNS) -> list[str]:
    """Run ids of the series up to `run_id` (inclusive, oldest first): `<prefix><UTC time>` runs with results."""
    if prefix is None:
        return [run_id]
    pattern = re.compile(re.escape(prefix) + RUN_TIME.pattern)
    ids = sorted(p.name.removeprefix("run_id=") for p in Path(results_root).glob(f"run_id={prefix}*")
                 if any(p.glob("part-*.parquet")))
    ids = [i for i in ids if pattern.fullmatch(i) and i <= run_id]
    if run_id not in ids:
        ids.append(run_id)
    return ids[-max_runs:]


def report_data(results_root: Path, run_id: str, benchmarks_root: Path, *, bootstrap: Bootstrap,
                prefix: str | None = None, max_trend_runs: int = MAX_TREND_RUNS) -> ReportData:
    """Everything the site shows about run `run_id` (results under `results_root/run_id=<id>/`); the build folder
    is `benchmarks_root/<build id>` (its facets and gold; the report still renders without it). `prefix` names the
    trend series (default: the run id without its trailing UTC time)."""
    run_folder = Path(results_root) / f"run_id={run_id}"
    con = open_run(run_folder)
    builds = [b for (b,) in con.execute("select distinct build_id from trials order by 1").fetchall()]
    build_id = builds[-1] if builds else ""
    build_dir = Path(benchmarks_root) / build_id if build_id else None
    build_dir = build_dir if build_dir is not None and build_dir.is_dir() else None
    catalog.register_build(con, build_dir)
    board = aggregates.leaderboard(con, bootstrap)
    data = ReportData(
        run_id=run_id, build_id=build_id, generated_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        agents=[a for (a,) in con.execute("select distinct agent from trials order by 1").fetchall()],
        suites=sorted(board, key=lambda s: (SUITES.index(s) if s in SUITES else len(SUITES), s)),
        bootstrap=bootstrap, metrics={suite: aggregates.suite_metrics(suite) for suite in board},
        headline={suite: aggregates.headline(suite) for suite in board}, leaderboard=board,
        breakdowns=aggregates.breakdowns(con) + aggregates.position_bias(con), pass_curves=aggregates.pass_curves(con),
        failing=aggregates.failing_tasks(con), tasks=task_details(con, build_dir),
        build=catalog.build_info(build_dir, build_id))
    runs = series_runs(results_root, run_id, trend_prefix(run_id) if prefix is None else prefix, max_trend_runs)
    data.trend_runs = runs
    data.trends = trends(results_root, runs, bootstrap, current=(run_id, board))
    con.close()
    return data


def task_details(con: duckdb.DuckDBPyConnection, build_dir: Path | None) -> list[TaskDetail]:
    """Every task of the run with its gold and every trial (prediction and transcript)."""
    facets = catalog.task_facets(con)
    cursor = con.execute("""
        select t.suite, t.task_id, coalesce(t.db, q.db) as db, q.question, q.context, q.is_answerable,
               q.gold_sql, q.gold_answer, q.gold_fhir_ids, t.agent, t.trial, t.status, t.reward, t.answer,
               t.predicted_sql, t.abstained, t.retrieval_precision, t.retrieval_recall, t.retrieved_fhir_ids,
               t.dq_recall, t.dq_precision, t.error, t.latency_s, t.input_tokens, t.output_tokens, t.cost_usd,
               t.tool_calls, t.user_turns, t.stop_reason, t.transcript, t.flagged_rows_path
        from trials t left join task_text q on q.suite = t.suite and q.task_id = t.task_id
        order by t.suite, t.task_id, t.agent, t.trial""")
    names = [d[0] for d in cursor.description]
    details: dict[tuple[str, str], TaskDetail] = {}
    for values in cursor.fetchall():
        row = dict(zip(names, values, strict=True))
        key = (row["suite"], row["task_id"])
        if key not in details:
            details[key] = TaskDetail(
                suite=row["suite"], task_id=row["task_id"], db=row["db"], question=row["question"] or "",
                context=row["context"], facets=facets.get(key, {}), is_answerable=row["is_answerable"],
                gold_sql=row["gold_sql"], gold_answer=row["gold_answer"],
                gold_fhir_ids=list(row["gold_fhir_ids"] or []),
                gold_dq_labels=catalog.dq_labels(build_dir, row["task_id"]) if row["suite"] == "dq" else [],
                trials=[])
        computed = {"transcript", "retrieved_fhir_ids", "flagged_rows"}
        details[key].trials.append(TrialDetail(
            **{k: row[k] for k in TrialDetail.__dataclass_fields__ if k not in computed},
            retrieved_fhir_ids=list(row["retrieved_fhir_ids"] or []), transcript=_transcript(row["transcript"]),
            flagged_rows=_flagged_rows(row["flagged_rows_path"], details[key].gold_dq_labels)))
    return list(details.values())


def _flagged_rows(path: str | None, labels: list[dict]) -> list[dict]:
    """A dq trial's submission, labelled rows first, each with the error it belongs to (None: not an injected one)."""
    if not path:
        return []
    by_row = {(label["table"], label["row_id"]): label for label in labels}
    rows = [{"table": table, "row_id": row_id, "cluster_id": by_row.get((table, row_id), {}).get("cluster_id"),
             "subtype": by_row.get((table, row_id), {}).get("subtype")}
            for table, row_id in read_submission(Path(path)).rows]
    return sorted(rows, key=lambda r: (r["cluster_id"] is None, r["table"], r["row_id"]))


def _transcript(text: str | None) -> list[dict]:
    if not text:
        return []
    try:
        messages = json.loads(text)
    except json.JSONDecodeError:
        return [{"role": "harness", "content": text}]
    return messages if isinstance(messages, list) else [{"role": "harness", "content": messages}]


def trends(results_root: Path, runs: list[str], bootstrap: Bootstrap, current: tuple[str, dict]) -> list[TrendPoint]:
    """Each leaderboard metric across the series' runs, each run's `change` against the agent's previous run on
    the suite (`change`)."""
    boards = {run_id: current[1] if run_id == current[0] else cached_leaderboard(
        Path(results_root) / f"run_id={run_id}", bootstrap) for run_id in runs}
    points: list[TrendPoint] = []
    previous: dict[tuple[str, str], LeaderboardRow] = {}
    for run_id in runs:
        for suite, rows in boards[run_id].items():
            for row in rows:
                before = previous.get((row.agent, suite))
                points += [TrendPoint(run_id, row.agent, suite, metric, estimate, change(metric, before, row))
                           for metric, estimate in row.values.items()]
                previous[(row.agent, suite)] = row
    return points


def change(metric: str, before: LeaderboardRow | None, now: LeaderboardRow) -> str | None:
    """`regression` when `now`'s interval of `metric` lies wholly on the worse side of `before`'s (below it, where
    higher is better), `improvement` wholly on the better side, None when the intervals overlap, one is missing, or
    the metric depends on k (Pass@k, Pass^k, Gap-k) and the runs' k differ: Pass@4 and Pass@5 are different
    metrics. Intervals that merely miss the other run's value would flag about one comparison in twelve between
    two runs of the same agent. Cost, latency and tokens per trial must also move by PRACTICAL_CHANGE. The
    dashboard's trends and the nightly comparison both use this rule."""
    if before is None or metric not in before.values or metric not in now.values:
        return None
    if metric in aggregates.K_METRICS and before.k != now.k:
        return None
    was, now_estimate = before.values[metric], now.values[metric]
    if None in (was.low, was.high, now_estimate.low, now_estimate.high):
        return None
    described = next((m for m in aggregates.suite_metrics(now.suite) if m.key == metric), None)
    higher_is_better = described.higher_is_better if described else True
    if described and not _matters(described.scale, was.value, now_estimate.value):
        return None
    if now_estimate.high < was.low:
        return "regression" if higher_is_better else "improvement"
    if now_estimate.low > was.high:
        return "improvement" if higher_is_better else "regression"
    return None


# What a run costs changes with the machine: on a busy one, trials of the same agent separate by milliseconds with
# tight intervals. Cost, time and tokens per trial change only by at least this much: (absolute, relative) floors.
PRACTICAL_CHANGE = {"seconds": (0.5, 0.2), "usd": (0.0001, 0.2), "count": (10.0, 0.2)}


def _matters(scale: str, was: float | None, now: float | None) -> bool:
    if scale not in PRACTICAL_CHANGE or was is None or now is None:
        return True
    absolute, relative = PRACTICAL_CHANGE[scale]
    return abs(now - was) >= max(absolute, relative * abs(was))


@cache
def _aggregation_version() -> str:
    """A fingerprint of the aggregation SQL and of how the trials are read (`load_trials`, `_use_run`): kept
    leaderboards of an older version are not reused."""
    files = [Path(module.__file__) for module in (aggregates, results)] + [Path(__file__)]
    return hashlib.sha1(b"".join(path.read_bytes() for path in files)).hexdigest()


def cached_leaderboard(run_folder: Path, bootstrap: Bootstrap) -> dict[str, list[LeaderboardRow]]:
    """An earlier run's leaderboard, kept beside its parts (`report-cache/`): a nightly report reads 30 of them.
    The key covers the parts (a resumed run has new ones), the bootstrap settings and this module's SQL."""
    parts = readable_parts(run_folder)  # a bad part is named even when a kept leaderboard would do
    key = hashlib.sha1(json.dumps([[p.name, p.stat().st_size] for p in parts] + [
        asdict(bootstrap), _aggregation_version()]).encode()).hexdigest()[:16]
    cache = run_folder / "report-cache" / f"leaderboard-{key}.json"
    if cache.is_file():
        return {suite: [LeaderboardRow(**{**row, "values": {k: Estimate(**v) for k, v in row["values"].items()}})
                        for row in rows] for suite, rows in json.loads(cache.read_text()).items()}
    with open_run(run_folder) as con:
        board = aggregates.leaderboard(con, bootstrap)
    cache.parent.mkdir(exist_ok=True)
    partial = cache.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(json.dumps({suite: [asdict(row) for row in rows] for suite, rows in board.items()}))
    os.replace(partial, cache)
    return board
