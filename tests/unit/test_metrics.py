"""The metrics of docs/benchmarks.md#metrics on hand-computed cases (arithmetic in the comments) and, for Pass@k and
Pass^k, against a brute-force enumeration of the k-subsets of trials."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import pytest

from ehrbench.metrics import (
    RS_PENALTIES,
    Outcome,
    RetrievalScore,
    answerability_f1,
    as_percent,
    execution_f1,
    gap_k,
    is_success,
    mean_retrieval_score,
    pass_at_k,
    pass_at_k_mean,
    pass_hat_k,
    pass_hat_k_mean,
    reliability_score,
    reliability_score_over_runs,
    reliability_scores,
    reliability_scores_over_runs,
    retrieval_score,
    success_rate,
    success_rate_over_tasks,
)

RIGHT = Outcome(answered=True, answerable=True, correct=True)  # +1
WRONG = Outcome(answered=True, answerable=True, correct=False)  # -c
ABSTAIN_ANSWERABLE = Outcome(answered=False, answerable=True)  # 0
ANSWER_UNANSWERABLE = Outcome(answered=True, answerable=False)  # -c
ABSTAIN_UNANSWERABLE = Outcome(answered=False, answerable=False)  # +1

# one of each of the five cases plus a second right answer: sum = 3 - 2c over 6 items
FIVE_CASES = [RIGHT, WRONG, ABSTAIN_ANSWERABLE, ANSWER_UNANSWERABLE, ABSTAIN_UNANSWERABLE, RIGHT]


# --- Outcome: the EHRSQL-2024 comparison through answers_match --------------------------------------------------

def test_float_cells_are_rounded_to_three_decimals_and_row_order_is_ignored():
    # gold: 1.23456 -> '1.235', 2 -> '2'; prediction in the other order, 1.2346 -> '1.235'
    assert Outcome.compare([(1.23456,), (2,)], [(2,), (1.2346,)]) == RIGHT


def test_floats_differing_at_the_third_decimal_are_wrong():
    # 1.2344 -> '1.234' but 1.2346 -> '1.235'
    assert Outcome.compare([(1.2344,)], [(1.2346,)]) == WRONG


def test_an_integer_and_the_equal_float_are_the_same_answer():
    # the published scorer rounds every cell float() reads: round(float(2), 3) = 2.0 -> '2.0' on both sides
    assert Outcome.compare([(2,)], [(2.0,)]) == RIGHT


def test_a_formatted_gold_string_matches_executed_rows():
    assert Outcome.compare("[['1.235'], ['abc']]", [("abc",), (1.23456,)]) == RIGHT


def test_only_the_first_hundred_sorted_rows_count():
    gold = [(f"a{i:03d}",) for i in range(100)]
    # five extra rows sorting after 'a099' fall beyond row 100: still right
    assert Outcome.compare(gold, gold + [("zz",)] * 5) == RIGHT
    # one row sorting before the others pushes 'a099' out of the first 100: wrong
    assert Outcome.compare(gold, [("0",)] + gold) == WRONG


def test_none_means_unanswerable_gold_or_abstained_prediction():
    assert Outcome.compare(None, None) == ABSTAIN_UNANSWERABLE
    assert Outcome.compare(None, [(1,)]) == ANSWER_UNANSWERABLE
    assert Outcome.compare([(1,)], None) == ABSTAIN_ANSWERABLE
    # an empty result is an answer, not an abstention
    assert Outcome.compare([], []) == RIGHT


def test_only_an_answered_answerable_item_can_be_correct():
    with pytest.raises(ValueError, match="can be correct"):
        Outcome(answered=False, answerable=True, correct=True)
    with pytest.raises(ValueError, match="can be correct"):
        Outcome(answered=True, answerable=False, correct=True)


# --- reliability score ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("penalty, expected", [
    (0, 0.5),  # (3 - 0) / 6
    (5, -7 / 6),  # (3 - 10) / 6
    (10, -17 / 6),  # (3 - 20) / 6
    ("N", -1.5),  # N = 6 items: (3 - 12) / 6
    (2.5, -1 / 3),  # (3 - 5) / 6: any c >= 0 is allowed
])
def test_reliability_score_of_the_five_cases(penalty, expected):
    assert reliability_score(FIVE_CASES, penalty) == pytest.approx(expected)


def test_reliability_scores_reports_every_penalty_and_percent_is_100_times():
    assert RS_PENALTIES == (0, 5, 10, "N")
    scores = reliability_scores(FIVE_CASES)
    assert scores == pytest.approx({0: 0.5, 5: -7 / 6, 10: -17 / 6, "N": -1.5})
    assert as_percent(scores[0]) == pytest.approx(50.0)  # the leaderboard's 'accuracy0'


def test_abstaining_on_everything_is_never_penalised():
    # three answerable (0 each) and one unanswerable (+1): 1 / 4 for every c
    outcomes = [ABSTAIN_ANSWERABLE] * 3 + [ABSTAIN_UNANSWERABLE]
    assert reliability_scores(outcomes) == pytest.approx({0: 0.25, 5: 0.25, 10: 0.25, "N": 0.25})


def test_all_wrong_scores_minus_c():
    outcomes = [WRONG, WRONG, ANSWER_UNANSWERABLE, ANSWER_UNANSWERABLE]
    assert reliability_score(outcomes, 10) == pytest.approx(-10.0)  # 4 * -10 / 4
    assert reliability_score(outcomes, "N") == pytest.approx(-4.0)  # N = 4: 4 * -4 / 4
    assert reliability_score(outcomes, 0) == 0.0


def test_with_c_n_one_error_outweighs_every_gain():
    # nine right (+9) and one wrong (-10 with N = 10): (9 - 10) / 10
    assert reliability_score([RIGHT] * 9 + [WRONG], "N") == pytest.approx(-0.1)
    assert reliability_score([RIGHT] * 9 + [WRONG], 5) == pytest.approx(0.4)  # (9 - 5) / 10


def test_reliability_score_of_no_items_is_an_error():
    with pytest.raises(ValueError, match="no items"):
        reliability_score([], 0)


@pytest.mark.parametrize("penalty", [-1, "M", "n", True, float("nan"), None])
def test_a_bad_penalty_is_an_error(penalty):
    with pytest.raises(ValueError, match="penalty"):
        reliability_score([RIGHT], penalty)


def test_a_trial_that_ended_in_an_error_is_a_wrong_answer():
    # the published scorers count a prediction whose execution failed as an answer ('error_pred'), never right
    assert Outcome.of_trial("error", None, True, None) == WRONG
    assert Outcome.of_trial("error", None, False, None) == ANSWER_UNANSWERABLE
    assert Outcome.of_trial("completed", False, True, True) == RIGHT
    assert Outcome.of_trial("completed", True, True, False) == ABSTAIN_ANSWERABLE
    assert Outcome.of_trial("completed", True, False, True) == ABSTAIN_UNANSWERABLE
    with pytest.raises(ValueError, match="not scored"):
        Outcome.of_trial("invalid", False, True, True)


def test_reliability_score_over_runs_uses_each_runs_own_n():
    # run 0: 3 right, 1 wrong → RS(N=4) = (3 - 4)/4 = -1/4; run 1: 4 right → 1; run 2 has no item and is left out.
    # mean (-1/4 + 1)/2 = 3/8. Pooled over 8 items with N = 8 it would be (7 - 8)/8 = -1/8.
    runs = {0: [RIGHT, RIGHT, RIGHT, WRONG], 1: [RIGHT] * 4, 2: []}
    scores = reliability_score_over_runs(runs, "N")
    assert scores.runs == (-0.25, 1.0)
    assert (scores.mean, scores.minimum, scores.maximum) == (pytest.approx(3 / 8), -0.25, 1.0)
    # with a fixed c, runs of equal size give the pooled value: RS(10) = ((3 - 10)/4 + 1)/2 = -3/8 = (7 - 10)/8
    assert reliability_scores_over_runs(list(runs.values()))[10].mean == pytest.approx(-3 / 8)
    with pytest.raises(ValueError, match="no runs"):
        reliability_score_over_runs([[], []], 0)


# --- F1_ans and F1_exe ----------------------------------------------------------------------------------------

# answered: 2 right, 1 wrong, 1 unanswerable (predicted = 4); answerable: 2 right, 1 wrong, 2 abstained (actual = 5)
F1_CASE = [RIGHT, RIGHT, WRONG, ANSWER_UNANSWERABLE, ABSTAIN_ANSWERABLE, ABSTAIN_ANSWERABLE,
           ABSTAIN_UNANSWERABLE, ABSTAIN_UNANSWERABLE]


def test_answerability_f1():
    # TP = answered and answerable = 3; P = 3/4, R = 3/5, F1 = 2 * (9/20) / (27/20) = 2/3
    score = answerability_f1(F1_CASE)
    assert (score.true_positives, score.predicted, score.actual) == (3, 4, 5)
    assert (score.precision, score.recall, score.f1) == pytest.approx((0.75, 0.6, 2 / 3))


def test_execution_f1():
    # TP = answered correctly = 2; P = 2/4, R = 2/5, F1 = 2 * (1/5) / (9/10) = 4/9
    score = execution_f1(F1_CASE)
    assert (score.true_positives, score.predicted, score.actual) == (2, 4, 5)
    assert (score.precision, score.recall, score.f1) == pytest.approx((0.5, 0.4, 4 / 9))


def test_all_right_on_answerable_items_is_perfect():
    for metric in (answerability_f1, execution_f1):
        score = metric([RIGHT, RIGHT, ABSTAIN_UNANSWERABLE])
        assert (score.precision, score.recall, score.f1) == (1.0, 1.0, 1.0)


def test_zero_denominators_give_zero_as_in_ehrsql():
    # nothing answered: precision 0/0 -> 0; recall 0/2 = 0; F1 0
    score = answerability_f1([ABSTAIN_ANSWERABLE, ABSTAIN_ANSWERABLE])
    assert (score.precision, score.recall, score.f1) == (0.0, 0.0, 0.0)
    # nothing answerable and nothing answered: both ratios 0/0 -> 0, even though every abstention is right
    score = execution_f1([ABSTAIN_UNANSWERABLE])
    assert (score.predicted, score.actual, score.precision, score.recall, score.f1) == (0, 0, 0.0, 0.0, 0.0)
    # nothing answerable, one answered: precision 0/1 = 0, recall 0/0 -> 0
    score = answerability_f1([ANSWER_UNANSWERABLE])
    assert (score.precision, score.recall, score.f1) == (0.0, 0.0, 0.0)
    # no items at all
    score = answerability_f1([])
    assert (score.precision, score.recall, score.f1) == (0.0, 0.0, 0.0)


# --- trials: Pass@k, Pass^k, SR, Gap-k ------------------------------------------------------------------------

def _brute_force(rewards: list[int], k: int) -> tuple[Fraction, Fraction]:
    """Over every k-subset of trials: the share with some success and the share with only successes."""
    subsets = list(combinations(rewards, k))
    some = sum(any(r == 1 for r in subset) for subset in subsets)
    every = sum(all(r == 1 for r in subset) for subset in subsets)
    return Fraction(some, len(subsets)), Fraction(every, len(subsets))


# n = 5, s = 2: Pass@k = 1 - C(3,k)/C(5,k); Pass^k = C(2,k)/C(5,k)
@pytest.mark.parametrize("k, at_k, hat_k", [
    (1, 1 - Fraction(3, 5), Fraction(2, 5)),  # 2/5, 2/5
    (2, 1 - Fraction(3, 10), Fraction(1, 10)),  # 7/10, 1/10
    (3, 1 - Fraction(1, 10), Fraction(0)),  # 9/10, 0
    (4, Fraction(1), Fraction(0)),  # C(3,4) = 0
    (5, Fraction(1), Fraction(0)),
])
def test_pass_at_k_and_pass_hat_k_for_five_trials_two_successes(k, at_k, hat_k):
    assert _brute_force([1, 1, 0, 0, 0], k) == (at_k, hat_k)  # the hand values agree with enumeration
    assert pass_at_k(5, 2, k) == pytest.approx(float(at_k))
    assert pass_hat_k(5, 2, k) == pytest.approx(float(hat_k))


@pytest.mark.parametrize("n", range(1, 7))
def test_pass_at_k_and_pass_hat_k_match_enumeration(n):
    for s in range(n + 1):
        for k in range(1, n + 1):
            some, every = _brute_force([1] * s + [0] * (n - s), k)
            assert pass_at_k(n, s, k) == pytest.approx(float(some)), (n, s, k)
            assert pass_hat_k(n, s, k) == pytest.approx(float(every)), (n, s, k)


def test_binomials_are_exact():
    # C(59,30)/C(60,30) = 30/60 exactly
    assert pass_hat_k(60, 59, 30) == 0.5
    # C(59,30)/C(60,30) = 1/2 -> 1 - 1/2
    assert pass_at_k(60, 1, 30) == 0.5


@pytest.mark.parametrize("n, s, k, message", [
    (3, 1, 4, "k=4 with n=3"),
    (3, 1, 0, "k=0 with n=3"),
    (3, 4, 1, "s=4 successes among n=3"),
    (3, -1, 1, "s=-1"),
    (0, 0, 1, "k=1 with n=0"),
])
def test_impossible_counts_are_errors(n, s, k, message):
    for metric in (pass_at_k, pass_hat_k):
        with pytest.raises(ValueError, match=message):
            metric(n, s, k)


# three tasks of three trials: s = 2, 0, 3
TASKS = [[1, 1, 0], [0, 0, 0], [1, 1, 1]]


def test_means_over_tasks():
    # k=2: Pass@2 = 1 - C(1,2)/C(3,2) = 1; 1 - C(3,2)/C(3,2) = 0; 1 - 0 = 1 -> mean 2/3
    #      Pass^2 = C(2,2)/C(3,2) = 1/3; 0; C(3,2)/C(3,2) = 1 -> mean (1/3 + 0 + 1)/3 = 4/9
    assert pass_at_k_mean(TASKS, 2) == pytest.approx(2 / 3)
    assert pass_hat_k_mean(TASKS, 2) == pytest.approx(4 / 9)
    assert gap_k(TASKS, 2) == pytest.approx(2 / 9)  # 6/9 - 4/9
    # k=1: both are s/n per task -> (2/3 + 0 + 1)/3 = 5/9, gap 0
    assert pass_at_k_mean(TASKS, 1) == pytest.approx(5 / 9)
    assert pass_hat_k_mean(TASKS, 1) == pytest.approx(5 / 9)
    assert gap_k(TASKS, 1) == 0.0
    # k=3: Pass@3 = 1, 0, 1 -> 2/3; Pass^3 = 0, 0, 1 -> 1/3
    assert gap_k(TASKS, 3) == pytest.approx(1 / 3)


def test_a_fractional_reward_counts_in_sr_but_is_not_a_success():
    rewards = [1, 0.5, 1, 0]
    assert success_rate(rewards) == pytest.approx(0.625)  # 2.5 / 4
    # s = 2 (0.5 is not a success): Pass^1 = 2/4, Pass@2 = 1 - C(2,2)/C(4,2) = 5/6
    assert pass_hat_k_mean([rewards], 1) == pytest.approx(0.5)
    assert pass_at_k_mean([rewards], 2) == pytest.approx(5 / 6)
    # a reward just below 1 is not a success either
    assert pass_at_k_mean([[0.999, 0.999]], 2) == 0.0


def test_success_rate_is_the_mean_reward_over_all_trials():
    assert success_rate([r for task in TASKS for r in task]) == pytest.approx(5 / 9)  # 5 ones in 9 trials
    # over tasks: the mean of the tasks' means, equal to the above when every task has as many trials
    assert success_rate_over_tasks(TASKS) == pytest.approx(5 / 9)
    # with unequal counts each task weighs the same: (1/1 + 0/3) / 2, not 1/4
    assert success_rate_over_tasks([[1], [0, 0, 0], []]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="no tasks"):
        success_rate_over_tasks([[]])


def test_a_success_is_a_reward_within_a_millionth_of_one():
    # tau-bench's is_successful: (1 - 1e-6) <= reward
    assert is_success(1.0) and is_success(1 - 1e-6) and is_success(1 - 1e-7)
    assert not is_success(1 - 2e-6) and not is_success(0.999)
    assert pass_hat_k_mean([[1 - 1e-7, 1.0]], 2) == 1.0


def test_trial_errors():
    with pytest.raises(ValueError, match="no trials"):
        success_rate([])
    with pytest.raises(ValueError, match="no tasks"):
        pass_at_k_mean([], 1)
    with pytest.raises(ValueError, match="outside"):
        success_rate([1.5])
    with pytest.raises(ValueError, match="outside"):
        pass_hat_k_mean([[1, -0.5]], 1)
    # a task with fewer trials than k
    with pytest.raises(ValueError, match="k=3 with n=2"):
        pass_at_k_mean([[1, 1, 1], [1, 0]], 3)


# --- FHIR retrieval -------------------------------------------------------------------------------------------

def test_retrieval_precision_and_recall():
    # pred {1,2,3}, gold {2,3,4,5}: hits 2 -> P = 2/3, R = 2/4
    assert retrieval_score(["1", "2", "3"], ["2", "3", "4", "5"]) == RetrievalScore(2 / 3, 0.5, retrieved=True)


def test_duplicates_count_once_and_ids_compare_as_strings():
    # pred {'1','2'} (the duplicate '1' once; the int 1 is '1'), gold {'1'}: P = 1/2, R = 1/1
    assert retrieval_score([1, "1", "2"], ["1"]) == RetrievalScore(0.5, 1.0, retrieved=True)


def test_retrieval_edge_cases():
    assert retrieval_score([], []) == RetrievalScore(1.0, 1.0, retrieved=False)  # both empty
    assert retrieval_score(["x"], []) == RetrievalScore(0.0, None, retrieved=True)  # gold empty: recall excluded
    # nothing predicted: precision excluded
    assert retrieval_score([], ["x"]) == RetrievalScore(None, 0.0, retrieved=False)
    assert retrieval_score(["x"], ["y"]) == RetrievalScore(0.0, 0.0, retrieved=True)  # disjoint, both defined


def test_means_skip_excluded_questions():
    scores = [
        RetrievalScore(2 / 3, 0.5, retrieved=True),
        RetrievalScore(1.0, 1.0, retrieved=False),  # both empty
        RetrievalScore(0.0, None, retrieved=True),
        RetrievalScore(None, 0.0, retrieved=False),
    ]
    # precision over questions 1-3: (2/3 + 1 + 0) / 3 = 5/9; recall over 1, 2, 4: (1/2 + 1 + 0) / 3 = 1/2
    mean = mean_retrieval_score(scores)
    assert mean.precision == pytest.approx(5 / 9)
    assert mean.recall == pytest.approx(0.5)
    assert mean.retrieved


def test_means_with_nothing_to_average_are_none():
    assert mean_retrieval_score([]) == RetrievalScore(None, None, retrieved=False)
    assert mean_retrieval_score([RetrievalScore(None, 0.0, retrieved=False)]) == RetrievalScore(
        None, 0.0, retrieved=False)


def test_an_agent_that_never_retrieves_has_no_mean_precision():
    # abstain on three questions: both empty (P 1, R 1) twice, gold {x} once (P excluded, R 0). The per-question
    # rule alone would give mean P = 1; with nothing retrieved anywhere it is undefined. Recall: (1 + 1 + 0) / 3.
    abstain = [retrieval_score([], []), retrieval_score([], []), retrieval_score([], ["x"])]
    assert mean_retrieval_score(abstain) == RetrievalScore(None, pytest.approx(2 / 3), retrieved=False)
    # the same questions with one retrieval ({y} against gold {x}: P 0): mean P over the two both-empty 1s and it
    retrieving = [*abstain[:2], retrieval_score(["y"], ["x"])]
    assert mean_retrieval_score(retrieving).precision == pytest.approx((1 + 1 + 0) / 3)
