"""Metrics over k repeated trials per task (docs/benchmarks.md#repeated-trials): success rate, Pass@k, Pass^k and Gap-k.

A trial's reward lies in [0, 1] and may be fractional. The success rate SR is the mean over tasks of each task's mean
reward (EHR-ChatQA's SR-k; with equal trial counts it is the mean over all trials). Pass@k and Pass^k count a trial
as a success when its reward is at least 1 − 1e-6 (tau-bench's `is_successful`, which EHR-ChatQA's `reward == 1`
agrees with on its 0/1 rewards). Per task, with n trials and s successes,
Pass@k = 1 − C(n−s, k)/C(n, k) (some of k trials drawn without replacement succeeds) and
Pass^k = C(s, k)/C(n, k) (all k succeed). Binomials and means are exact fractions until the final float.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from math import comb

PerTask = Callable[[int, int, int], Fraction]  # (n, s, k) -> the task's exact value
SUCCESS_TOLERANCE = 1e-6  # a reward within this of 1 is a success (tau-bench)


def _check(n: int, s: int, k: int) -> None:
    if not 0 <= s <= n:
        raise ValueError(f"s={s} successes among n={n} trials: expected 0 <= s <= n")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} with n={n} trials: expected 1 <= k <= n")


def _pass_at_k(n: int, s: int, k: int) -> Fraction:
    _check(n, s, k)
    return 1 - Fraction(comb(n - s, k), comb(n, k))


def _pass_hat_k(n: int, s: int, k: int) -> Fraction:
    _check(n, s, k)
    return Fraction(comb(s, k), comb(n, k))


def pass_at_k(n: int, s: int, k: int) -> float:
    """The chance that at least one of k of the task's n trials, drawn without replacement, succeeds."""
    return float(_pass_at_k(n, s, k))


def pass_hat_k(n: int, s: int, k: int) -> float:
    """Pass^k: the chance that all k of the task's n trials, drawn without replacement, succeed."""
    return float(_pass_hat_k(n, s, k))


def _rewards(rewards: Iterable[float]) -> list[float]:
    rewards = list(rewards)
    bad = [r for r in rewards if not 0 <= r <= 1]
    if bad:
        raise ValueError(f"rewards {bad[:5]} outside [0, 1]")
    return rewards


def is_success(reward: float) -> bool:
    """A trial succeeds when its reward is at least 1 − 1e-6."""
    return reward >= 1 - SUCCESS_TOLERANCE


def successes(rewards: Iterable[float]) -> int:
    """Trials that succeed (`is_success`)."""
    return sum(is_success(r) for r in _rewards(rewards))


def success_rate(rewards: Iterable[float]) -> float:
    """The mean reward over the trials given (one task's, or all trials when every task has as many)."""
    rewards = _rewards(rewards)
    if not rewards:
        raise ValueError("success rate of no trials: nothing to average")
    return sum(rewards) / len(rewards)


def success_rate_over_tasks(tasks: Sequence[Sequence[float]]) -> float:
    """SR: the mean over tasks of each task's mean reward; each task is the list of its trials' rewards (a task
    without trials is left out). A task run 4 times weighs as much as one run twice."""
    means = [success_rate(rewards) for rewards in tasks if len(rewards)]
    if not means:
        raise ValueError("success rate of no tasks: nothing to average")
    return sum(means) / len(means)


def _mean_over_tasks(tasks: Sequence[Sequence[float]], k: int, per_task: PerTask) -> Fraction:
    if not tasks:
        raise ValueError("no tasks: nothing to average")
    return sum((per_task(len(t), successes(t), k) for t in tasks), Fraction(0)) / len(tasks)


def pass_at_k_mean(tasks: Sequence[Sequence[float]], k: int) -> float:
    """Pass@k averaged over tasks; each task is the list of its trials' rewards."""
    return float(_mean_over_tasks(tasks, k, _pass_at_k))


def pass_hat_k_mean(tasks: Sequence[Sequence[float]], k: int) -> float:
    """Pass^k averaged over tasks; each task is the list of its trials' rewards."""
    return float(_mean_over_tasks(tasks, k, _pass_hat_k))


def gap_k(tasks: Sequence[Sequence[float]], k: int) -> float:
    """Gap-k = Pass@k − Pass^k over tasks: how much success depends on luck rather than consistency."""
    return float(_mean_over_tasks(tasks, k, _pass_at_k) - _mean_over_tasks(tasks, k, _pass_hat_k))
