"""Conformance of protocol `ehrsql2024` with the EHRSQL-2024 shared task's scorer (glee4810/ehrsql-2024
`scoring_program/scoring.py`, `scoring_utils.py`, `postprocessing.py`), case by case. Every expected value is worked
out by hand from the published rule named in its case, on a small SQLite database, never from our output."""

from __future__ import annotations

import pytest

from ehrbench.ehrsql.scoring import post_process_sql, scorer_answer, scorer_cell
from ehrbench.scoring import prediction_sql, score_predictions, score_trial
from ehrbench.scoring.ehrsql2024 import executed, outcome
from ehrbench.tasks import AgentAnswer, EvalTask, Gold, TaskView
from tests.unit.scoring_database import scoring_database

RIGHT, ABSTAINED, WRONG = 1, 0, -1  # the published item scores (x in ANS/UnANS, g(x), Acc(x))


@pytest.fixture(scope="module")
def execute():
    return scoring_database()


def item(gold: str | None, predicted: str | None, execute) -> int:
    """The published item score of one prediction against one gold query."""
    found = outcome(executed(gold, execute, "real"), executed(predicted, execute, "pred"))
    if not found.answered:
        return ABSTAINED if found.answerable else RIGHT
    return RIGHT if found.correct else WRONG


CASES = [
    # (rule pinned, gold SQL, predicted SQL, expected item score)
    ("equal results score +1", "SELECT name FROM t", "SELECT name FROM t", RIGHT),
    ("every cell float() reads is rounded: int 94 and float 94.0 are both '94.0'", "SELECT 94", "SELECT 94.0", RIGHT),
    ("numeric text is read by float() too: '94' is '94.0'", "SELECT 94", "SELECT '94'", RIGHT),
    ("text float() reads in any notation: '1e3' is '1000.0'", "SELECT 1000", "SELECT '1e3'", RIGHT),
    ("rounding to 3 decimals: 1.23456 and 1.2346 are both '1.235'", "SELECT 1.23456", "SELECT 1.2346", RIGHT),
    ("rounding to 3 decimals: 1.2344 ('1.234') and 1.2346 ('1.235') differ", "SELECT 1.2344", "SELECT 1.2346", WRONG),
    ("a stored 7.42356 is '7.424'", "SELECT val FROM t WHERE id = 2", "SELECT 7.424", RIGHT),
    ("rows are sorted: row order is ignored", "SELECT name FROM t ORDER BY id", "SELECT name FROM t ORDER BY id DESC",
     RIGHT),
    ("rows are a list, not a set: a duplicate row differs", "SELECT name FROM t",
     "SELECT name FROM t UNION ALL SELECT 'aspirin'", WRONG),
    ("cells of a row keep their column order", "SELECT id, name FROM t", "SELECT name, id FROM t", WRONG),
    ("NULL is 'None'", "SELECT val FROM t WHERE id = 3", "SELECT NULL", RIGHT),
    ("text is compared as it is (no lower-casing)", "SELECT 'aspirin'", "SELECT 'Aspirin'", WRONG),
    ("a date is text float() cannot read", "SELECT '2100-12-31'", "SELECT '2100-12-31 00:00:00'", WRONG),
    ("two empty results are equal ('[]')", "SELECT name FROM t WHERE 0", "SELECT id FROM t WHERE 0", RIGHT),
    ("sorted, then the first 100: extra rows sorting last are cut", "SELECT name FROM big",
     "SELECT name FROM big UNION ALL SELECT 'zz'", RIGHT),
    ("sorted before the cut: a row returned first but sorting last is cut", "SELECT name FROM big",
     "SELECT 'zz' UNION ALL SELECT name FROM big", RIGHT),
    ("sorted, then the first 100: a row sorting first pushes the 100th out", "SELECT name FROM big",
     "SELECT name FROM big UNION ALL SELECT '0'", WRONG),
    ("more than 100 rows: the same first 100 sorted rows in any order", "SELECT n FROM nums ORDER BY n",
     "SELECT n FROM nums ORDER BY n DESC", RIGHT),
    ("abstaining ('null') on an answerable question scores 0", "SELECT name FROM t", "null", ABSTAINED),
    ("abstaining on an answerable question with an empty answer scores 0", "SELECT name FROM t WHERE 0", "null",
     ABSTAINED),
    ("abstaining on an unanswerable question scores +1", "null", "null", RIGHT),
    ("answering an unanswerable question scores −1", "null", "SELECT name FROM t", WRONG),
    ("a prediction that fails to run is 'error_pred': −1", "SELECT name FROM t", "SELECT nope FROM t", WRONG),
    ("a failing prediction on an unanswerable question is an answer: −1", "null", "SELECT nope FROM t", WRONG),
    ("a failing gold ('error_real') matches no prediction, not even the same failure", "SELECT nope FROM t",
     "SELECT nope FROM t", WRONG),
    ("whitespace is collapsed and stripped before the 'null' test", "SELECT name FROM t", "  null\n", ABSTAINED),
    ("'NULL' is not 'null': it runs, fails, and is a wrong answer", "SELECT name FROM t", "NULL", WRONG),
    ("JSON null is read as 'null' (ours; the published scorer needs a string)", "SELECT name FROM t", None, ABSTAINED),
    ("current_time → '2100-12-31 23:59:00'", "SELECT '2100-12-31 23:59:00'", "SELECT current_time", RIGHT),
    ("NOW() → the current time", "SELECT current_time", "SELECT NOW()", RIGHT),
    ("'now' → the current time", "SELECT '2100-12-31 23:59:00'", "SELECT datetime('now')", RIGHT),
    ("current_date → '2100-12-31' (SQLite's own would be today)", "SELECT '2100-12-31'", "SELECT current_date", RIGHT),
    ("CURDATE() → '2100-12-31'", "SELECT '2100-12-31'", "SELECT CURDATE()", RIGHT),
    ("CURTIME() → '23:59:00'", "SELECT '23:59:00'", "SELECT CURTIME()", RIGHT),
    ("DATE_SUB(NOW(), INTERVAL 1 YEAR) → datetime(now, '-1 year')", "SELECT '2099-12-31 23:59:00'",
     "SELECT DATE_SUB(NOW(), INTERVAL 1 YEAR)", RIGHT),
    ("DATE_ADD('…', INTERVAL 2 DAY) → datetime('…', '+2 days')", "SELECT '2100-01-03 00:00:00'",
     "SELECT DATE_ADD('2100-01-01', INTERVAL 2 DAY)", RIGHT),
    ("date_sub in lower case is not rewritten: it fails in SQLite", "SELECT '2099-12-31 23:59:00'",
     "SELECT date_sub(NOW(), INTERVAL 1 YEAR)", WRONG),
    ("'%y' → '%Y' (and the year '2100' is read as 2100.0)", "SELECT 2100", "SELECT strftime('%y', '2100-12-31')",
     RIGHT),
    ("split operators are joined: '> =' → '>='", "SELECT 1", "SELECT 1 WHERE 2 > = 1", RIGHT),
    ("'! =' → '!='", "SELECT 1", "SELECT 1 WHERE 2 ! = 1", RIGHT),
    ("vital placeholders in a prediction → the normal range (35.5, 38.1)", "SELECT 1",
     "SELECT 1 WHERE 37 BETWEEN temperature_lower AND temperature_upper", RIGHT),
]


@pytest.mark.parametrize("rule, gold, predicted, expected", CASES, ids=[case[0] for case in CASES])
def test_item_scores(rule, gold, predicted, expected, execute):
    assert item(gold, predicted, execute) == expected, rule


def test_post_processing_rewrites_in_the_published_order():
    # DATE_SUB is turned into datetime() before NOW() is replaced, so the NOW() inside it is replaced too
    assert post_process_sql("SELECT DATE_SUB(NOW(), INTERVAL 3 MONTH)") == \
        "SELECT datetime('2100-12-31 23:59:00', '-3 months')"
    # one unit is singular: '-1 day'; the plural only for other counts
    assert post_process_sql("SELECT DATE_SUB(CURDATE(), INTERVAL 1 DAY)") == "SELECT datetime('2100-12-31', '-1 day')"
    # current_time is a plain substring: current_timestamp keeps its tail, as in the published replace()
    assert post_process_sql("SELECT current_timestamp") == "SELECT '2100-12-31 23:59:00'stamp"
    # another current time moves the date and the time of day with it
    assert post_process_sql("SELECT CURDATE(), CURTIME()", "2105-12-31 23:59:00") == \
        "SELECT '2105-12-31', '23:59:00'"


def test_cells_and_answers_in_the_scorer_form():
    # round(float(x), 3) for whatever float() reads, str() for the rest
    assert [scorer_cell(c) for c in (3, 3.0, "3", 7.42356, None, "iv", True)] == \
        ["3.0", "3.0", "3.0", "7.424", "None", "iv", "1.0"]
    # an answer.json string is read back into rows: its '0' compares as the executed 0
    assert scorer_answer("[['0'], ['1.5']]") == scorer_answer([(1.5,), (0,)]) == "[['0.0'], ['1.5']]"
    assert scorer_answer("error_pred") == "error_pred"  # other strings stay as they are


def test_the_reliability_scores_of_a_prediction_file(execute):
    # 8 items: 4 right (+1), 1 wrong (−c), 1 answer to an unanswerable (−c), 1 abstention on an unanswerable (+1),
    # 1 abstention on an answerable (0): plus 5, minus 2c. RS(0) = 5/8, RS(5) = −5/8, RS(10) = −15/8,
    # RS(N = 8) = (5 − 16)/8; reported ×100
    gold = {"a": "SELECT 1", "b": "SELECT 2", "c": "SELECT 3", "d": "SELECT 4", "e": "SELECT 5", "f": "null",
            "g": "null", "h": "SELECT 8"}
    predictions = {"a": "SELECT 1", "b": "SELECT 2.0", "c": "SELECT '3'", "d": "SELECT 4", "e": "SELECT 6",
                   "f": "SELECT 1", "g": "null", "h": "null"}
    scores = score_predictions("ehrsql2024", gold, predictions, execute)
    assert scores == {"protocol": "ehrsql2024", "accuracy0": pytest.approx(62.5), "accuracy5": pytest.approx(-62.5),
                      "accuracy10": pytest.approx(-187.5), "accuracyN": pytest.approx(-137.5), "items": 8,
                      "answered": 6, "answerable": 6, "correct": 4}


def test_the_prediction_file_must_have_the_gold_ids(execute):
    # scoring.py: assert set(real_dict) == set(pred_dict), "IDs do not match"
    with pytest.raises(ValueError, match="do not match"):
        score_predictions("ehrsql2024", {"a": "SELECT 1"}, {"a": "null", "b": "null"}, execute)


def _task(gold: Gold) -> EvalTask:
    return EvalTask(TaskView("ehrsql", "q", "mimic_iv", "?"), gold)


@pytest.mark.parametrize("rule, gold, answer, reward", [
    ("a trial's rows are compared in the scorer's form: 94.0 answers '94'", Gold(True, "[['94']]"),
     AgentAnswer(answer_rows=[[94.0]]), 1.0),
    ("a trial's rows: 1.2344 is not '1.235'", Gold(True, "[['1.235']]"), AgentAnswer(answer_rows=[[1.2344]]), 0.0),
    ("an abstention on an unanswerable question is right", Gold(False), AgentAnswer(abstained=True), 1.0),
    ("an abstention on an answerable question scores 0", Gold(True, "[['1']]"), AgentAnswer(abstained=True), 0.0),
    ("an answer with nothing in it matches nothing", Gold(True, "[]"), AgentAnswer(), 0.0),
    ("the gold's own answer string is right (the oracle)", Gold(True, "[['iv'], ['po']]"),
     AgentAnswer(answer_text="[['iv'], ['po']]"), 1.0),
])
def test_trials(rule, gold, answer, reward):
    assert score_trial(_task(gold), answer)["reward"] == reward, rule


@pytest.mark.parametrize("protocol, sql, now, expected", [
    # scoring.py runs post_process_sql on the predictions as on the label file
    ("ehrsql2024", "SELECT current_time", None, "SELECT '2100-12-31 23:59:00'"),
    ("ehrsql2024", "SELECT DATE_SUB(NOW(), INTERVAL 1 DAY)", "2100-12-31 23:59:00",
     "SELECT datetime('2100-12-31 23:59:00', '-1 day')"),
    ("ehrsql2024", "SELECT 'now'", "2105-12-31 23:59:00", "SELECT '2105-12-31 23:59:00'"),
    # EHR-ChatQA's environment runs the agent's SQL as written; so do our own suites (no protocol)
    ("ehrchatqa", "SELECT 'now'", None, "SELECT 'now'"),
    (None, "SELECT current_time", None, "SELECT current_time"),
])
def test_a_trials_sql_is_run_as_the_scorer_runs_a_prediction(protocol, sql, now, expected):
    assert prediction_sql(protocol, sql, now) == expected
