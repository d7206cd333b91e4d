"""The data-quality scorer on hand-made labels and submissions (values computed by hand in the comments)."""

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ehrbench.cli import app
from ehrbench.dq.row_ids import row_id
from ehrbench.dq.score import read_submission, score_task, submission_refusal
from tests.bounded import finished_within

# three injected errors: c1 (an impossible value, one row), c2 (a duplicate: the copy and its original as
# evidence), c3 (a sex flip: the patient row and a sex-specific diagnosis as evidence)
LABELS = [
    dict(table="labs", row_id="aaaa000000000001", cluster_id="c1", family="impossible_values", subtype="decimal_shift",
         field="value", original_value="1.2", corrupted_value="120"),
    dict(table="labs", row_id="aaaa000000000002", cluster_id="c2", family="inconsistency", subtype="duplicate",
         field="value", original_value=None, corrupted_value="7.1"),
    dict(table="labs", row_id="aaaa000000000003", cluster_id="c2", family="inconsistency", subtype="duplicate",
         field=None, original_value=None, corrupted_value=None),
    dict(table="patients", row_id="bbbb000000000001", cluster_id="c3", family="demographic", subtype="sex_flip",
         field="gender", original_value="F", corrupted_value="M"),
    dict(table="diagnoses", row_id="cccc000000000001", cluster_id="c3", family="demographic", subtype="sex_flip",
         field=None, original_value=None, corrupted_value=None),
]


@pytest.fixture()
def task(tmp_path):
    (tmp_path / "gold").mkdir()
    pq.write_table(pa.Table.from_pylist(LABELS), tmp_path / "gold" / "labels.parquet")
    return tmp_path


def submit(tmp_path, text: str, name: str = "flagged_rows.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_one_row_per_cluster_catches_everything_precisely(task):
    flagged = submit(task, "table,_row_id\nlabs,aaaa000000000001\nlabs,aaaa000000000003\npatients,bbbb000000000001\n")
    result = score_task(task, flagged)
    assert (result.recall, result.precision, result.f1, result.passed) == (1.0, 1.0, 1.0, True)
    assert result.recall_by_family == {"demographic": 1.0, "impossible_values": 1.0, "inconsistency": 1.0}


def test_a_partial_submission_scores_by_clusters_and_rows(task):
    # catches c2 (through its evidence row) and not c1, c3; 1 of 4 flagged rows is labelled
    flagged = submit(task, "table,_row_id\nlabs,aaaa000000000003\nlabs,ffff000000000001\nlabs,ffff000000000002\n"
                           "patients,ffff000000000003\n")
    result = score_task(task, flagged)
    assert result.recall == pytest.approx(1 / 3)
    assert result.precision == pytest.approx(1 / 4)
    assert result.f1 == pytest.approx(2 * (1 / 3) * (1 / 4) / (1 / 3 + 1 / 4))
    assert not result.passed
    assert result.recall_by_subtype == {"demographic/sex_flip": 0.0, "impossible_values/decimal_shift": 0.0,
                                        "inconsistency/duplicate": 1.0}


def test_flagging_every_row_passes_only_while_precision_stays_above_its_floor(task):
    labelled = "".join(f"{r['table']},{r['row_id']}\n" for r in LABELS)
    noise = "".join(f"labs,{row_id('labs', [i]):s}\n" for i in range(95))  # 5 labelled of 100 flagged: 0.05
    assert score_task(task, submit(task, "table,_row_id\n" + labelled + noise)).passed
    noise = "".join(f"labs,{row_id('labs', [i]):s}\n" for i in range(600))  # 5 of 605 < 0.01
    result = score_task(task, submit(task, "table,_row_id\n" + labelled + noise))
    assert result.recall == 1.0 and result.precision == pytest.approx(5 / 605) and not result.passed


def test_header_case_aliases_bom_and_file_names_are_accepted(task):
    flagged = submit(task, "\ufeffTABLE_NAME,Row_ID\ndata/labs.csv.gz,AAAA000000000001\n\n"
                           " labs.csv , aaaa000000000002\n")
    submission = read_submission(flagged)
    assert submission.rows == {("labs", "aaaa000000000001"), ("labs", "aaaa000000000002")}
    assert submission.problem is None
    assert score_task(task, flagged).clusters_caught == 2


@pytest.mark.parametrize(("content", "problem"), [
    (None, "no submission"),
    ("", "has no table and row id columns"),
    ("patient,value\n1,2\n", "has no table and row id columns"),
    (b"\xff\xfe\x00garbage", "unreadable submission"),
])
def test_bad_submissions_score_as_empty_with_the_reason(task, content, problem):
    path = task / "flagged_rows.csv"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    result = score_task(task, path)
    assert (result.recall, result.precision, result.flagged_rows, result.passed) == (0.0, 0.0, 0, False)
    assert problem in result.submission_problem


def test_short_lines_are_skipped_and_counted(task):
    result = score_task(task, submit(task, "table,_row_id\nlabs\nlabs,aaaa000000000001\nlabs,\n,\n"))
    assert result.flagged_rows == 1 and "2 line(s)" in result.submission_problem


def test_row_ids_are_sha1_of_the_pristine_row():
    import hashlib

    assert row_id("labs", [10009628, "sodium", None, 140.0]) == hashlib.sha1(
        b"labs|10009628|sodium||140.0").hexdigest()[:16]


def test_cli_prints_one_json_object_and_exits_0_even_for_a_bad_submission(task):
    runner = CliRunner()
    good = runner.invoke(app, ["dq", "score", str(task), str(submit(task, "table,_row_id\nlabs,aaaa000000000001\n"))])
    assert good.exit_code == 0, good.output
    assert json.loads(good.stdout)["recall"] == pytest.approx(1 / 3)
    bad = runner.invoke(app, ["dq", "score", str(task), str(task / "missing.csv")])
    assert bad.exit_code == 0
    assert set(json.loads(bad.stdout)) >= {"recall", "precision", "f1", "passed"}
    no_task = runner.invoke(app, ["dq", "score", str(task / "nope"), str(task / "missing.csv")])
    assert no_task.exit_code == 1 and "gold/labels.parquet" in no_task.output


# --- bounds (issue 17) -------------------------------------------------------------------------------------------

def sparse_file(path, size: int):
    """A file of `size` bytes that takes no disk space (a hole)."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def test_a_submission_over_the_size_limit_is_refused_unread(task):
    path = sparse_file(task / "flagged_rows.csv", 300 * 2**20)
    result = score_task(task, path)
    assert (result.flagged_rows, result.recall, result.passed) == (0, 0.0, False)
    assert result.submission_problem == (
        f"refused submission {path}: 300.0 MiB is over the 64.0 MiB limit (flagging every row of a task's extract "
        "takes about 8 MiB)")
    assert submission_refusal(path) == result.submission_problem


def test_the_size_limit_is_inclusive(task, monkeypatch):
    text = "table,_row_id\nlabs,aaaa000000000001\n"
    monkeypatch.setattr("ehrbench.dq.score.MAX_SUBMISSION_BYTES", len(text))
    assert read_submission(submit(task, text)).rows == {("labs", "aaaa000000000001")}
    refused = read_submission(submit(task, text + "\n"))
    assert refused.rows == set() and "over the" in refused.problem


def test_a_fifo_is_refused_without_being_opened(task):
    fifo = task / "flagged_rows.csv"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer for ever
    submission, elapsed = finished_within(10, read_submission, fifo)
    assert submission.rows == set() and elapsed < 2
    assert submission.problem == f"refused submission {fifo}: it is a FIFO, not a regular file (flagged_rows.csv)"


def test_a_directory_or_device_is_refused(task, tmp_path):
    assert read_submission(task).problem == (
        f"refused submission {task}: it is a directory, not a regular file (flagged_rows.csv)")
    device = tmp_path / "zeros.csv"
    device.symlink_to("/dev/zero")  # endless: read whole, it would fill the memory
    assert "it is a character device" in read_submission(device).problem


def test_cli_refuses_an_oversized_submission_or_a_fifo_in_one_line(task):
    runner = CliRunner()
    big = sparse_file(task / "big.csv", 100 * 2**20)
    result = runner.invoke(app, ["dq", "score", str(task), str(big)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (f"ehrbench: error: refused submission {big}: 100.0 MiB is over the 64.0 MiB limit "
                             "(flagging every row of a task's extract takes about 8 MiB)\n")
    fifo = task / "pipe.csv"
    os.mkfifo(fifo)
    result, elapsed = finished_within(20, runner.invoke, app, ["dq", "score", str(task), str(fifo)])
    assert result.exit_code == 2 and "it is a FIFO" in result.stderr and elapsed < 5
