"""`ehrbench fhir ground` on the demo build: FHIR-AgentBench's ground truth of EHRSQL-2024 valid-split questions, by
its published rules, on the build's raw tables and mimic_iv_on_fhir view, agrees with the published question file.

A slice of the valid split (every 8th question, plus each question known to differ) keeps the test short; the whole
split's figures are in docs/benchmarks.md#fhir-agentbench-ground-truth-rules. Reads the session's demo build snapshot
(its warehouse holds the raw-table views), read-only."""

from __future__ import annotations

import ast
import csv
import json
import os
import re
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import SHARED_DATA
from tests.integration.ehrbench_cli import EHRBENCH

pytestmark = pytest.mark.integration

VALID = SHARED_DATA / "ehrsql-2024" / "mimic_iv" / "valid"
PUBLISHED = SHARED_DATA / "fhir-agentbench" / "questions_answers_fhir.csv"

# Questions whose published gold we do not reproduce, and why (docs/benchmarks.md#fhir-agentbench-ground-truth-rules).
GROUPED_CHARTEVENTS = {  # `SELECT chartevents.* … GROUP BY day`: SQLite returns a row per group by file order
    "0d7f97f7f014369165ccb406", "2783cbb5eccb2b4d0c78a1e0", "dca7f0863bc05ed189b1b292", "e1d0b53beabc24ec45e07b2d",
    "f5f18cb5c4dd940a95ec5360"}
EMPTY_PUBLISHED_ANSWER = {  # a lab value "in/since <year>" whose published answer is [] (its literal did not match)
    "249619a43d4c7fe7add673f1", "4ea43bff9e1b8d9f142a816d", "7a60c2c50fa3345765a83271", "abd48dc45ba90022382e02c9",
    "b9c136c1e1d19649caabdeb4"}


@pytest.fixture(scope="module")
def split_slice(tmp_path_factory):
    if not VALID.is_dir() or not PUBLISHED.is_file():
        pytest.skip(f"EHRSQL-2024 valid split ({VALID}) or FHIR-AgentBench's file ({PUBLISHED}) not found")
    questions = json.loads((VALID / "annotated.json").read_text())
    answers = json.loads((VALID / "answer.json").read_text())
    chosen = [q for i, q in enumerate(questions)
              if i % 8 == 0 or q["id"] in GROUPED_CHARTEVENTS | EMPTY_PUBLISHED_ANSWER]
    folder = tmp_path_factory.mktemp("ehrsql2024") / "valid"
    folder.mkdir()
    (folder / "annotated.json").write_text(json.dumps(chosen))
    (folder / "answer.json").write_text(json.dumps({q["id"]: answers[q["id"]] for q in chosen}))
    return folder


@pytest.fixture(scope="module")
def data_dir(request) -> Path:
    """The demo build's data directory: its snapshot, or the one holding the build folder $EHRBENCH_DEMO_BUILD."""
    if os.environ.get("EHRBENCH_DEMO_BUILD"):
        return Path(os.environ["EHRBENCH_DEMO_BUILD"]).resolve().parent.parent
    return request.getfixturevalue("demo_build")["snapshot"]


@pytest.fixture(scope="module")
def grounded(data_dir, cli_env, split_slice, tmp_path_factory):
    out = tmp_path_factory.mktemp("ground") / "valid.parquet"
    result = subprocess.run(
        [EHRBENCH, "fhir", "ground", "--ehrsql2024-split", str(split_slice), "--out", str(out),
         "--compare", str(PUBLISHED), "--data-dir", str(data_dir)],
        env=cli_env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return out, result.stdout


def test_the_published_questions_are_kept_and_their_gold_reproduced(grounded, split_slice):
    out, printed = grounded
    rows = {r["question_id"]: r for r in pq.read_table(out).to_pylist()}
    asked = {q["id"] for q in json.loads((split_slice / "annotated.json").read_text()) if q["query"] != "null"}
    assert set(rows) == asked, "a row per question with gold SQL"
    with PUBLISHED.open(newline="") as handle:
        published = {r["question_id"]: r for r in csv.DictReader(handle) if r["question_id"] in asked}
    kept = {q for q, r in rows.items() if r["kept"]}
    assert kept == set(published), "FHIR-AgentBench keeps exactly these questions of the slice"
    assert len(kept) > 40

    differing = set()
    for question_id in kept:
        theirs = ast.literal_eval(published[question_id]["true_fhir_ids"] or "{}")
        ours = json.loads(rows[question_id]["true_fhir_ids"])
        if {k: sorted(v) for k, v in theirs.items()} != ours:
            differing.add(question_id)
    assert differing == GROUPED_CHARTEVENTS | EMPTY_PUBLISHED_ANSWER
    # the printed figures say the same
    exact = len(kept) - len(differing)
    assert f"{exact} of {len(kept)} questions exact" in printed
    assert f"answers equal to the published true_answer: {len(kept) - len(EMPTY_PUBLISHED_ANSWER)} of" in printed
    # the gold SQL ran in the patient's raw calendar
    assert not any("current_time" in rows[q]["sql"] or re.search(r"(?<!\d)2100(?!\d)", rows[q]["sql"]) for q in kept)


def test_questions_it_leaves_out_say_why(grounded):
    out, printed = grounded
    dropped = [r for r in pq.read_table(out).to_pylist() if not r["kept"]]
    reasons = {r["dropped"].split(":")[0] for r in dropped}
    assert {"no patient", "reads diagnoses_icd.charttime", "removed template", "reads cost"} <= reasons
    assert all(r["true_fhir_ids"] is None for r in dropped)
    assert printed.splitlines()[1].startswith("not kept: ")
