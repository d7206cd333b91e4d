"""The report's numbers, computed by DuckDB over an evaluation run's parquet parts (table `trials`) and the build's
task facets (table `task_facets`, see `ehrbench.reports.catalog`). `leaderboard` builds the per-task statistics
(`task_stats`) the other queries read; alone, call `compute_task_stats` first.

Every leaderboard metric is one SQL aggregate over per-task statistics, so the same expression gives the point
estimate (over all tasks) and each bootstrap replicate (over tasks drawn with replacement): the intervals resample
tasks, not trials, because the trials of one task are not independent. Definitions are docs/benchmarks.md#metrics's
and `ehrbench.metrics`' (the tests hold these queries to them): invalid trials are not scored; an error is a failure
(reward 0) and, in RS(c) and F1, a wrong answer; a success is a reward ≥ 1 − 1e-6; SR is the mean over tasks of each
task's mean reward; RS(c) is computed per run (run r = every task's trial r, N = that run's items) and averaged over
the runs; Pass@k / Pass^k take as k the fewest trials any task of the (agent, suite) has; retrieval precision is
undefined over tasks where nothing was retrieved (`ehrbench.metrics.retrieval`), in a bootstrap replicate too.
"""

from __future__ import annotations

import duckdb

from ehrbench.metrics.trials import SUCCESS_TOLERANCE
from ehrbench.reports.model import (
    Bootstrap,
    BreakdownRow,
    Estimate,
    FailingTask,
    LeaderboardRow,
    Metric,
    PassCurvePoint,
)

QUESTION_SUITES = ("ehrsql", "chatqa", "fhir")
TASKSET_MARK = "@"  # a task set's leaderboard: `<suite>@<task set>`
Z_95 = 1.959963984540054  # the normal quantile of a 95 % Wilson interval

_SHARE = "share"
COST = Metric("cost_per_trial", "Cost / trial", "usd", False, "mean cost in USD of the trials whose cost is known")
LATENCY = Metric("latency_per_trial", "Latency / trial", "seconds", False, "mean wall-clock time of a trial")
_PASS = [Metric("pass_at_k", "Pass@k", _SHARE, True, "chance that one of k trials succeeds (k: column k)"),
         Metric("pass_hat_k", "Pass^k", _SHARE, True, "chance that all k trials succeed (k: column k)")]
_RS = [Metric(f"rs_{c}", f"RS({c.upper()})", "score", True,
              f"reliability score, mean over the k runs: +1 right answer or abstention, 0 abstained on answerable, "
              f"−{c.upper()} wrong{' (N = the items of a run)' if c == 'n' else ''}; ×100 as EHRSQL-2024 reports it")
       for c in ("0", "5", "10", "n")]
_RS_SPREAD = [Metric("rs_10_min", "RS(10) worst run", "score", True, "RS(10) of the run that scored lowest"),
              Metric("rs_10_max", "RS(10) best run", "score", True, "RS(10) of the run that scored highest")]

SUITE_METRICS: dict[str, list[Metric]] = {
    "ehrsql": [Metric("success_rate", "SR", _SHARE, True, "mean reward: correct answers and correct abstentions"),
               Metric("f1_ans", "F1_ans", "score", True, "F1 of the decision to answer (answerable = positive)"),
               Metric("f1_exe", "F1_exe", "score", True, "F1 counting only correctly executed answers"),
               *_RS, *_RS_SPREAD, *_PASS, COST, LATENCY],
    "chatqa": [Metric("success_rate", "SR", _SHARE, True, "mean over tasks of the task's mean reward"), *_PASS,
               Metric("gap_k", "Gap-k", _SHARE, False, "Pass@k − Pass^k: success that depends on luck"),
               Metric("tokens_per_trial", "Tokens / trial", "count", False, "agent input + output tokens"),
               COST, LATENCY],
    "fhir": [Metric("success_rate", "Answer correctness", _SHARE, True, "answers matching the gold"),
             Metric("retrieval_precision", "Retrieval P", _SHARE, True, "share of retrieved resources in the gold"),
             Metric("retrieval_recall", "Retrieval R", _SHARE, True, "share of gold resources retrieved"),
             *_PASS, COST, LATENCY],
    "dq": [Metric("dq_recall", "Recall", _SHARE, True, "injected error clusters caught (any row of a cluster)"),
           Metric("dq_precision", "Precision", _SHARE, True, "flagged rows that belong to an injected error"),
           Metric("success_rate", "Pass", _SHARE, True, "audits with recall 1.0 and precision ≥ 0.01"),
           *_PASS, COST, LATENCY],
    "noteqa": [Metric("success_rate", "Accuracy", _SHARE, True, "answers the judge (EHRNoteQA's prompt) accepts; "
                      "per format, level and note count in the breakdowns"), *_PASS,
               Metric("tokens_per_trial", "Tokens / trial", "count", False, "agent input + output tokens"),
               COST, LATENCY],
    "meds_conversion": [Metric("success_rate", "Pass", _SHARE, True, "conversions whose MEDS events equal the "
                               "gold's (schema, order, content hash)"), *_PASS,
                        Metric("tokens_per_trial", "Tokens / trial", "count", False, "agent input + output tokens"),
                        COST, LATENCY],
    "event_modelling": [Metric("success_rate", "Pass", _SHARE, True, "predictions whose test AUROC reaches the "
                               "count-features gradient-boosting baseline's; on the demo a task has 15-35 test "
                               "patients with 2-3 positives, so one pass is noisy"), *_PASS,
                        Metric("tokens_per_trial", "Tokens / trial", "count", False, "agent input + output tokens"),
                        COST, LATENCY],
}
HEADLINE = {"ehrsql": "rs_10", "chatqa": "success_rate", "fhir": "success_rate", "dq": "success_rate",
            "noteqa": "success_rate", "meds_conversion": "success_rate",
            "event_modelling": "success_rate"}


def _rs_runs(c: str, runs: int) -> str:
    """RS(c) of each run with a scored item, as a list: (plus − c·wrong) / items over the tasks' run columns (c = the
    run's items for N). Plain sums, which DuckDB shares between the RS columns."""
    values = []
    for r in range(runs):
        plus, wrong, items = (f"sum({name}_{r})" for name in ("plus", "wrong", "items"))
        penalty = items if c == "n" else c
        values.append(f"case when {items} > 0 then ({plus} - {penalty} * {wrong})::double / {items} end")
    return f"list_filter([{', '.join(values)}]::double[], lambda v: v is not null)"


def _f1(true_positives: str) -> str:
    # 2PR/(P+R) = 2·tp/(answered + answerable) when tp > 0; EHRSQL's evaluate.py gives 0 when P + R = 0
    return (f"case when sum(n) = 0 then null when sum({true_positives}) = 0 then 0.0 "
            f"else 2.0 * sum({true_positives}) / (sum(answered) + sum(answerable)) end")


def _mean(column: str) -> str:
    return f"sum({column}_sum) / nullif(sum({column}_n), 0)"


# Metric.key -> SQL aggregate over rows of task_stats (one row per task of one agent and suite)
METRIC_SQL: dict[str, str] = {
    "success_rate": "avg(reward_sum / n) filter (where n > 0)",
    "pass_at_k": "avg(pass_at_k)",
    "pass_hat_k": "avg(pass_hat_k)",
    "gap_k": "avg(pass_at_k - pass_hat_k)",
    "f1_ans": _f1("answered_answerable"),
    "f1_exe": _f1("answered_correct"),
    # an agent that never retrieves would otherwise get the both-empty questions' precision of 1
    "retrieval_precision": f"case when sum(retrieving) > 0 then {_mean('retrieval_precision')} end",
    "retrieval_recall": _mean("retrieval_recall"),
    "dq_recall": _mean("dq_recall"),
    "dq_precision": _mean("dq_precision"),
    "cost_per_trial": _mean("cost_usd"),
    "latency_per_trial": _mean("latency_s"),
    "tokens_per_trial": "sum(tokens_sum) / nullif(sum(n), 0)",
}
# RS(c) per run, over the runs: key -> (c, how the runs' values are summarised); their SQL depends on the number of
# runs (`_metric_sql`)
RUN_METRICS = {**{f"rs_{c}": (c, "list_avg") for c in ("0", "5", "10", "n")},
               "rs_10_min": ("10", "list_min"), "rs_10_max": ("10", "list_max")}
K_METRICS = {"pass_at_k", "pass_hat_k", "gap_k"}  # depend on k, the trials per task of the run
QUESTION_ONLY = set(RUN_METRICS) | {"f1_ans", "f1_exe"}


def _scored_mean(column: str) -> str:
    return (f"sum({column}) filter (where status <> 'invalid') as {column}_sum, "
            f"count({column}) filter (where status <> 'invalid') as {column}_n")


def task_stats_sql(runs: int) -> str:
    """The statement that builds `task_stats`, with `runs` per-run column triples (plus_r, wrong_r, items_r: the
    task's outcome in run r, the trial index)."""
    per_run = "".join(
        f"count(*) filter (where trial = {r} and plus_) as plus_{r}, "
        f"count(*) filter (where trial = {r} and wrong_) as wrong_{r}, "
        f"count(*) filter (where trial = {r} and status <> 'invalid') as items_{r},\n           "
        for r in range(runs))
    return f"""
create or replace temp table task_stats as
with outcomes as (
    -- question suites: a trial's outcome (ehrbench.metrics.Outcome.of_trial); an error is an answer, a wrong one
    select *, status <> 'invalid' and (right_ or not (answered_ or answerable_)) as plus_,
           status <> 'invalid' and answered_ and not right_ as wrong_
    from (select *, (status = 'error' or not coalesce(abstained, false)) as answered_,
                 coalesce(is_answerable, false) as answerable_,
                 status = 'completed' and not coalesce(abstained, false) and coalesce(is_answerable, false)
                     and coalesce(correct, false) as right_ from trials)
),
per_task as (
    select agent, suite, task_id, any_value(db) as db,
           count(*) filter (where status <> 'invalid') as n,
           count(*) filter (where status <> 'invalid' and reward >= 1 - {SUCCESS_TOLERANCE}) as s,
           coalesce(sum(coalesce(reward, 0)) filter (where status <> 'invalid'), 0) as reward_sum,
           count(*) filter (where status = 'error') as errors,
           count(*) filter (where status = 'invalid') as invalid,
           count(*) filter (where status <> 'invalid' and answered_) as answered,
           count(*) filter (where status <> 'invalid' and answerable_) as answerable,
           count(*) filter (where status <> 'invalid' and answered_ and answerable_) as answered_answerable,
           count(*) filter (where status <> 'invalid' and right_) as answered_correct,
           {per_run}{_scored_mean("retrieval_precision")}, {_scored_mean("retrieval_recall")},
           -- trials that retrieved a resource; without ids (parts older than the column) those with a precision,
           -- as ehrbench.evaluation.report reads them
           count(*) filter (where status <> 'invalid' and case when retrieved_fhir_ids is null
                            then retrieval_precision is not null else len(retrieved_fhir_ids) > 0 end) as retrieving,
           {_scored_mean("dq_recall")}, {_scored_mean("dq_precision")},
           {_scored_mean("cost_usd")}, {_scored_mean("latency_s")},
           coalesce(sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0))
                    filter (where status <> 'invalid'), 0) as tokens_sum
    from outcomes group by agent, suite, task_id
),
group_k as (select agent, suite, min(n) as k from per_task where n > 0 group by agent, suite)
select p.*, g.k,
       -- Pass@k = 1 − C(n−s, k)/C(n, k) and Pass^k = C(s, k)/C(n, k), as products (a factor 0 ends them)
       case when p.n > 0 then 1 - list_reduce(list_transform(range(g.k), lambda i: (p.n - p.s - i)::double / (p.n - i)),
                                             lambda a, b: a * b) end as pass_at_k,
       case when p.n > 0 then list_reduce(list_transform(range(g.k), lambda i: (p.s - i)::double / (p.n - i)),
                                         lambda a, b: a * b) end as pass_hat_k
from per_task p left join group_k g using (agent, suite)
"""


def compute_task_stats(con: duckdb.DuckDBPyConnection) -> int:
    """(Re)build `task_stats` from the view `trials`, with a column triple per run (trial index); the runs."""
    (runs,) = con.execute("select coalesce(max(trial) + 1, 0) from trials").fetchone()
    con.execute(task_stats_sql(int(runs)))
    return int(runs)


def base_suite(board: str) -> str:
    """The suite of a leaderboard: `ehrsql`, or `ehrsql@<task set>` for the tasks of an imported task set, which the
    report shows apart from the generated suite they run in (`ehrbench.reports.assemble`)."""
    return board.split(TASKSET_MARK, 1)[0]


def headline(board: str) -> str:
    """The metric a leaderboard is sorted by (its suite's)."""
    return HEADLINE.get(base_suite(board), "success_rate")


def suite_metrics(suite: str) -> list[Metric]:
    """A suite's leaderboard columns (a suite this module does not know gets the generic ones of chatqa)."""
    return SUITE_METRICS.get(base_suite(suite), SUITE_METRICS["chatqa"])


def _metric_keys(suite: str) -> list[str]:
    return [m.key for m in suite_metrics(suite)]


def _metric_sql(key: str, runs: int) -> str:
    if key in RUN_METRICS:
        c, summary = RUN_METRICS[key]
        return f"{summary}({_rs_runs(c, runs)})"
    return METRIC_SQL[key]


def _select_metrics(keys: list[str], suite: str, runs: int) -> str:
    question_suite = base_suite(suite) in QUESTION_SUITES
    return ", ".join(f"{_metric_sql(key, runs) if question_suite or key not in QUESTION_ONLY else 'null'} "
                     f"as \"{key}\"" for key in keys)


def leaderboard(con: duckdb.DuckDBPyConnection, bootstrap: Bootstrap) -> dict[str, list[LeaderboardRow]]:
    """Per suite, one row per agent: every metric of the suite with its bootstrap interval, best headline first."""
    runs = compute_task_stats(con)
    board: dict[str, list[LeaderboardRow]] = {}
    suites = [s for (s,) in con.execute("select distinct suite from task_stats order by suite").fetchall()]
    for suite in suites:
        keys = _metric_keys(suite)
        point = _rows(con, f"""
            select agent, count(*) filter (where n > 0) as tasks, sum(n) as trials, coalesce(min(k), 0) as k,
                   sum(errors) as errors, sum(invalid) as invalid,
                   count(*) filter (where n > 0 and reward_sum < n) as failing_tasks,
                   {_select_metrics(keys, suite, runs)}
            from task_stats where suite = ? group by agent order by agent""", [suite])
        intervals = _bootstrap(con, suite, keys, runs, bootstrap)
        rows = [LeaderboardRow(agent=r["agent"], suite=suite, tasks=int(r["tasks"]), trials=int(r["trials"] or 0),
                               k=int(r["k"]), errors=int(r["errors"] or 0), invalid=int(r["invalid"] or 0),
                               failing_tasks=int(r["failing_tasks"]),
                               values={key: Estimate(_float(r[key]), *intervals.get((r["agent"], key), (None, None)))
                                       for key in keys})
                for r in point]
        best = headline(suite)
        rows.sort(key=lambda row: (-(row.values[best].value if row.values[best].value is not None
                                     else float("-inf")), row.agent))
        board[suite] = rows
    return board


def _bootstrap(con: duckdb.DuckDBPyConnection, suite: str, keys: list[str], runs: int,
               bootstrap: Bootstrap) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    """(agent, metric) -> percentile interval over `replicates` resamples of the suite's tasks. Draws are
    hash(seed, agent, suite, replicate, draw) mod the number of tasks: the same seed gives the same intervals."""
    if bootstrap.replicates < 1:
        return {}
    alpha = (1 - bootstrap.level) / 2
    quantiles = ", ".join(f"quantile_cont(\"{key}\", {alpha}) as \"{key}_low\", "
                          f"quantile_cont(\"{key}\", {1 - alpha}) as \"{key}_high\"" for key in keys)
    rows = _rows(con, f"""
        with stats as (
            select *, row_number() over (partition by agent order by task_id) - 1 as i,
                   count(*) over (partition by agent) as m
            from task_stats where suite = ? and n > 0),
        draws as (
            select agent, m, rep, unnest(range(m)) as j
            from (select distinct agent, m from stats), range(?) r(rep)),
        picked as (
            select d.rep, s.* from draws d join stats s
              on s.agent = d.agent and s.i = hash(?::bigint, d.agent, ?, d.rep, d.j) % d.m),
        replicates as (select agent, rep, {_select_metrics(keys, suite, runs)} from picked group by agent, rep)
        select agent, {quantiles} from replicates group by agent""",
                 [suite, bootstrap.replicates, bootstrap.seed, suite])
    return {(r["agent"], key): (_float(r[f"{key}_low"]), _float(r[f"{key}_high"])) for r in rows for key in keys}


def wilson(successes: float, trials: int, z: float = Z_95) -> tuple[float | None, float | None]:
    """The Wilson score interval of a proportion (successes may be a sum of fractional rewards)."""
    if trials <= 0:
        return None, None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * ((p * (1 - p) / trials + z * z / (4 * trials * trials)) ** 0.5) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def breakdowns(con: duckdb.DuckDBPyConnection) -> list[BreakdownRow]:
    """Success rate per facet value (view `task_facets`: suite, task_id, facet, value), agent and suite; a task
    with several values of a facet (e.g. two time expressions) counts under each."""
    rows = _rows(con, """
        select f.facet, f.value, t.agent, t.suite, count(*) filter (where t.n > 0) as tasks, sum(t.n) as trials,
               sum(t.reward_sum) as reward_sum
        from task_stats t join task_facets f on f.suite = t.suite and f.task_id = t.task_id
        group by all having sum(t.n) > 0 order by f.facet, t.suite, f.value, t.agent""")
    return [BreakdownRow(r["facet"], r["value"], r["agent"], r["suite"], int(r["tasks"]), int(r["trials"]),
                         Estimate(r["reward_sum"] / r["trials"], *wilson(r["reward_sum"], int(r["trials"]))))
            for r in rows]


def position_bias(con: duckdb.DuckDBPyConnection) -> list[BreakdownRow]:
    """Note QA multiple-choice success per letter the correct option was shown at (facet `noteqa_answer_position`),
    agent and suite: EHRNoteQA's position bias. Trial 0 shows the file's order, later trials a seeded shuffle
    (ehrbench.noteqa.options), so with several trials every letter gets the same questions. Runs made before the
    `correct_option` column have none."""
    rows = _rows(con, """
        select 'noteqa_answer_position' as facet, correct_option as value, agent, suite,
               count(distinct task_id) as tasks, count(*) as trials, sum(coalesce(reward, 0)) as reward_sum
        from trials where correct_option is not null and status <> 'invalid'
        group by all order by suite, value, agent""")
    return [BreakdownRow(r["facet"], r["value"], r["agent"], r["suite"], int(r["tasks"]), int(r["trials"]),
                         Estimate(r["reward_sum"] / r["trials"], *wilson(r["reward_sum"], int(r["trials"]))))
            for r in rows]


def pass_curves(con: duckdb.DuckDBPyConnection) -> list[PassCurvePoint]:
    """Pass@k and Pass^k for k = 1 … the fewest trials a task of the (agent, suite) has."""
    rows = _rows(con, """
        with limits as (select agent, suite, min(n) as max_k from task_stats where n > 0 group by all)
        select t.agent, t.suite, kk.k,
               avg(1 - list_reduce(list_transform(range(kk.k), lambda i: (t.n - t.s - i)::double / (t.n - i)),
                                   lambda a, b: a * b)) as pass_at_k,
               avg(list_reduce(list_transform(range(kk.k), lambda i: (t.s - i)::double / (t.n - i)),
                               lambda a, b: a * b)) as pass_hat_k
        from task_stats t join limits l using (agent, suite), range(1, l.max_k + 1) kk(k)
        where t.n > 0 group by all order by t.suite, t.agent, kk.k""")
    return [PassCurvePoint(r["agent"], r["suite"], int(r["k"]), float(r["pass_at_k"]), float(r["pass_hat_k"]))
            for r in rows]


def failing_tasks(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], list[FailingTask]]:
    """(agent, suite) -> the tasks not solved in every scored trial, worst first."""
    rows = _rows(con, """
        with statuses as (
            select agent, suite, task_id, string_agg(status || '×' || c, ', ' order by status) as statuses
            from (select agent, suite, task_id, status, count(*) as c from trials group by all) group by all)
        select t.agent, t.suite, t.task_id, t.db, coalesce(q.question, '') as question, t.n,
               t.reward_sum / t.n as mean_reward, s.statuses
        from task_stats t join statuses s using (agent, suite, task_id)
             left join task_text q on q.suite = t.suite and q.task_id = t.task_id
        where t.n > 0 and t.reward_sum < t.n order by t.agent, t.suite, mean_reward, t.task_id""")
    failing: dict[tuple[str, str], list[FailingTask]] = {}
    for r in rows:
        failing.setdefault((r["agent"], r["suite"]), []).append(
            FailingTask(r["task_id"], r["db"], r["question"], int(r["n"]), float(r["mean_reward"]), r["statuses"]))
    return failing


def _rows(con: duckdb.DuckDBPyConnection, sql: str, parameters: list | None = None) -> list[dict]:
    cursor = con.execute(sql, parameters or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _float(value) -> float | None:
    return None if value is None else float(value)
