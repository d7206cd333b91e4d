"""Protocol `ehrsql2022`: EHRSQL (NeurIPS 2022)'s official evaluation (glee4810/EHRSQL `evaluate.py`;
docs/benchmarks.md#ehrsql-answerability-and-execution-f1).

The published rules, reimplemented:

1. Gold and predicted SQL alike are rewritten (`post_process_sql`): the whole query lower-cased first (string
   literals too), then `current_time` → the quoted current time (EHRSQL's default 2105-12-31 23:59:00), the vital
   placeholders → their normal range, `''` → `'`, `< =` → `<=`, `%y` → `%Y`, `%j` → `%J`, and `'now'` → the current
   time. No whitespace is collapsed.
2. A query that is then exactly "null" is an abstention (gold: unanswerable) and is not run; a question id missing
   from the prediction file is predicted "n/a", which runs and fails. A query that fails or times out has a result
   that matches nothing.
3. A result is compared as text: the first 100 rows in the order returned, each as Python's `str` of the row tuple
   (no rounding: `(94,)` ≠ `(94.0,)`), then sorted.
4. precision = share of the answered items whose gold is answerable (F1_ans) / whose result equals the gold's (F1_exe);
   recall = share of the answerable items that were answered / answered with the gold's result; each ratio and the
   F1 carry the published 1e-10 in their denominators; all six are reported ×100, rounded to 2 decimals.

A trial (`score_trial`) compares the agent's answer rows with the gold rows (`Gold.answer_rows`) by rule 3. When
either side has only an answer string (a baseline's answer, or gold without rows), the two answer.json strings are
compared instead (ours).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ehrbench.ehrsql.scoring import format_answer, replace_vital_ranges
from ehrbench.metrics.ehrsql import Outcome, answerability_f1, execution_f1
from ehrbench.scoring.ehrsql2024 import Execute, display_answer
from ehrbench.tasks import AgentAnswer, EvalTask

PROTOCOL = "ehrsql2022"
CURRENT_TIME = "2105-12-31 23:59:00"  # evaluate.py's default --current_time
MAX_ROWS = 100
NDIGITS = 2  # evaluate.py's default --ndigits
NULL = "null"
MISSING = "n/a"  # what evaluate.py predicts for a question id the prediction file lacks


def post_process_sql(sql: str, current_time: str = CURRENT_TIME) -> str:
    """evaluate.py's rewrite of a gold or predicted query, in its order (module docstring, rule 1)."""
    query = sql.lower()
    query = query.replace("current_time", f"'{current_time}'")
    query = replace_vital_ranges(query)
    query = query.replace("''", "'").replace("< =", "<=")
    query = query.replace("%y", "%Y").replace("%j", "%J")
    return query.replace("'now'", f"'{current_time}'")


def result_text(rows: Sequence[Sequence[object]]) -> str:
    """A result as evaluate.py compares it: the first 100 rows as `str` of their tuples, sorted."""
    return str(sorted(str(tuple(row)) for row in list(rows)[:MAX_ROWS]))


def executed(sql: str | None, execute: Execute, tag: str, current_time: str = CURRENT_TIME) -> str:
    """The result of one query: "null" for an abstention (None reads as "null"), a text matching nothing when it
    fails, else `result_text` of its rows."""
    if sql is None:
        return NULL
    query = sql if sql == MISSING else post_process_sql(sql, current_time)
    if query == NULL:
        return NULL
    try:
        rows = execute(query)
    except Exception:  # noqa: BLE001 - evaluate.py turns every failure (and a timeout) into an error row
        rows = [(f"error_{tag}",)]
    return result_text(rows)


def outcome(gold: str, predicted: str) -> Outcome:
    answered, answerable = predicted != NULL, gold != NULL
    return Outcome(answered=answered, answerable=answerable, correct=answered and answerable and gold == predicted)


def scores(outcomes: Sequence[Outcome]) -> dict[str, float | int]:
    """evaluate.py's six numbers (×100, rounded to 2 decimals), with the counts behind them."""
    result: dict[str, float | int] = {}
    for name, counts in (("ans", answerability_f1(outcomes)), ("exec", execution_f1(outcomes))):
        precision, recall, f1 = counts.published()
        result.update({f"precision_{name}": round(100.0 * precision, NDIGITS),
                       f"recall_{name}": round(100.0 * recall, NDIGITS), f"f1_{name}": round(100.0 * f1, NDIGITS)})
    result.update(items=len(outcomes), answered=sum(o.answered for o in outcomes),
                  answerable=sum(o.answerable for o in outcomes), correct=sum(o.correct for o in outcomes))
    return result


def score_predictions(gold_items: Mapping[str, str | None], predictions: Mapping[str, str | None],
                      execute: Execute, *, current_time: str = CURRENT_TIME) -> dict:
    """EHRSQL's six scores of a prediction file (question id → SQL or "null") against the gold (question id → gold
    SQL or "null"/None), both run with `execute` on the task's SQLite database. Ids only in the predictions are
    ignored, ids missing from them are predicted "n/a", as evaluate.py does."""
    outcomes = [outcome(executed(gold_items[key], execute, "real", current_time),
                        executed(predictions.get(key, MISSING), execute, "pred", current_time))
                for key in gold_items]
    return {"protocol": PROTOCOL, **scores(outcomes)}


def score_trial(task: EvalTask, answer: AgentAnswer) -> dict:
    """reward and correct of one trial: 1 for a right answer (rule 3) or a right abstention."""
    gold = task.gold
    if answer.abstained:
        correct = not gold.is_answerable
    elif not gold.is_answerable:
        correct = False
    elif gold.answer_rows is not None and answer.answer_rows is not None:
        correct = result_text(answer.answer_rows) == result_text(gold.answer_rows)
    else:  # an answer string on either side: the answer.json forms (ours)
        given = answer.answer_text if answer.answer_text is not None else (
            format_answer(answer.answer_rows) if answer.answer_rows is not None else None)
        wanted = gold.answer_text if gold.answer_text is not None else (
            format_answer(gold.answer_rows) if gold.answer_rows is not None else None)
        correct = given is not None and given == wanted
    return {"reward": float(correct), "correct": correct, "answer": display_answer(answer)}
