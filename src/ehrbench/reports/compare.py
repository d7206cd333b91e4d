"""A run compared with an earlier one: the metrics that changed per agent and suite, and the tasks that flipped
(solved in every trial before and not now — a regression — or the other way round). What the nightly deployment
shows as its comparison artifact.

A metric changed when the dashboard would flag it (`ehrbench.reports.assemble.change`, on the dashboard's
leaderboards and bootstrap intervals): its interval in this run lies wholly above or below the previous run's, and
Pass@k-type metrics only at equal k. Cost, latency and tokens per trial have intervals too and follow the same
rule, so a real shift in what a trial costs is listed while run-to-run jitter is not."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ehrbench.evaluation.report import read_trials
from ehrbench.reports import aggregates
from ehrbench.reports.assemble import PRACTICAL_CHANGE, cached_leaderboard, change
from ehrbench.reports.model import DEFAULT_BOOTSTRAP, Bootstrap, Estimate, LeaderboardRow, Metric
from ehrbench.reports.summary import formatted


@dataclass(frozen=True)
class MetricChange:
    agent: str
    suite: str
    metric: str  # a leaderboard Metric.key
    k: int  # this run's trials per task (what Pass@k-type metrics are at; the previous run's is the same)
    change: str  # regression | improvement
    previous: Estimate
    current: Estimate


@dataclass(frozen=True)
class Comparison:
    previous_run: str
    bootstrap: Bootstrap  # the intervals the changes were judged by
    metric_changes: list[MetricChange]  # regressions first
    flipped_tasks: list[dict]  # agent, suite, task_id, previous, current (mean reward), change


def previous_run(results_root: Path, run_id: str, prefix: str) -> Path | None:
    """The newest earlier run whose id starts with `prefix` (run ids of a schedule sort by time)."""
    earlier = sorted(p for p in Path(results_root).glob(f"run_id={prefix}*")
                     if p.name < f"run_id={run_id}" and any(p.glob("part-*.parquet")))
    return earlier[-1] if earlier else None


def compare_runs(current: Path, previous: Path, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP) -> Comparison:
    """`bootstrap`: keep the dashboard's (the default) for the comparison to list what its trends flag. The two
    runs' leaderboards are kept beside their parts, where the dashboard's trends find them."""
    before = {(row.agent, row.suite): row for row in _rows(cached_leaderboard(previous, bootstrap))}
    changes = []
    for row in _rows(cached_leaderboard(current, bootstrap)):
        old = before.get((row.agent, row.suite))
        for metric, estimate in row.values.items():
            direction = change(metric, old, row)
            if direction is not None and old is not None:
                changes.append(MetricChange(row.agent, row.suite, metric, row.k, direction, old.values[metric],
                                            estimate))
    changes.sort(key=lambda c: c.change != "regression")  # stable: leaderboard order within each
    was, now = _mean_rewards(previous), _mean_rewards(current)
    flipped = []
    for key in sorted(was.keys() & now.keys()):
        if (was[key] == 1.0) != (now[key] == 1.0):
            agent, suite, task = key
            flipped.append({"agent": agent, "suite": suite, "task_id": task, "previous": was[key], "current": now[key],
                            "change": "regressed" if was[key] == 1.0 else "fixed"})
    return Comparison(previous.name.removeprefix("run_id="), bootstrap, changes, flipped)


def _floors() -> str:
    units = {"seconds": "{:g} s", "usd": "${:g}", "count": "{:g} tokens"}
    return ", ".join(f"{relative:.0%} and {units[scale].format(absolute)}"
                     for scale, (absolute, relative) in PRACTICAL_CHANGE.items())


def _rows(board: dict[str, list[LeaderboardRow]]) -> list[LeaderboardRow]:
    return [row for rows in board.values() for row in rows]


def _mean_rewards(folder: Path) -> dict[tuple[str, str, str], float]:
    rewards: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for trial in read_trials(folder):
        if trial["status"] == "invalid":  # not scored
            continue
        rewards[(trial["agent"], trial["suite"], trial["task_id"])].append(float(trial["reward"]))
    return {key: sum(values) / len(values) for key, values in rewards.items()}


def comparison_markdown(comparison: Comparison, run_id: str, shown: int = 50) -> str:
    b = comparison.bootstrap
    lines = [f"# Run {run_id} compared with {comparison.previous_run}", "",
             f"A metric is listed when its {b.level:.0%} interval (bootstrap over tasks, {b.replicates:,} replicates, "
             f"seed {b.seed}) lies wholly above or below the previous run's, as the dashboard flags it; Pass@k, "
             "Pass^k and Gap-k only at equal k; cost, latency and tokens per trial only when they also move by "
             f"{_floors()}.", ""]
    if comparison.metric_changes:
        lines += ["| agent | suite | metric | previous | current | change |", "|---|---|---|---|---|---|"]
        for c in comparison.metric_changes[:shown]:
            metric = next((m for m in aggregates.suite_metrics(c.suite) if m.key == c.metric),
                          Metric(c.metric, c.metric, ""))
            label = f"{metric.label} (k = {c.k})" if c.metric in aggregates.K_METRICS else metric.label
            lines.append(f"| {c.agent} | {c.suite} | {label} | {formatted(c.previous, metric)} | "
                         f"{formatted(c.current, metric)} | {c.change} |")
        if len(comparison.metric_changes) > shown:
            lines.append(f"\n… and {len(comparison.metric_changes) - shown} more.")
    else:
        lines.append("No metric changed.")
    regressed = [f for f in comparison.flipped_tasks if f["change"] == "regressed"]
    fixed = [f for f in comparison.flipped_tasks if f["change"] == "fixed"]
    lines += ["", f"Tasks that flipped: {len(regressed)} regressed, {len(fixed)} fixed.", ""]
    if comparison.flipped_tasks:
        lines += ["| agent | suite | task | previous | current | |", "|---|---|---|---|---|---|",
                  *(f"| {f['agent']} | {f['suite']} | {f['task_id']} | {f['previous']:.2f} | {f['current']:.2f} | "
                    f"{f['change']} |" for f in comparison.flipped_tasks[:shown])]
    return "\n".join(lines) + "\n"
