"""Conformance of protocol `ehrsql2022` with EHRSQL (NeurIPS 2022)'s official evaluation (glee4810/EHRSQL
`evaluate.py`), case by case. Every expected value is worked out by hand from the published rule named in its case,
on a small SQLite database, never from our output."""

from __future__ import annotations

import pytest

from ehrbench.metrics import PrecisionRecall
from ehrbench.scoring import prediction_sql, score_predictions, score_trial
from ehrbench.scoring.ehrsql2022 import executed, outcome, post_process_sql, result_text
from ehrbench.tasks import AgentAnswer, EvalTask, Gold, TaskView
from tests.unit.scoring_database import scoring_database

RIGHT, ABSTAINED, WRONG = "right", "abstained", "wrong"


@pytest.fixture(scope="module")
def execute():
    return scoring_database()


def item(gold: str | None, predicted: str | None, execute) -> str:
    found = outcome(executed(gold, execute, "real"), executed(predicted, execute, "pred"))
    return RIGHT if found.correct else (ABSTAINED if not found.answered else WRONG)


CASES = [
    # (rule pinned, gold SQL, predicted SQL, expected outcome)
    ("equal results are right", "SELECT name FROM t", "SELECT name FROM t", RIGHT),
    ("no rounding: (94,) is not (94.0,)", "SELECT 94", "SELECT 94.0", WRONG),
    ("rows compared as str(tuple): (94,) is not ('94',)", "SELECT 94", "SELECT '94'", WRONG),
    ("no rounding: 0.1 + 0.2 is not 0.3", "SELECT 0.3", "SELECT 0.1 + 0.2", WRONG),
    ("a stored REAL keeps all its digits: 7.42356 is not 7.424", "SELECT val FROM t WHERE id = 2", "SELECT 7.424",
     WRONG),
    ("rows are sorted: order is ignored within the first 100", "SELECT name FROM t ORDER BY id",
     "SELECT name FROM t ORDER BY id DESC", RIGHT),
    ("the first 100 rows as returned, then sorted: a row returned first takes a place", "SELECT name FROM big",
     "SELECT 'zz' UNION ALL SELECT name FROM big", WRONG),
    ("the first 100 rows as returned: extra rows after them are cut", "SELECT name FROM big",
     "SELECT name FROM big UNION ALL SELECT 'zz'", RIGHT),
    ("more than 100 rows: another order keeps other rows", "SELECT n FROM nums ORDER BY n",
     "SELECT n FROM nums ORDER BY n DESC", WRONG),
    ("more than 100 rows in the same order are right", "SELECT n FROM nums ORDER BY n",
     "SELECT n FROM nums WHERE n >= 0 ORDER BY n", RIGHT),
    ("rows are a list: a duplicate row differs", "SELECT name FROM t", "SELECT name FROM t UNION ALL SELECT 'aspirin'",
     WRONG),
    ("cells keep their column order", "SELECT id, name FROM t", "SELECT name, id FROM t", WRONG),
    ("NULL is (None,) on both sides", "SELECT val FROM t WHERE id = 3", "SELECT NULL", RIGHT),
    ("two empty results are equal", "SELECT name FROM t WHERE 0", "SELECT id FROM t WHERE 0", RIGHT),
    ("the query is lower-cased, literals too: 'ASPIRIN' finds 'aspirin'", "SELECT id FROM t WHERE name = 'aspirin'",
     "SELECT id FROM t WHERE name = 'ASPIRIN'", RIGHT),
    ("lower-cased literals in the output: 'Aspirin' is 'aspirin'", "SELECT 'aspirin'", "SELECT 'Aspirin'", RIGHT),
    ("current_time → '2105-12-31 23:59:00'", "SELECT '2105-12-31 23:59:00'", "SELECT current_time", RIGHT),
    ("lower-cased first, so CURRENT_TIME is replaced too", "SELECT '2105-12-31 23:59:00'", "SELECT CURRENT_TIME",
     RIGHT),
    ("'now' → the current time", "SELECT datetime(current_time)", "SELECT datetime('now')", RIGHT),
    ("NOW() is not rewritten: now() fails in SQLite", "SELECT '2105-12-31 23:59:00'", "SELECT NOW()", WRONG),
    ("current_date is not rewritten: SQLite's is today", "SELECT '2105-12-31'", "SELECT current_date", WRONG),
    ("DATE_SUB is not rewritten: it fails in SQLite", "SELECT '2104-12-31 23:59:00'",
     "SELECT DATE_SUB('2105-12-31 23:59:00', INTERVAL 1 YEAR)", WRONG),
    ("'%Y' survives the lower-casing ('%y' → '%Y')", "SELECT '2105'", "SELECT strftime('%Y', '2105-01-01')", RIGHT),
    ("'%j' → '%J' (the Julian day)", "SELECT strftime('%J', '2105-01-01')", "SELECT strftime('%j', '2105-01-01')",
     RIGHT),
    ("doubled quotes are undone: ''aspirin'' → 'aspirin'", "SELECT 'aspirin'", "SELECT ''aspirin''", RIGHT),
    ("'< =' → '<='", "SELECT 1", "SELECT 1 WHERE 1 < = 2", RIGHT),
    ("'> =' is not joined: a syntax error", "SELECT 1", "SELECT 1 WHERE 2 > = 1", WRONG),
    ("'! =' is not joined: a syntax error", "SELECT 1", "SELECT 1 WHERE 2 ! = 1", WRONG),
    ("vital placeholders → the normal range (35.5, 38.1)", "SELECT 1",
     "SELECT 1 WHERE 37 BETWEEN temperature_lower AND temperature_upper", RIGHT),
    ("'null' is an abstention", "SELECT name FROM t", "null", ABSTAINED),
    ("lower-cased first, so 'NULL' is an abstention too", "SELECT name FROM t", "NULL", ABSTAINED),
    ("no stripping: ' null' runs, fails, and is a wrong answer", "SELECT name FROM t", " null", WRONG),
    ("a prediction that fails is answered and wrong", "SELECT name FROM t", "SELECT nope FROM t", WRONG),
    ("a failing gold matches nothing, not even the same failure", "SELECT nope FROM t", "SELECT nope FROM t", WRONG),
    ("an answer to an unanswerable question is wrong", "null", "SELECT name FROM t", WRONG),
    ("an abstention on an unanswerable question is no answer (counted in neither list)", "null", "null", ABSTAINED),
]


@pytest.mark.parametrize("rule, gold, predicted, expected", CASES, ids=[case[0] for case in CASES])
def test_item_outcomes(rule, gold, predicted, expected, execute):
    assert item(gold, predicted, execute) == expected, rule


def test_the_rewrite_order():
    # lower() first, then current_time, vital ranges, '' → ', '< =', %y/%j, and 'now' last
    assert post_process_sql("SELECT Strftime('%Y', CURRENT_TIME) WHERE X < = 'NOW'") == \
        "select strftime('%Y', '2105-12-31 23:59:00') where x <= '2105-12-31 23:59:00'"
    # a row is str() of its tuple, the first 100 as returned, then sorted
    assert result_text([(2, "b"), (1, "a")]) == "[\"(1, 'a')\", \"(2, 'b')\"]"


def test_the_six_scores_of_a_prediction_file(execute):
    # 8 gold items (6 answerable, 2 not). Predictions: a, b, c right; d wrong (94.0 for 94); e abstained;
    # f missing from the file → 'n/a', which runs, fails and is answered wrong; g answers an unanswerable question;
    # h abstains on an unanswerable one; "zz" is not a gold id and is ignored.
    # precision lists over the 6 answered (a, b, c, d, f, g): answerable 5 of 6, right 3 of 6;
    # recall lists over the 6 answerable (a–f): answered 5 of 6, right 3 of 6.
    # P_ans = R_ans = F1_ans = 5/6 → 83.33; P_exec = R_exec = F1_exec = 1/2 → 50.0 (×100, 2 decimals)
    gold = {"a": "SELECT 1", "b": "SELECT 2", "c": "SELECT 'x'", "d": "SELECT 94", "e": "SELECT 5", "f": "SELECT 6",
            "g": "null", "h": "null"}
    predictions = {"a": "SELECT 1", "b": "select 2", "c": "SELECT 'X'", "d": "SELECT 94.0", "e": "null",
                   "g": "SELECT 7", "h": "null", "zz": "SELECT 1"}
    scores = score_predictions("ehrsql2022", gold, predictions, execute)
    assert scores == {"protocol": "ehrsql2022", "precision_ans": 83.33, "recall_ans": 83.33, "f1_ans": 83.33,
                      "precision_exec": 50.0, "recall_exec": 50.0, "f1_exec": 50.0, "items": 8, "answered": 6,
                      "answerable": 6, "correct": 3}


def test_the_published_denominators_carry_one_ten_billionth():
    # P = tp / (n + 1e-10), F1 = 2PR / (P + R + 1e-10): nothing answered gives 0, not an error
    assert PrecisionRecall(0, 0, 3).published() == (0.0, 0.0, 0.0)
    precision, recall, f1 = PrecisionRecall(1, 2, 4).published()
    assert (precision, recall) == (1 / (2 + 1e-10), 1 / (4 + 1e-10))
    assert f1 == 2 * (precision * recall / (precision + recall + 1e-10))


def _task(gold: Gold) -> EvalTask:
    return EvalTask(TaskView("ehrsql", "q", "eicu", "?"), Gold(**{**gold.__dict__, "protocol": "ehrsql2022"}))


@pytest.mark.parametrize("rule, gold, answer, reward", [
    ("a trial's rows are compared as str(tuple), unrounded: 94.0 is not 94", Gold(True, "[['94']]",
     answer_rows=((94,),)), AgentAnswer(answer_rows=[[94.0]]), 0.0),
    ("a trial's rows equal to the gold rows, in another order, are right",
     Gold(True, "[['a'], ['b']]", answer_rows=(("a",), ("b",))), AgentAnswer(answer_rows=[["b"], ["a"]]), 1.0),
    ("an abstention on an unanswerable question is right", Gold(False), AgentAnswer(abstained=True), 1.0),
    ("a baseline's answer string is compared with the gold's (ours)", Gold(True, "[['iv']]", answer_rows=(("iv",),)),
     AgentAnswer(answer_text="[['iv']]"), 1.0),
])
def test_trials(rule, gold, answer, reward):
    assert score_trial(_task(gold), answer)["reward"] == reward, rule


def test_a_trials_sql_is_run_as_evaluate_py_runs_a_prediction():
    # evaluate.py lower-cases the predicted query before its other rewrites, so a value's case is lost with it
    assert prediction_sql("ehrsql2022", "SELECT Name FROM T WHERE name = 'Aspirin' AND t < current_time") == \
        "select name from t where name = 'aspirin' and t < '2105-12-31 23:59:00'"
