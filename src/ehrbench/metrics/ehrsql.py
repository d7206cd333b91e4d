"""EHRSQL metrics over answered and abstained items: the reliability score RS(c) of EHRSQL-2024 — per run and as
the mean over k runs — and the answerability / execution precision, recall and F1 of EHRSQL
(docs/benchmarks.md#metrics).

`Outcome.compare` compares answers with `ehrbench.ehrsql.answers_match` (EHRSQL-2024's comparison: numeric cells
rounded to 3 decimals, rows sorted, the first 100 rows); the protocol scorers (`ehrbench.scoring`) decide outcomes
under their own rules and use these formulas.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ehrbench.ehrsql.scoring import answers_match

Answer = str | Iterable[Sequence[object]]  # executed rows or an answer string as in answer.json
Penalty = int | float | Literal["N"]

# c of RS(c) as the EHRSQL-2024 leaderboard reports it; "N" is the number of scored items.
RS_PENALTIES: tuple[Penalty, ...] = (0, 5, 10, "N")


@dataclass(frozen=True)
class Outcome:
    """One scored item: whether the agent answered (False = abstained), whether the item is answerable, and
    whether the answer matches the gold one (only possible for an answered, answerable item)."""

    answered: bool
    answerable: bool
    correct: bool = False

    def __post_init__(self) -> None:
        if self.correct and not (self.answered and self.answerable):
            raise ValueError(f"{self}: only an answered, answerable item can be correct")

    @classmethod
    def compare(cls, gold: Answer | None, prediction: Answer | None) -> Outcome:
        """The outcome of a prediction against the gold answer; None as gold means unanswerable, None as the
        prediction means the agent abstained."""
        answered, answerable = prediction is not None, gold is not None
        correct = answered and answerable and answers_match(gold, prediction)
        return cls(answered=answered, answerable=answerable, correct=correct)

    @classmethod
    def of_trial(cls, status: str, abstained: bool | None, answerable: bool | None, correct: bool | None) -> Outcome:
        """The outcome of a scored trial (status completed or error; an invalid trial is not scored). A trial that
        ended in an error is an answer, and a wrong one — as the published scorers count a prediction whose execution
        failed; a completed trial is an answer unless it abstained."""
        if status not in ("completed", "error"):
            raise ValueError(f"a trial of status {status!r} is not scored; expected completed or error")
        answered = status == "error" or not abstained
        answerable = bool(answerable)
        return cls(answered=answered, answerable=answerable,
                   correct=status == "completed" and answered and answerable and bool(correct))


def _penalty_value(penalty: Penalty, items: int) -> float:
    if penalty == "N":
        return float(items)
    if isinstance(penalty, bool) or not isinstance(penalty, int | float) or not penalty >= 0:
        raise ValueError(f"penalty c={penalty!r}: expected a number >= 0 or 'N' (the number of items)")
    return float(penalty)


def item_score(outcome: Outcome, penalty: float) -> float:
    """+1 for a correct answer or a correct abstention, 0 for abstaining on an answerable item, −penalty for a
    wrong answer or an answer to an unanswerable item (the published scorer's five cases)."""
    if not outcome.answered:
        return 0.0 if outcome.answerable else 1.0
    return 1.0 if outcome.correct else -penalty


def reliability_score(outcomes: Sequence[Outcome], penalty: Penalty) -> float:
    """RS(c) as a mean over items, in [−c, 1]; the EHRSQL-2024 paper and leaderboard report 100 × this value
    (`as_percent`). c = "N" is the number of items, so one error outweighs every other item's gain — the
    published scorer's `penalty=len(scores)`. No items is an error: there is nothing to average."""
    if not outcomes:
        raise ValueError("reliability score of no items: nothing to average")
    c = _penalty_value(penalty, len(outcomes))
    return sum(item_score(outcome, c) for outcome in outcomes) / len(outcomes)


def reliability_scores(outcomes: Sequence[Outcome]) -> dict[Penalty, float]:
    """RS(c) for every c of `RS_PENALTIES`, keyed by c (0, 5, 10, "N")."""
    return {penalty: reliability_score(outcomes, penalty) for penalty in RS_PENALTIES}


def as_percent(score: float) -> float:
    """A score on the papers' 0–100 scale."""
    return 100.0 * score


@dataclass(frozen=True)
class RunScores:
    """RS(c) of each of k runs (run = one trial index over the tasks), their mean and spread. The mean over runs is
    what compares with a paper's number: the published scorer scores one prediction file, so with c = N its penalty
    is the number of items of one run, not of all k runs pooled."""

    runs: tuple[float, ...]  # RS(c) of run 0, 1, … (runs without a scored item left out)

    @property
    def mean(self) -> float:
        return sum(self.runs) / len(self.runs)

    @property
    def minimum(self) -> float:
        return min(self.runs)

    @property
    def maximum(self) -> float:
        return max(self.runs)


def reliability_score_over_runs(runs: Mapping[int, Sequence[Outcome]] | Sequence[Sequence[Outcome]],
                                penalty: Penalty) -> RunScores:
    """RS(c) per run (each run's own N for c = "N") and their mean, min and max. `runs`: the outcomes of each run,
    as a list or keyed by trial index; a run without outcomes is left out. No run with outcomes is an error."""
    groups = runs.values() if isinstance(runs, Mapping) else runs
    scored = [reliability_score(list(outcomes), penalty) for outcomes in groups if outcomes]
    if not scored:
        raise ValueError("reliability score of no runs: nothing to average")
    return RunScores(tuple(scored))


def reliability_scores_over_runs(runs: Mapping[int, Sequence[Outcome]] | Sequence[Sequence[Outcome]]
                                 ) -> dict[Penalty, RunScores]:
    """`reliability_score_over_runs` for every c of `RS_PENALTIES`, keyed by c."""
    return {penalty: reliability_score_over_runs(runs, penalty) for penalty in RS_PENALTIES}


@dataclass(frozen=True)
class PrecisionRecall:
    """Counts of one binary decision; the ratios follow EHRSQL's evaluate.py: a ratio with a zero denominator
    is 0 (no answered items → precision 0; no answerable items → recall 0), and F1 is 0 when P + R = 0."""

    true_positives: int
    predicted: int  # items the agent answered
    actual: int  # answerable items

    @property
    def precision(self) -> float:
        return self.true_positives / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.true_positives / self.actual if self.actual else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def published(self, epsilon: float = 1e-10) -> tuple[float, float, float]:
        """(precision, recall, F1) computed as EHRSQL's evaluate.py does: tp / (n + ε) and 2PR / (P + R + ε). Equal to
        the exact ratios but for a relative 1e-10, which shows only when a ×100 value rounded to 2 decimals sits on
        a tie (…5)."""
        precision = self.true_positives / (self.predicted + epsilon)
        recall = self.true_positives / (self.actual + epsilon)
        return precision, recall, 2 * (precision * recall / (precision + recall + epsilon))


def answerability_f1(outcomes: Iterable[Outcome]) -> PrecisionRecall:
    """F1_ans: answering is the positive decision; a true positive is an answered, answerable item."""
    outcomes = list(outcomes)
    return PrecisionRecall(
        true_positives=sum(o.answered and o.answerable for o in outcomes),
        predicted=sum(o.answered for o in outcomes),
        actual=sum(o.answerable for o in outcomes))


def execution_f1(outcomes: Iterable[Outcome]) -> PrecisionRecall:
    """F1_exe: as F1_ans, but a true positive must also be answered correctly."""
    outcomes = list(outcomes)
    return PrecisionRecall(
        true_positives=sum(o.correct for o in outcomes),
        predicted=sum(o.answered for o in outcomes),
        actual=sum(o.answerable for o in outcomes))
