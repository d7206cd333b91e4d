"""Protocol `ehrsql2024`: the EHRSQL-2024 shared task's scorer (glee4810/ehrsql-2024 `scoring_program/`:
`scoring.py`, `scoring_utils.py`, `postprocessing.py`;
docs/benchmarks.md#ehrsql-2024-answer-comparison-and-reliability-score).

The published rules, reimplemented:

1. Gold (label.json) and predicted SQL alike go through `post_process_sql` (whitespace, split operators,
   DATE_SUB/DATE_ADD, the current time for `current_time` / `'now'` / `NOW()` …, vital ranges, `%y`/`%j`).
2. A query that is then exactly "null" is an abstention (gold: an unanswerable question) and is not run. Any other
   query is run on the SQLite database; its rows become `scorer_answer` (every numeric-looking cell rounded to 3
   decimals, rows sorted, the first 100). A query that fails is the result "error_pred" (gold: "error_real"): an
   answer that matches nothing.
3. Per item: +1 right answer or abstention on an unanswerable item, 0 abstention on an answerable one, −1 wrong answer
   or any answer to an unanswerable one; RS(c) is the mean with −1 weighed c, reported ×100 as accuracy0, accuracy5,
   accuracy10 and accuracyN (c = N, the number of items).
4. The prediction file must have exactly the ids of the label file.

A trial (`score_trial`) is one item: the agent's answer rows (or answer string) against the gold answer string,
compared in the scorer's form; an abstention is "null". The harness ran the agent's final SQL already, rewritten by
step 1 for an imported task (`ehrbench.scoring.prediction_sql`), so its rows are the ones this scorer would get;
predictions scored from files (`score_predictions`) are rewritten and executed here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ehrbench.ehrsql.scoring import CURRENT_TIME, format_answer, post_process_sql, scorer_answer
from ehrbench.metrics.ehrsql import RS_PENALTIES, Outcome, as_percent, reliability_score
from ehrbench.tasks import AgentAnswer, EvalTask

PROTOCOL = "ehrsql2024"
NULL = "null"  # the published abstention and unanswerable label
Execute = Callable[[str], Sequence[Sequence[object]]]  # SQL → rows, as Python's sqlite3 returns them; raises on error


def executed(sql: str | None, execute: Execute, tag: str, current_time: str = CURRENT_TIME) -> str:
    """The scorer's result of one query: "null" for an abstention (None reads as "null"), "error_<tag>" when it fails,
    else the rows in the scorer's form."""
    if sql is None:
        return NULL
    query = post_process_sql(sql, current_time)
    if query == NULL:
        return NULL
    try:
        rows = execute(query)
    except Exception:  # noqa: BLE001 - the published scorer turns every failure into an error result
        return f"error_{tag}"
    return scorer_answer(rows)


def outcome(gold: str, predicted: str) -> Outcome:
    """The item's outcome from the two results ("null" = unanswerable gold / abstained prediction)."""
    answered, answerable = predicted != NULL, gold != NULL
    return Outcome(answered=answered, answerable=answerable, correct=answered and answerable and gold == predicted)


def scores(outcomes: Sequence[Outcome]) -> dict[str, float | int]:
    """The published scores.json (accuracyC = 100 × RS(C)), with the counts behind them."""
    keys = {0: "accuracy0", 5: "accuracy5", 10: "accuracy10", "N": "accuracyN"}
    result: dict[str, float | int] = {keys[c]: as_percent(reliability_score(outcomes, c)) for c in RS_PENALTIES}
    result.update(items=len(outcomes), answered=sum(o.answered for o in outcomes),
                  answerable=sum(o.answerable for o in outcomes), correct=sum(o.correct for o in outcomes))
    return result


def score_predictions(gold_items: Mapping[str, str | None], predictions: Mapping[str, str | None],
                      execute: Execute, *, current_time: str = CURRENT_TIME) -> dict:
    """EHRSQL-2024's scores of a prediction file (question id → SQL or "null") against the label file (question id →
    gold SQL or "null"/None), both run with `execute` on the task's SQLite database."""
    missing, extra = sorted(set(gold_items) - set(predictions)), sorted(set(predictions) - set(gold_items))
    if missing or extra:
        raise ValueError(f"prediction ids do not match the gold ids (missing {missing[:5]}, unknown {extra[:5]}); "
                         "EHRSQL-2024's scorer needs exactly the same ids")
    outcomes = [outcome(executed(gold_items[key], execute, "real", current_time),
                        executed(predictions[key], execute, "pred", current_time)) for key in gold_items]
    return {"protocol": PROTOCOL, **scores(outcomes)}


def trial_answer(answer: AgentAnswer) -> str | None:
    """The answer of a trial as a result: its rows, else its answer string; None when it gave neither."""
    if answer.answer_rows is not None:
        return scorer_answer(answer.answer_rows)
    if answer.answer_text is not None:
        return scorer_answer(answer.answer_text)
    return None


def score_trial(task: EvalTask, answer: AgentAnswer) -> dict:
    """reward and correct of one trial: 1 for a right answer or a right abstention. An answer with nothing in it
    (no rows, no text) is an answer that matches nothing, as a failed query is for the scorer."""
    gold = task.gold
    gold_result = scorer_answer(gold.answer_text) if gold.is_answerable and gold.answer_text is not None else (
        NULL if not gold.is_answerable else "error_real")
    predicted = NULL if answer.abstained else (trial_answer(answer) or "error_pred")
    item = outcome(gold_result, predicted)
    correct = item.correct or (not item.answered and not item.answerable)
    return {"reward": float(correct), "correct": correct, "answer": display_answer(answer)}


def display_answer(answer: AgentAnswer) -> str | None:
    """What the results show as the trial's answer: the answer string, or the rows in answer.json's form."""
    if answer.answer_text is not None:
        return answer.answer_text
    return format_answer(answer.answer_rows) if answer.answer_rows is not None else None
