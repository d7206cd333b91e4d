"""Replays of issue 17's bad build and evaluate parameters through the real `ehrbench` entry point:
`ehrbench build --time-span 1000000000` was accepted and drove the machine out of memory (20 GB), leaving an orphaned
temporary Prefect server; `--seed -1` printed "1 validation error for BuildParameters" without naming the option.
Each must now exit 2 at once with one line naming the option, the value and the allowed range — before Prefect is
imported, so no server (temporary or not) is started and nothing is written.

The subprocesses run with their address space capped: were the check ever lost again, the replay fails on a
MemoryError instead of taking the shared machine down.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.security

EHRBENCH = str(Path(sys.executable).with_name("ehrbench"))
MEMORY_CAP = 4 * 2**30  # bytes of address space; the refusal needs a small fraction of it
PROMPT_S = 15.0  # the refusal imports no Prefect and starts nothing; a temporary server alone takes longer


def _capped_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "EHRBENCH_"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_PROFILES_PATH=str(tmp_path / "profiles.toml"),
               DO_NOT_TRACK="1")
    started = time.perf_counter()
    result = subprocess.run([EHRBENCH, *args, "--data-dir", str(tmp_path / "data")], env=env, capture_output=True,
                            text=True, timeout=120, preexec_fn=_capped_memory)
    return result, time.perf_counter() - started


def _assert_refused_before_anything_started(tmp_path: Path, result: subprocess.CompletedProcess, elapsed: float,
                                            expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"ehrbench: error: {expected}", result.stderr  # the whole output: one line
    assert elapsed < PROMPT_S, f"took {elapsed:.1f} s: did Prefect start?"
    assert "validation error" not in result.stderr
    assert not (tmp_path / "data").exists(), "the build touched the data folder"
    assert not (tmp_path / "prefect-home").exists() or not any((tmp_path / "prefect-home").iterdir()), \
        "Prefect wrote its home: a temporary server was started"


@pytest.mark.parametrize(("args", "expected"), [
    (["--time-span", "1000000000"],
     "--time-span 1000000000: must be between 0 and 200 (years the shifted first visits spread over)"),
    (["--seed", "-1"], "--seed -1: must be between 0 and 4294967295 (seed for every random choice of the build)"),
    (["--seed", "99999999999999999999"],
     "--seed 99999999999999999999: must be between 0 and 4294967295 (seed for every random choice of the build)"),
    (["--start-year", "100000"], "--start-year 100000: must be between 1900 and 9000 (first year of the shifted "
                                 "range)"),
    (["--questions-per-template", "100000000"], "--questions-per-template 100000000: must be between 1 and 1000 "
                                                "(questions per template and database)"),
])
def test_a_build_parameter_out_of_range_is_refused_in_one_line_before_prefect_starts(tmp_path, args, expected):
    result, elapsed = _run(tmp_path, "build", *args)
    _assert_refused_before_anything_started(tmp_path, result, elapsed, expected)


@pytest.mark.parametrize(("args", "expected"), [
    (["--trials", "1000000000"], "--trials 1000000000: must be between 1 and 100 (trials per task)"),
    (["--concurrency", "100000"],
     "--concurrency 100000: must be between 1 and 64 (trials in flight per model endpoint)"),
    (["--limit", "-3"], "--limit -3: must be between 1 and 1000000 (tasks per suite)"),
    (["--seed", "-1"], "--seed -1: must be between 0 and 4294967295 (seed of the task sample)"),
])
def test_an_evaluate_parameter_out_of_range_is_refused_in_one_line_before_prefect_starts(tmp_path, args, expected):
    result, elapsed = _run(tmp_path, "evaluate", *args)
    _assert_refused_before_anything_started(tmp_path, result, elapsed, expected)


@pytest.mark.integration  # a Prefect server
def test_the_build_flow_run_through_prefect_fails_in_one_line_before_any_stage(tmp_path):
    """The same value given to the flow itself (a deployment's parameters, a Python caller): the flow run fails on its
    first line with the parameter named, before it takes the build lock or writes anything."""
    from prefect.testing.utilities import prefect_test_harness

    from ehrbench.parameter_errors import ParameterError

    with prefect_test_harness(server_startup_timeout=180):
        from flows.build_benchmark import build_benchmark

        with pytest.raises(ParameterError) as raised:
            build_benchmark(time_span=1_000_000_000, seed=-1, data_dir=str(tmp_path / "data"))
    assert str(raised.value) == ("seed -1: must be between 0 and 4294967295 (seed for every random choice of the "
                                 "build); time_span 1000000000: must be between 0 and 200 (years the shifted first "
                                 "visits spread over)")
    assert not (tmp_path / "data").exists()
