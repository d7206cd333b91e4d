"""Every build and evaluate parameter has a range, and a value outside it is one line naming the parameter, the value
and the range — the same formatter for the command line (options) and the flows (parameter names)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ehrbench.agents.config import LlmOptions
from ehrbench.cli.checks import option_name
from ehrbench.dq.recipes import ExtractSettings, Recipe
from ehrbench.parameter_errors import ParameterError, one_line, one_line_errors
from ehrbench.settings import (
    SEED_MAX,
    BuildParameters,
    EvaluationParameters,
    QuestionSettings,
    ReportParameters,
)


def _error(model, name_of=None, **values) -> str:
    with pytest.raises(ValidationError) as raised:
        model.model_validate(values)
    return one_line(raised.value, model, name_of) if name_of else one_line(raised.value, model)


@pytest.mark.parametrize(("values", "expected"), [
    ({"time_span": 1_000_000_000}, "time_span 1000000000: must be between 0 and 200 (years the shifted first visits "
                                   "spread over)"),
    ({"time_span": -1}, "time_span -1: must be between 0 and 200 (years the shifted first visits spread over)"),
    ({"seed": -1}, "seed -1: must be between 0 and 4294967295 (seed for every random choice of the build)"),
    ({"seed": 2**32}, "seed 4294967296: must be between 0 and 4294967295 (seed for every random choice of the build)"),
    ({"start_year": 9001}, "start_year 9001: must be between 1900 and 9000 (first year of the shifted range)"),
    ({"questions": {"per_template": 1001}},
     "questions.per_template 1001: must be between 1 and 1000 (questions per template and database)"),
    ({"questions": {"unanswerable_share": 1}}, "questions.unanswerable_share 1: must be at least 0 and less than 1 "
                                               "(share of each database's ehrsql questions that are unanswerable)"),
    ({"mimic_iv_edition": "fulll"}, "mimic_iv_edition 'fulll': must be 'demo' or 'full' (which MIMIC-IV release to "
                                    "download)"),
])
def test_a_build_parameter_out_of_range_is_one_line_with_name_value_and_range(values, expected):
    assert _error(BuildParameters, **values) == expected


def test_the_command_line_names_the_option_and_several_problems_share_the_line():
    message = _error(BuildParameters, option_name, time_span=1_000_000_000, seed=-1, questions={"per_template": 0})
    assert message == ("--seed -1: must be between 0 and 4294967295 (seed for every random choice of the build); "
                       "--time-span 1000000000: must be between 0 and 200 (years the shifted first visits spread "
                       "over); --questions-per-template 0: must be between 1 and 1000 (questions per template and "
                       "database)")
    assert "\n" not in message


def test_the_bounds_themselves_are_accepted():
    highest = BuildParameters(seed=SEED_MAX, start_year=9000, time_span=200,
                              questions=QuestionSettings(per_template=1000))
    assert (highest.seed, highest.start_year, highest.time_span) == (2**32 - 1, 9000, 200)
    lowest = BuildParameters(seed=0, start_year=1900, time_span=0)
    assert (lowest.seed, lowest.start_year, lowest.time_span) == (0, 1900, 0)
    evaluation = EvaluationParameters(suites=["ehrsql", "dq"], agents=["oracle"] * 50, trials=100, limit=1_000_000,
                                      seed=SEED_MAX, batch_size=10_000, concurrency_per_endpoint=64,
                                      transient_retries=10, retry_delay_s=3600, run_id="a" * 200,
                                      run_prefix="p" * 184)
    assert evaluation.trials == 100 and evaluation.concurrency_per_endpoint == 64
    assert ReportParameters(bootstrap_replicates=100_000, bootstrap_seed=SEED_MAX).bootstrap_replicates == 100_000


@pytest.mark.parametrize(("values", "expected"), [
    ({"trials": 0}, "trials 0: must be between 1 and 100 (trials per task)"),
    ({"trials": 101}, "trials 101: must be between 1 and 100 (trials per task)"),
    ({"limit": 0}, "limit 0: must be between 1 and 1000000 (tasks per suite)"),
    ({"concurrency_per_endpoint": 65},
     "concurrency_per_endpoint 65: must be between 1 and 64 (trials in flight per model endpoint)"),
    ({"batch_size": 0}, "batch_size 0: must be between 1 and 10000 (trials per results part)"),
    ({"transient_retries": 11},
     "transient_retries 11: must be between 0 and 10 (retries of a trial stopped by a transient failure)"),
    ({"retry_delay_s": 86400.0}, "retry_delay_s 86400.0: must be between 0 and 3600 (seconds between retries of a "
                                 "trial)"),
    ({"seed": -5}, "seed -5: must be between 0 and 4294967295 (seed of the task sample)"),
    ({"agents": ["oracle"] * 51}, "agents ['oracle', " + "'oracle', " * 49 + "'oracle']: must name between 1 and 50 "
                                  "(agents to evaluate)"),
    ({"suites": []}, "suites []: must name at least 1 (suites to evaluate)"),
    ({"suites": ["dq", "dq"]}, "suites ['dq', 'dq']: must name each suite once (suites to evaluate)"),
    ({"suites": ["sql"]}, "suites ['sql']: must be some of ehrsql, chatqa, fhir, dq, noteqa, meds_conversion, "
                          "event_modelling; unknown: 'sql' (suites to evaluate)"),
    ({"run_id": "../elsewhere"}, "run_id '../elsewhere': must be 1-200 letters, digits, '.', '_' or '-', not "
                                 "starting with '.' and without '..' (run id)"),
    ({"run_prefix": "nightly/"}, "run_prefix 'nightly/': must be 1-200 letters, digits, '.', '_' or '-', not "
                                 "starting with '.' and without '..' (prefix of the run id before its UTC time)"),
])
def test_an_evaluation_parameter_out_of_range_is_one_line(values, expected):
    assert _error(EvaluationParameters, **{"suites": ["ehrsql"], "agents": ["oracle"], **values}) == expected


@pytest.mark.parametrize(("model", "values", "expected"), [
    (ReportParameters, {"bootstrap_replicates": 10**7},
     "bootstrap_replicates 10000000: must be between 0 and 100000 (bootstrap replicates of the intervals)"),
    (LlmOptions, {"timeout_s": 0}, "timeout_s 0: must be more than 0 and at most 3600 (seconds per model call)"),
    (LlmOptions, {"sql_timeout_s": 601}, "sql_timeout_s 601: must be more than 0 and at most 600 (seconds per SQL "
                                         "query of the agent)"),
    (LlmOptions, {"max_tokens": 10**9}, "max_tokens 1000000000: must be between 1 and 1000000 (tokens per model "
                                        "reply)"),
    (LlmOptions, {"max_step": 3}, "max_step 3: unknown; expected one of " + ", ".join(LlmOptions.model_fields)),
    (ExtractSettings, {"patients": 10**6},
     "patients 1000000: must be between 1 and 10000 (patients of the audit extract)"),
    (Recipe, {"family": "impossible_values", "subtypes": ["range_extreme"], "count": 1, "seed": -1},
     "seed -1: must be between 0 and 4294967295 (seed of the recipe's draws)"),
])
def test_the_other_parameters_with_ranges_use_the_same_line(model, values, expected):
    assert _error(model, **values) == expected


def test_a_flow_turns_a_validation_error_into_a_one_line_parameter_error():
    with pytest.raises(ParameterError) as raised, one_line_errors(BuildParameters):
        BuildParameters.from_environment(time_span=1_000_000_000)
    assert str(raised.value) == ("time_span 1000000000: must be between 0 and 200 (years the shifted first visits "
                                 "spread over)")
    assert isinstance(raised.value, ValueError)  # what the CLI reports as one line when a flow fails


def test_the_build_flow_refuses_a_bad_parameter_before_it_touches_the_data_folder(tmp_path):
    from flows.build_benchmark import build_benchmark

    with pytest.raises(ParameterError, match=r"^time_span 1000000000: must be between 0 and 200 \("):
        build_benchmark.fn(time_span=1_000_000_000, data_dir=str(tmp_path / "data"))
    with pytest.raises(ParameterError, match=r"^questions\.per_template 0: must be between 1 and 1000 \("):
        build_benchmark.fn(questions={"per_template": 0}, data_dir=str(tmp_path / "data"))
    assert not (tmp_path / "data").exists()


def test_the_evaluate_flow_refuses_a_bad_parameter_before_it_reads_anything(tmp_path):
    from flows.evaluate import evaluate_agents

    with pytest.raises(ParameterError) as raised:
        evaluate_agents.fn(trials=0, concurrency_per_endpoint=10_000, data_dir=str(tmp_path / "data"))
    assert str(raised.value) == ("trials 0: must be between 1 and 100 (trials per task); concurrency_per_endpoint "
                                 "10000: must be between 1 and 64 (trials in flight per model endpoint)")
    assert not (tmp_path / "data").exists()


def test_the_paraphrase_model_still_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("EHRBENCH_PARAPHRASE_MODEL", "openai:gpt-4o-mini")
    assert BuildParameters.from_environment().questions.paraphrase_model == "openai:gpt-4o-mini"
    assert BuildParameters.from_environment(
        questions={"paraphrase_model": "gemini:m"}).questions.paraphrase_model == "gemini:m"
    given = QuestionSettings(per_template=3)
    settings = BuildParameters.from_environment(questions=given).questions
    assert (settings.per_template, settings.paraphrase_model) == (3, "openai:gpt-4o-mini")
