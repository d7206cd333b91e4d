"""What a report shows, as plain data: the aggregation queries (`ehrbench.reports.aggregates`) fill it from the
run's parquet files and the build folder, the site (`ehrbench.reports.site`) renders it. Nothing here computes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Metric:
    """A leaderboard column. `scale` says how to show a value: `share` (0–1, shown as a percentage), `score`
    (RS(c), F1 … shown ×100 as the papers do), `usd`, `seconds`, `count`."""

    key: str  # as in the SQL and in the HTML (data-metric)
    label: str
    scale: str
    higher_is_better: bool = True
    description: str = ""


@dataclass(frozen=True)
class Estimate:
    """A metric's value with its confidence interval (None where undefined, e.g. no answerable item)."""

    value: float | None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class LeaderboardRow:
    agent: str
    suite: str
    tasks: int
    trials: int  # scored trials (status completed or error); invalid ones are not scored
    k: int  # trials per task used by Pass@k / Pass^k (the fewest any task has)
    errors: int
    invalid: int
    values: dict[str, Estimate]  # Metric.key -> estimate
    failing_tasks: int  # tasks not solved in every trial (the drill-down list behind the row's cells)


@dataclass(frozen=True)
class BreakdownRow:
    """An agent's success on the tasks of one facet value (e.g. category = labs), with a Wilson interval."""

    facet: str  # category | template | time_expression | database | fhir_resource_type | dq_family | dq_variant
    value: str
    agent: str
    suite: str
    tasks: int
    trials: int
    success_rate: Estimate


@dataclass(frozen=True)
class PassCurvePoint:
    agent: str
    suite: str
    k: int
    pass_at_k: float
    pass_hat_k: float


@dataclass(frozen=True)
class TrendPoint:
    """One metric of one run of the trend series; `change` compares with the run before it: `regression` when this
    run's interval lies wholly below that run's (above it, for lower-is-better metrics), `improvement` the other
    way, None otherwise or for the first run."""

    run_id: str
    agent: str
    suite: str
    metric: str
    estimate: Estimate
    change: str | None = None


@dataclass(frozen=True)
class FailingTask:
    task_id: str
    db: str | None
    question: str  # the question or instruction, for the list
    trials: int
    mean_reward: float
    statuses: str  # e.g. "completed×2, error×1"


@dataclass(frozen=True)
class TrialDetail:
    agent: str
    trial: int
    status: str
    reward: float | None
    answer: str | None
    predicted_sql: str | None
    abstained: bool | None
    retrieval_precision: float | None
    retrieval_recall: float | None
    retrieved_fhir_ids: list[str]  # empty for other suites and for runs made before the column existed
    dq_recall: float | None
    dq_precision: float | None
    error: str | None
    latency_s: float | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    tool_calls: int | None
    user_turns: int | None
    stop_reason: str | None
    transcript: list[dict]  # OpenAI chat messages (role, content, tool_calls, tool_call_id) and harness entries
    flagged_rows: list[dict] = field(default_factory=list)  # dq: table, row_id, cluster_id and subtype (None: no error)


@dataclass(frozen=True)
class TaskDetail:
    suite: str
    task_id: str
    db: str | None
    question: str  # the question, or the dq instruction, or the chatqa user's instruction
    context: str | None
    facets: dict[str, list[str]]  # facet -> values (the breakdowns this task counts in)
    is_answerable: bool | None
    gold_sql: str | None
    gold_answer: str | None
    gold_fhir_ids: list[str]
    gold_dq_labels: list[dict]  # table, row_id, cluster_id, family, subtype, field, original_value, corrupted_value
    trials: list[TrialDetail]


@dataclass(frozen=True)
class BuildInfo:
    build_id: str
    manifest: dict  # manifest.json as published
    quarantine: list[dict]  # quarantined questions: question_id, suite, db, template_id, failed_expectations
    data_docs: str | None  # the GX Data Docs folder copied into the site (relative path), if the build has one


@dataclass(frozen=True)
class Bootstrap:
    replicates: int
    seed: int
    level: float  # e.g. 0.95


# the dashboard's intervals (render-report's default parameters), also those of the nightly run comparison
DEFAULT_BOOTSTRAP = Bootstrap(replicates=1000, seed=0, level=0.95)


@dataclass
class ReportData:
    run_id: str
    build_id: str
    generated_at: str  # ISO UTC
    agents: list[str]
    suites: list[str]
    bootstrap: Bootstrap
    metrics: dict[str, list[Metric]]  # suite -> its leaderboard columns, in order
    headline: dict[str, str]  # suite -> the Metric.key charted and sorted by
    leaderboard: dict[str, list[LeaderboardRow]]  # suite -> rows, best headline first
    breakdowns: list[BreakdownRow] = field(default_factory=list)
    pass_curves: list[PassCurvePoint] = field(default_factory=list)
    trend_runs: list[str] = field(default_factory=list)  # run ids of the trend series, oldest first
    trends: list[TrendPoint] = field(default_factory=list)
    failing: dict[tuple[str, str], list[FailingTask]] = field(default_factory=dict)  # (agent, suite) -> tasks
    tasks: list[TaskDetail] = field(default_factory=list)
    build: BuildInfo | None = None
