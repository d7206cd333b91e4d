"""The command line: listing builds and failing fast (the refusal tables in-process, the rest as a user runs it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ehrbench.errors import ConfigError, MissingInputError
from ehrbench.evaluation.results import ResultStore
from ehrbench.publish import publish, staging_dir

from .test_evaluation import _row
from .test_publish import _manifest

EHRBENCH = str(Path(sys.executable).with_name("ehrbench"))


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "EHRBENCH_"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_PROFILES_PATH=str(tmp_path / "profiles.toml"),
               DO_NOT_TRACK="1", **extra)
    return env


def test_builds_lists_published_builds_oldest_first_and_marks_latest(tmp_path):
    benchmarks = tmp_path / "data" / "benchmarks"
    for n, build_id in enumerate(["20261120T100000Z", "20261121T100000Z"]):
        manifest = _manifest(build_id, seed=n + 3)
        manifest.created_at = datetime(2026, 11, 20, tzinfo=UTC) + timedelta(days=n)
        staging_dir(benchmarks, build_id)
        publish(benchmarks, manifest)
    staging_dir(benchmarks, "20261122T100000Z")  # an unfinished build is not listed

    result = subprocess.run([EHRBENCH, "builds", "--data-dir", str(tmp_path / "data")], env=_env(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if "2026112" in line]
    assert len(rows) == 2
    assert "20261120T100000Z" in rows[0] and "* 20261121T100000Z" in rows[1]
    assert "20261122T100000Z" not in result.stdout
    assert "mimic_iv demo 2.2" in rows[0]


def test_builds_on_an_empty_data_dir_says_so(tmp_path):
    result = subprocess.run([EHRBENCH, "builds", "--data-dir", str(tmp_path)], env=_env(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    assert "no published builds" in result.stderr


@pytest.mark.slow
def test_build_with_an_unreachable_prefect_api_is_a_one_line_error(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api"
    result = subprocess.run([EHRBENCH, "build", "--data-dir", str(tmp_path / "data")],
                            env=_env(tmp_path, PREFECT_API_URL=url), capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("ehrbench: error:")]
    assert len(errors) == 1 and url in errors[0] and "make server" in errors[0]
    assert not (tmp_path / "data" / "benchmarks").exists()


@pytest.mark.slow
def test_build_with_a_broken_recipe_file_fails_before_any_stage(tmp_path):
    recipes = tmp_path / "recipes.yaml"
    recipes.write_text("tasks:\n  - id: mine\n    recipes:\n      - {family: impossible_values, subtypes: [typo], "
                       "count: 1}\n")
    for path, expected in ((recipes, "no sub-type 'typo'"), (tmp_path / "absent.yaml", "no recipe file")):
        result = subprocess.run([EHRBENCH, "build", "--data-dir", str(tmp_path / "data"), "--dq-recipes", str(path)],
                                env=_env(tmp_path), capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, result.stderr
        errors = [line for line in result.stderr.splitlines() if line.startswith("ehrbench: error:")]
        assert len(errors) == 1 and str(path) in errors[0] and expected in errors[0], result.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.slow  # subprocesses of the installed command
def test_report_without_runs_or_with_an_unknown_run_is_a_one_line_error(tmp_path):
    data_dir = tmp_path / "data"
    result = subprocess.run([EHRBENCH, "report", "--data-dir", str(data_dir)], env=_env(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().startswith("ehrbench: error:") and "no evaluation runs" in result.stderr
    (data_dir / "results" / "run_id=other").mkdir(parents=True)
    result = subprocess.run([EHRBENCH, "report", "--run-id", "nope", "--out", str(tmp_path / "site"), "--data-dir",
                             str(data_dir)], env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "run_id=nope: no results" in result.stderr
    assert not (tmp_path / "site").exists()


@pytest.fixture
def refusal(tmp_path, monkeypatch):
    """Run a command that must be refused before Prefect starts; its one error line.

    In-process (typer's runner: ~10 ms, where a subprocess costs ~0.5 s of imports), with Prefect's start replaced by
    a failure, so a check that let bad input through fails the test. The installed entry point, exit codes and the
    imports before the checks are covered by the subprocess tests of this file."""
    import ehrbench.cli as cli

    def prefect_started(*_args, **_kwargs):
        raise AssertionError("the input was not refused: Prefect was started")

    monkeypatch.setattr(cli, "use_prefect", prefect_started)

    def run(*args: str, **env: str) -> str:
        environment = {k: None for k in os.environ if k.startswith(("PREFECT_", "EHRBENCH_"))}
        environment.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_PROFILES_PATH=str(tmp_path / "p.toml"),
                           **env)
        result = CliRunner().invoke(cli.app, list(args), env=environment)
        assert result.exit_code == 2, f"{result.stderr}{result.exception!r}"
        errors = [line for line in result.stderr.splitlines() if line.startswith("ehrbench: error:")]
        assert len(errors) == 1, result.stderr
        assert not list(tmp_path.rglob("prefect.db*")), "a temporary Prefect server was started"
        return errors[0].removeprefix("ehrbench: error: ")

    return run


def test_the_installed_command_refuses_bad_input_in_one_line_with_exit_code_2(tmp_path):
    """The entry point as a user runs it: one error line, exit code 2, quickly (no Prefect server)."""
    started = time.perf_counter()
    result = subprocess.run([EHRBENCH, "evaluate", "--data-dir", str(tmp_path / "data"), "--trials", "0"],
                            env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "ehrbench: error: --trials 0: must be between 1 and 100 (trials per task)"
    assert time.perf_counter() - started < 15, "Prefect started?"
    assert not list(tmp_path.rglob("prefect.db*")), "a temporary Prefect server was started"


@pytest.mark.parametrize(("args", "expected"), [
    (["--current-time", "2100-13-01"], "--current-time: expected 'YYYY-MM-DD HH:MM:SS', got '2100-13-01'"),
    (["--current-time", "2100-13-01 00:00:00"],
     "--current-time: expected 'YYYY-MM-DD HH:MM:SS', got '2100-13-01 00:00:00'"),
    (["--mimic-iv-edition", "fulll"],
     "--mimic-iv-edition 'fulll': must be 'demo' or 'full' (which MIMIC-IV release to download)"),
    (["--eicu-edition", "Demo"], "--eicu-edition 'Demo': must be 'demo' or 'full' (which eICU release to download)"),
    (["--eicu-preset", "ehrsql2024"],
     "--eicu-preset 'ehrsql2024': must be 'ehrchatqa' or 'ehrsql2022' (eICU settings)"),
    (["--seed", "-1"], "--seed -1: must be between 0 and 4294967295 (seed for every random choice of the build)"),
    (["--start-year", "1800"], "--start-year 1800: must be between 1900 and 9000 (first year of the shifted range)"),
    (["--time-span", "201"],
     "--time-span 201: must be between 0 and 200 (years the shifted first visits spread over)"),
    (["--questions-per-template", "0"],
     "--questions-per-template 0: must be between 1 and 1000 (questions per template and database)"),
    (["--start-year", "2101"], "--start-year 2101: must not lie after 2100-12-31 23:59:00, 'now' of the ehrsql2024 "
                               "database by default; give a later --current-time"),
    (["--current-time", "2050-01-01 00:00:00"], "--current-time '2050-01-01 00:00:00': must not lie before the first "
                                                "shifted year 2100 (--start-year, default 2100)"),
    (["--mimic-iv-dir", "{tmp}/absent"], "--mimic-iv-dir: {tmp}/absent does not exist; expected a release directory"),
    (["--eicu-dir", "{tmp}/a-file"], "--eicu-dir: {tmp}/a-file is not a directory; expected a release directory"),
    (["--ehrsql2024-dir", "{tmp}/absent"],
     "--ehrsql2024-dir: {tmp}/absent does not exist; expected a release directory"),
    (["--paraphrase-model", "gpt-4o"], "--paraphrase-model: model spec 'gpt-4o' is not of the form openai:<model>, "
                                       "openai:<model>@<base_url> or gemini:<model>"),
    (["--notes", "bogus"],
     "--notes 'bogus': must be 'synthetic' or 'mimic_iv_note' (notes the noteqa suite asks over)"),
    (["--mimic-iv-note-dir", "{tmp}"],
     "notes from MIMIC-IV-Note need a note-question model to write their questions (questions.note_question_model, "
     "--note-question-model or EHRBENCH_NOTE_QUESTION_MODEL); template questions exist only for synthetic notes"),
    (["--mimic-iv-note-dir", "{tmp}/absent", "--note-question-model", "openai:m"],
     "--mimic-iv-note-dir: {tmp}/absent does not exist; expected a release directory"),
])
def test_build_refuses_bad_parameters_before_prefect_starts(tmp_path, refusal, args, expected):
    (tmp_path / "a-file").write_text("")
    args = [arg.format(tmp=tmp_path) for arg in args]
    assert refusal("build", "--data-dir", str(tmp_path / "data"), *args) == expected.format(tmp=tmp_path)
    assert not (tmp_path / "data").exists()


def test_build_names_the_environment_variable_a_bad_source_directory_came_from(tmp_path, refusal):
    message = refusal("build", "--data-dir", str(tmp_path / "data"),
                       EHRBENCH_EICU_DIR=str(tmp_path / "gone"))
    assert message == f"$EHRBENCH_EICU_DIR: {tmp_path}/gone does not exist; expected a release directory"


def _bad_run_id(option: str, value: str) -> str:
    return (f"{option}: expected 1-200 letters, digits, '.', '_' or '-', not starting with '.' and without '..', "
            f"got {value!r}")


GEMINI_WITH_URL = ("model spec 'gemini:m@http://h': a Gemini model takes no base URL (expected openai:<model>, "
                   "openai:<model>@<base_url> or gemini:<model>)")


@pytest.mark.parametrize(("args", "expected"), [
    (["--agent", "llm:gemini:m@http://h"],  # `:gemini:` stays text (Rich would print an emoji)
     f"--agent: agent 'llm:gemini:m@http://h': {GEMINI_WITH_URL}"),
    (["--agent", "orcale"], "--agent: unknown agent 'orcale'; expected oracle, abstain, llm:<model>@<base_url>, "
                            "llm:openai:<model>[@<base_url>] or llm:gemini:<model>"),
    (["--agent", "oracle", "--agent", "oracle"],
     "--agent: agent name(s) oracle given more than once; names must be unique in a run"),
    (["--agent", "llm:gemini:m", "--agent-option", "max_actions=0"],
     "--agent: agent 'llm:gemini:m': max_actions '0': must be between 1 and 200 (tool calls per trial)"),
    (["--trials", "0"], "--trials 0: must be between 1 and 100 (trials per task)"),
    (["--limit", "0"], "--limit 0: must be between 1 and 1000000 (tasks per suite)"),
    (["--concurrency", "1000"], "--concurrency 1000: must be between 1 and 64 (trials in flight per model endpoint)"),
    (["--seed", "4294967296"], "--seed 4294967296: must be between 0 and 4294967295 (seed of the task sample)"),
    (["--suite", "dq", "--suite", "dq"], "--suite ['dq', 'dq']: must name each suite once (suites to evaluate)"),
    (["--agent-option", "max_actions"], "--agent-option: agent option 'max_actions': expected key=value (keys: "
     "ehrsql_mode, fhir_variant, fhir_base_url, max_actions, temperature, max_tokens, context_tokens, timeout_s, "
     "max_retries, "
     "sql_timeout_s, user_model, validator_model, user_reruns, max_user_turns, embedding_model, "
     "value_search_synonyms, web_search, dq_interface, shell_timeout_s, workspace_budget_s, api_key_env, "
     "api_key_secret)"),
    (["--judge-model", "gemini:m@http://h"], f"--judge-model: {GEMINI_WITH_URL}"),
    (["--suite", "ehrsql", "--suite", "sql"],
     "--suite: unknown suite 'sql'; expected some of ehrsql, chatqa, fhir, dq, noteqa, meds_conversion, "
     "event_modelling"),
    (["--run-id", ""], _bad_run_id("--run-id", "")),
    (["--run-id", "../x"], _bad_run_id("--run-id", "../x")),
    (["--run-id", "a/b"], _bad_run_id("--run-id", "a/b")),
    (["--run-id", "a..b"], _bad_run_id("--run-id", "a..b")),
    (["--run-id", "my run"], _bad_run_id("--run-id", "my run")),
    (["--run-id", "run:1"], _bad_run_id("--run-id", "run:1")),
    (["--build", "20260101T000000Z"], "--build: no build folder at {data}/benchmarks/20260101T000000Z; expected "
     "'latest', a build id or a build folder (list builds with 'ehrbench builds')"),
    (["--build", "{tmp}"], "--build: a folder without manifest.json at {tmp}; expected 'latest', a build id or a "
                           "build folder (list builds with 'ehrbench builds')"),
    ([], "--build: no published build in {data}/benchmarks; run 'ehrbench build' first"),
])
def test_evaluate_refuses_bad_input_before_prefect_starts(tmp_path, refusal, args, expected):
    data = tmp_path / "data"
    args = [arg.format(tmp=tmp_path) for arg in args]
    message = refusal("evaluate", "--data-dir", str(data), *args)
    assert message == expected.format(tmp=tmp_path, data=data)


def test_evaluate_accepts_an_existing_run_id_to_resume(tmp_path, refusal):
    data = tmp_path / "data"
    (data / "results" / "run_id=nightly-20261120T020000Z").mkdir(parents=True)
    message = refusal("evaluate", "--data-dir", str(data), "--run-id", "nightly-20261120T020000Z")
    assert message.startswith("--build: no published build")  # the run id passed; the missing build did not


@pytest.mark.parametrize(("args", "expected"), [
    (["report", "--run-id", "../other"], _bad_run_id("--run-id", "../other")),
    (["report", "--run-id", "r1", "--trend-prefix", "a/"], _bad_run_id("--trend-prefix", "a/")),
    (["report", "--run-id", "r1", "--out", "{tmp}/a-file"],
     "--out: {tmp}/a-file is a file; expected a folder (it is replaced whole)"),
    (["report", "--run-id", "r1", "--bootstrap", "-1"],
     "--bootstrap -1: must be between 0 and 100000 (bootstrap replicates of the intervals)"),
    (["metrics", "--run-id", ".hidden"], _bad_run_id("--run-id", ".hidden")),
    (["evaluate", "--data-dir", "{tmp}/a-file"], "--data-dir: {tmp}/a-file is a file; expected a directory"),
])
def test_report_metrics_and_data_dir_refuse_bad_input_before_prefect_starts(tmp_path, refusal, args, expected):
    (tmp_path / "a-file").write_text("")
    ResultStore(tmp_path / "data" / "results", "r1").write([_row("oracle", "q1", 0, 1.0)])
    command, *options = (arg.format(tmp=tmp_path) for arg in args)
    message = refusal(command, "--data-dir", str(tmp_path / "data"), *options)
    assert message == expected.format(tmp=tmp_path)


def test_input_checks_do_not_import_prefect(tmp_path):
    """Prefect reads its settings (PREFECT_HOME, the server start-up timeout) when imported: only after the checks."""
    checks = "ehrbench.cli, ehrbench.agents.config, ehrbench.evaluation.tasks, ehrbench.llm.chat, ehrbench.dq.recipes"
    result = subprocess.run([sys.executable, "-c", f"import sys, {checks}; print(sorted(m for m in sys.modules "
                             "if m.split('.')[0] in ('prefect', 'flows')))"],
                            env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr


@pytest.mark.slow  # subprocesses of the installed command
def test_help_and_tables_print_gemini_specs_as_text_not_emoji(tmp_path):
    result = subprocess.run([EHRBENCH, "evaluate", "--help"], env=_env(tmp_path), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and "llm:gemini:<model>" in result.stdout, result.stdout
    assert "\u264a" not in result.stdout  # ♊
    ResultStore(tmp_path / "data" / "results", "r1").write([_row("llm:gemini:m", "q1", 0, 1.0)])
    result = subprocess.run([EHRBENCH, "metrics", "--run-id", "r1", "--data-dir", str(tmp_path / "data")],
                            env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "llm:gemini:m" in result.stdout, result.stdout + result.stderr


@pytest.mark.slow  # starts (and waits out) a temporary Prefect server
def test_a_temporary_prefect_server_that_does_not_start_is_a_one_line_error(tmp_path):
    # a start-up allowance of 0 s times out at once, exactly as a busy machine's 120 s do
    result = subprocess.run([EHRBENCH, "build", "--data-dir", str(tmp_path / "data")],
                            env=_env(tmp_path, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="0"),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("ehrbench: error:")]
    assert errors == ["ehrbench: error: the temporary Prefect server did not start within 0 s (machine busy?); "
                      "start a server with 'make server', or retry"], result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data" / "benchmarks").exists()


@pytest.mark.parametrize(("raised", "user_error"), [
    (ConfigError("--run-id r1: a part of another build"), True),
    (MissingInputError("data/results/run_id=r1: no results"), True),
    (ValueError("unpacking went wrong"), False),  # a bug: shown with its traceback, not as a one-line user error
    (FileNotFoundError("/tmp/gone"), False),
])
def test_user_errors_are_one_line_and_bugs_keep_their_traceback(tmp_path, monkeypatch, raised, user_error):
    import ehrbench.cli as cli
    import ehrbench.evaluation.report as report

    def metric_table(_folder):
        raise raised

    monkeypatch.setattr(report, "metric_table", metric_table)
    result = CliRunner().invoke(cli.app, ["metrics", "--run-id", "r1", "--data-dir", str(tmp_path)])
    if user_error:
        assert (result.exit_code, result.stderr) == (1, f"ehrbench: error: {raised}\n")
    else:
        assert result.exception is raised and "ehrbench: error:" not in result.stderr


@pytest.mark.parametrize(("args", "expected"), [
    (["tasks", "export", "{tmp}/out", "--format", "terminal-bench"], "--format: expected harbor, got 'terminal-bench'"),
    (["tasks", "export", "{tmp}/out", "--format", "harbor", "--family", "sql"],
     "--family: unknown sql; expected some of dq, meds_conversion, event_modelling"),
    (["tasks", "export", "{tmp}/out", "--format", "harbor"], "--build: no published build in {tmp}/data/benchmarks"),
    (["tasks", "score-harbor", "{tmp}/job", "--run-id", "../x"], _bad_run_id("--run-id", "../x")),
    (["tasks", "score-harbor", "{tmp}/job"],
     "{tmp}/job: no <trial>/result.json; expected a Harbor job folder (jobs/<job name>/)"),
])
def test_the_harbor_commands_refuse_bad_input_in_one_line(tmp_path, refusal, args, expected):
    (tmp_path / "job").mkdir()
    command, *options = (arg.format(tmp=tmp_path) for arg in args)
    message = refusal(command, *options, "--data-dir", str(tmp_path / "data"))
    assert message.startswith(expected.format(tmp=tmp_path)), message
