"""Replays of issue 17's faults in a run's results folder: a truncated, random-bytes, 0-byte, wrong-schema or
wrong-type part, a FIFO, a directory or a symlink named like a part (or like a pending row). Readers (metrics,
report, comparison) must stop with one line naming the file and what was expected, and never hang on a FIFO; a
resume must set the file aside in quarantine/ and run its trials again."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ehrbench.errors import ResultPartError
from ehrbench.evaluation.report import metric_table
from ehrbench.evaluation.results import TRIAL_SCHEMA, ResultStore, readable_parts
from ehrbench.reports.assemble import report_data
from ehrbench.reports.compare import compare_runs
from ehrbench.reports.model import Bootstrap

pytestmark = pytest.mark.security

NO_CI = Bootstrap(replicates=0, seed=0, level=0.95)
RETURN_WITHIN_S = 10.0  # a reader that opened a FIFO would wait for a writer forever
EHRBENCH = str(Path(sys.executable).with_name("ehrbench"))
BAD_PART = "part-00001-0badf00d.parquet"


def _row(task: str, reward: float = 1.0, status: str = "completed") -> dict:
    return {"build_id": "b1", "suite": "ehrsql", "db": "mimic_iv", "task_id": task, "trial": 0, "agent": "a",
            "status": status, "reward": reward, "correct": reward == 1.0, "is_answerable": True, "abstained": False}


def _valid_part(path: Path, task: str = "q2") -> None:
    pq.write_table(pa.Table.from_pylist([_row(task)], schema=TRIAL_SCHEMA), path)


def _truncated(path: Path) -> None:
    _valid_part(path)
    with open(path, "r+b") as file:
        file.truncate(path.stat().st_size // 2)  # a copy or a write cut short: no footer


def _random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(17).randbytes(4096))


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _foreign_schema(path: Path) -> None:
    pq.write_table(pa.table({"x": [1, 2], "y": ["a", "b"]}), path)


def _wrong_type(path: Path) -> None:
    table = pa.Table.from_pylist([_row("q2")], schema=TRIAL_SCHEMA)
    pq.write_table(table.set_column(table.schema.get_field_index("trial"), "trial", pa.array(["zero"])), path)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()
    _valid_part(path / "inside.parquet")


def _symlink_elsewhere(path: Path) -> None:
    elsewhere = path.parent.parent / "elsewhere"  # beside the run folder (or, for a pending row, in it)
    elsewhere.mkdir(exist_ok=True)
    _valid_part(elsewhere / "someone-elses.parquet")
    path.symlink_to(elsewhere / "someone-elses.parquet")


# fault -> what the one-line error says the file is
FAULTS: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated": (_truncated, "not a parquet file (truncated or foreign)"),
    "random bytes": (_random_bytes, "not a parquet file (truncated or foreign)"),
    "0 bytes": (_empty, "an empty file (0 bytes), not a parquet part"),
    "foreign schema": (_foreign_schema, "not a trial part: no column agent, suite, task_id, trial, status"),
    "wrong type": (_wrong_type, "column trial holds string; expected integer (int32)"),
    "FIFO": (_fifo, "a FIFO, not a regular file; expected a parquet part written by ehrbench"),
    "directory": (_directory, "a directory, not a regular file; expected a parquet part written by ehrbench"),
    "symlink": (_symlink_elsewhere, "a symbolic link, not a regular file; expected a parquet part written by ehrbench"),
}


@pytest.fixture(autouse=True)
def release_fifos(tmp_path):
    """A reader that did block on a FIFO gets end-of-file at the end of the test, so no thread is left waiting."""
    yield
    for path in tmp_path.rglob("*"):
        if stat.S_ISFIFO(path.lstat().st_mode):
            with contextlib.suppress(OSError):  # ENXIO: nobody is reading it, as it should be
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def _run_with_bad_part(results: Path, fault: str, run_id: str = "n-20261121T020000Z") -> tuple[ResultStore, Path]:
    store = ResultStore(results, run_id)
    store.write([_row("q1")])  # part-00000: a good one
    bad = store.folder / BAD_PART
    FAULTS[fault][0](bad)
    return store, bad


def _outcome_within(seconds: float, call: Callable[[], object]) -> dict:
    """Run `call` in a daemon thread; its value or exception, once it returned within `seconds`."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still reading after {seconds} s: blocked on a FIFO?"
    return outcome


def _assert_names_the_part(call: Callable[[], object], bad: Path, expected: str) -> None:
    error = _outcome_within(RETURN_WITHIN_S, call).get("error")
    assert isinstance(error, ResultPartError), f"expected a ResultPartError, got {error!r}"
    message = str(error)
    assert message.startswith(f"{bad}: {expected}") and message.endswith("; move it aside or delete it"), message
    assert "\n" not in message and error.path == bad


@pytest.mark.parametrize("fault", FAULTS)
def test_metrics_report_and_comparison_name_the_bad_part_and_return(tmp_path, fault):
    store, bad = _run_with_bad_part(tmp_path, fault)
    expected = FAULTS[fault][1]
    good = ResultStore(tmp_path, "n-20261120T020000Z")
    good.write([_row("q1")])
    _assert_names_the_part(lambda: metric_table(store.folder), bad, expected)
    _assert_names_the_part(lambda: readable_parts(store.folder), bad, expected)  # the CLI's check before Prefect
    _assert_names_the_part(lambda: report_data(tmp_path, store.run_id, tmp_path / "no-build", bootstrap=NO_CI),
                           bad, expected)
    _assert_names_the_part(lambda: compare_runs(store.folder, good.folder, NO_CI), bad, expected)
    _assert_names_the_part(lambda: compare_runs(good.folder, store.folder, NO_CI), bad, expected)
    if fault == "symlink":  # the file it points to is not touched
        assert (tmp_path / "elsewhere" / "someone-elses.parquet").is_file()


@pytest.mark.parametrize("fault", FAULTS)
def test_a_resume_sets_the_bad_part_aside_and_runs_its_trials_again(tmp_path, fault, caplog):
    store, bad = _run_with_bad_part(tmp_path, fault)
    kind = stat.S_IFMT(bad.lstat().st_mode)
    with caplog.at_level(logging.WARNING, logger="ehrbench.evaluation.results"):
        completed = _outcome_within(RETURN_WITHIN_S, store.completed)["value"]
    # only the good part's trial completed: whatever the bad file held (q2 in some) runs again
    assert completed == {("a", "ehrsql", "q1", 0)}
    aside = store.quarantine / BAD_PART
    assert not os.path.lexists(bad) and stat.S_IFMT(aside.lstat().st_mode) == kind  # moved as it was, not opened
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"{bad}: {FAULTS[fault][1]}") and warning.endswith(f"; moved to {aside}, its trials "
                                                                                 "run again"), warning
    assert store.builds() == {"b1"} and [p.name[:11] for p in store.parts()] == ["part-00000-"]
    # the re-run's part, then every reader works again and counts both trials
    store.write([_row("q2", reward=0.0)])
    (row,) = metric_table(store.folder)
    assert (row["tasks"], row["trials"], row["success_rate"]) == (2, 2, 0.5)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_bad_pending_row_is_set_aside_and_the_good_ones_recovered(tmp_path, fault):
    store = ResultStore(tmp_path, "r")
    store.write([_row("q1")])
    store.spill(_row("q3"))  # a trial that ended before the run was killed
    bad = store.pending / "0123456789abcdef0123.parquet"
    FAULTS[fault][0](bad)
    part = _outcome_within(RETURN_WITHIN_S, store.recover)["value"]
    assert part is not None and pq.read_table(part).column("task_id").to_pylist() == ["q3"]
    assert not list(store.pending.iterdir()) and os.path.lexists(store.quarantine / bad.name)
    assert store.completed() == {("a", "ehrsql", "q1", 0), ("a", "ehrsql", "q3", 0)}


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "EHRBENCH_"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_PROFILES_PATH=str(tmp_path / "profiles.toml"),
               DO_NOT_TRACK="1")
    return env


@pytest.mark.slow  # subprocesses of the installed command
@pytest.mark.parametrize(("command", "fault"), [("metrics", "FIFO"), ("metrics", "truncated"), ("report", "FIFO")])
def test_the_cli_says_which_part_is_bad_in_one_line(tmp_path, command, fault):
    store, bad = _run_with_bad_part(tmp_path / "data" / "results", fault, run_id="r1")
    result = subprocess.run([EHRBENCH, command, "--run-id", "r1", "--data-dir", str(tmp_path / "data")],
                            env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"ehrbench: error: {bad}: {FAULTS[fault][1]}"), result.stderr
    assert line.endswith("; move it aside or delete it"), result.stderr
    assert not list(tmp_path.rglob("prefect.db*")), "the report started Prefect before checking its input"
