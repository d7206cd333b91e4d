"""A run compared with an earlier one: the change of every metric per agent and suite, and the tasks that flipped
(solved in every trial before and not now — a regression — or the other way round). What the nightly deployment
shows as its comparison artifact."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ehrbench.evaluation.report import metric_table, read_trials

KEYS = ("agent", "suite")


@dataclass(frozen=True)
class Comparison:
    previous_run: str
    metric_changes: list[dict]  # agent, suite, metric, previous, current, delta
    flipped_tasks: list[dict]  # agent, suite, task_id, previous, current (mean reward), change


def previous_run(results_root: Path, run_id: str, prefix: str) -> Path | None:
    """The newest earlier run whose id starts with `prefix` (run ids of a schedule sort by time)."""
    earlier = sorted(p for p in Path(results_root).glob(f"run_id={prefix}*")
                     if p.name < f"run_id={run_id}" and any(p.glob("part-*.parquet")))
    return earlier[-1] if earlier else None


def compare_runs(current: Path, previous: Path) -> Comparison:
    before = {tuple(row[k] for k in KEYS): row for row in metric_table(previous)}
    changes = []
    for row in metric_table(current):
        old = before.get(tuple(row[k] for k in KEYS))
        for metric, value in row.items():
            if metric in KEYS or not isinstance(value, float) or old is None or not isinstance(old.get(metric), float):
                continue
            changes.append({"agent": row["agent"], "suite": row["suite"], "metric": metric,
                            "previous": old[metric], "current": value, "delta": value - old[metric]})
    was, now = _mean_rewards(previous), _mean_rewards(current)
    flipped = []
    for key in sorted(was.keys() & now.keys()):
        if (was[key] == 1.0) != (now[key] == 1.0):
            agent, suite, task = key
            flipped.append({"agent": agent, "suite": suite, "task_id": task, "previous": was[key], "current": now[key],
                            "change": "regressed" if was[key] == 1.0 else "fixed"})
    return Comparison(previous.name.removeprefix("run_id="), changes, flipped)


def _mean_rewards(folder: Path) -> dict[tuple[str, str, str], float]:
    rewards: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for trial in read_trials(folder):
        if trial["status"] == "invalid":  # not scored
            continue
        rewards[(trial["agent"], trial["suite"], trial["task_id"])].append(float(trial["reward"]))
    return {key: sum(values) / len(values) for key, values in rewards.items()}


def comparison_markdown(comparison: Comparison, run_id: str, shown: int = 50) -> str:
    lines = [f"# Run {run_id} compared with {comparison.previous_run}", ""]
    moved = [c for c in comparison.metric_changes if abs(c["delta"]) > 1e-9]
    if moved:
        lines += ["| agent | suite | metric | previous | current | change |", "|---|---|---|---|---|---|",
                  *(f"| {c['agent']} | {c['suite']} | {c['metric']} | {c['previous']:.4g} | {c['current']:.4g} | "
                    f"{c['delta']:+.4g} |" for c in moved[:shown])]
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
