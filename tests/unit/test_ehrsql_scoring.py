"""EHRSQL-2024 scoring on hand-computed cases: the published scorer's SQL preprocessing and the answer
strings of answer.json (docs/benchmarks.md#ehrsql-2024-answer-comparison-and-reliability-score), plus the seeded draws
of the build (docs/benchmarks.md#ehrsql-2024-seeded-draws (draws (a)-(d)))."""

from __future__ import annotations

import numpy as np
import pytest

from ehrbench.ehrsql import answers_match, format_answer, format_cell, prepare_gold_sql
from ehrbench.ehrsql.sampling import (
    draw_costs,
    draw_first_years,
    draw_mean_costs,
    new_rng,
    restore_rng,
    rng_state,
    sample_cohort,
)

NOW = "'2100-12-31 23:59:00'"


def test_whitespace_is_collapsed_and_split_operators_joined():
    sql = "SELECT  a\nFROM   t\n WHERE b > = 1 AND c < = 2 AND d ! = 3 "
    assert prepare_gold_sql(sql) == "SELECT a FROM t WHERE b >= 1 AND c <= 2 AND d != 3"


def test_current_time_and_now_become_the_quoted_current_time():
    sql = "SELECT datetime(current_time,'start of year','-1 year'), datetime('now')"
    assert prepare_gold_sql(sql) == f"SELECT datetime({NOW},'start of year','-1 year'), datetime({NOW})"


def test_another_current_time():
    assert prepare_gold_sql("SELECT current_time", current_time="2105-12-31 23:59:00") == \
        "SELECT '2105-12-31 23:59:00'"


@pytest.mark.parametrize("vital, low, high", [
    ("temperature", "35.5", "38.1"), ("sao2", "95.0", "100.0"), ("heart_rate", "60.0", "100.0"),
    ("respiration", "12.0", "18.0"), ("systolic_bp", "90.0", "120.0"), ("diastolic_bp", "60.0", "90.0"),
    ("mean_bp", "60.0", "110.0"),
])
def test_vital_placeholders_become_the_normal_range(vital, low, high):
    sql = f"SELECT 1 WHERE v BETWEEN {vital}_lower AND {vital}_upper"
    assert prepare_gold_sql(sql) == f"SELECT 1 WHERE v BETWEEN {low} AND {high}"


def test_unknown_or_mixed_vitals_are_left_alone():
    assert prepare_gold_sql("SELECT 1 WHERE v < weight_lower OR v > weight_upper") == \
        "SELECT 1 WHERE v < weight_lower OR v > weight_upper"
    assert prepare_gold_sql("SELECT 1 WHERE v < sao2_lower OR v > mean_bp_upper") == \
        "SELECT 1 WHERE v < sao2_lower OR v > mean_bp_upper"


def test_strftime_formats_are_mapped():
    assert prepare_gold_sql("SELECT strftime('%y',t), strftime('%j',t)") == \
        "SELECT strftime('%Y',t), strftime('%J',t)"


def test_cells_floats_rounded_to_three_decimals_others_as_str():
    assert format_cell(7.4249) == "7.425"
    assert format_cell(1095.2099999) == "1095.21"
    assert format_cell(100.0) == "100.0"
    assert format_cell(3) == "3"
    assert format_cell("iv") == "iv"
    assert format_cell(None) == "None"


def test_answer_string_has_the_answer_json_form():
    assert format_answer([("iv drip",), ("iv",)]) == "[['iv'], ['iv drip']]"
    assert format_answer([(7.4199999,)]) == "[['7.42']]"
    assert format_answer([]) == "[]"
    assert format_answer([(10, "a"), (2, "b")]) == "[['10', 'a'], ['2', 'b']]"  # sorted as strings


def test_only_the_first_hundred_sorted_rows_count():
    rows = [(i,) for i in range(150)]
    answer = format_answer(rows)
    assert answer.count("[") == 101
    assert answers_match(rows, [(i,) for i in range(149, -1, -1)])
    assert answers_match(rows, [(str(i),) for i in sorted(range(150), key=str)[:100]])


def test_answers_match_rows_or_strings():
    assert answers_match([(7.42,)], "[['7.42']]")
    assert answers_match("[['7.42']]", [(7.4201,)])
    assert not answers_match([(7.42,)], "[['7.43']]")
    assert answers_match([(1,)], [(1.0,)])  # the scorer rounds every numeric cell: both '1.0'
    assert answers_match([(94.0,)], "[['94']]")  # a gold answer string's '94' is read back as the scorer reads 94


def test_first_years_one_draw_each_even_with_no_span():
    rng = new_rng(0)
    assert draw_first_years(rng, 3, 2100, 0) == [2100, 2100, 2100]
    reference = np.random.default_rng(0)
    for _ in range(3):
        reference.choice(range(2100, 2101), p=np.array([1.0]))
    assert rng_state(rng) == rng_state(reference)


def test_first_years_within_the_span():
    years = draw_first_years(new_rng(1), 50, 2100, 5)
    assert set(years) <= set(range(2100, 2106)) and len(set(years)) > 1


def test_cohort_takes_a_too_small_current_pool_whole_without_drawing():
    admissions = [(1, False), (2, True), (1, True), (3, False), (4, False), (5, False)]
    rng = new_rng(0)
    current, discharged = sample_cohort(rng, admissions, num_patients=10, current_ratio=0.5)
    assert current == [2, 1]
    assert discharged == [3, 4, 5]  # pool of 3 < 5 wanted: all of it, in order of appearance
    assert rng_state(rng) == rng_state(new_rng(0))  # nothing consumed


def test_cohort_draw_is_numpys_choice_without_replacement():
    admissions = [(s, False) for s in range(10, 30)]
    current, discharged = sample_cohort(new_rng(0), admissions, num_patients=5, current_ratio=0.0)
    assert current == []
    assert discharged == np.random.default_rng(0).choice(np.arange(10, 30), 5, replace=False).tolist()


def test_costs_continue_the_generator_in_sorted_key_order():
    rng = new_rng(0)
    means = draw_mean_costs(rng)
    costs = draw_costs(rng, ["b", "a", "b"], means[0])
    reference = np.random.default_rng(0)
    ref_means = reference.poisson(lam=10, size=4)
    expected = {"a": round(reference.normal(loc=ref_means[0], scale=1.0), 2),
                "b": round(reference.normal(loc=ref_means[0], scale=1.0), 2)}
    assert means == ref_means.tolist()
    assert costs == expected


def test_state_round_trips_through_json():
    rng = new_rng(0)
    rng.normal()
    copy = restore_rng(rng_state(rng))
    assert copy.normal() == rng.normal()
