"""The published benchmarks' scoring rules, one module per protocol, so that a number printed beside a paper's
means the same (docs/benchmarks.md#metrics). Each module's docstring lists the published rules it reimplements and
the repository files they were read from; `tests/unit/test_conformance_<protocol>.py` pins them case by case.

| protocol | module | published scorer |
|---|---|---|
| `ehrsql2024` | `ehrbench.scoring.ehrsql2024` | glee4810/ehrsql-2024 `scoring_program/` (RS(c)) |
| `ehrsql2022` | `ehrbench.scoring.ehrsql2022` | glee4810/EHRSQL `evaluate.py` (F1_ans, F1_exe) |
| `ehrchatqa` | `ehrbench.scoring.ehrchatqa` | glee4810/EHR-ChatQA `src/envs/base.py` (IncreQA, AdaptQA) |
| `fhir_agentbench` | `ehrbench.scoring.fhir_agentbench` | FHIR-AgentBench (answer correctness, retrieval P/R) |
| `ehrnoteqa` | `ehrbench.scoring.ehrnoteqa` | ji-youn-kim/EHRNoteQA `src/evaluation/` (the judge's verdict) |

Public API:

- `score_trial(task, answer, *, judge=None) -> dict`: the result-row fields of one trial (`reward`, `correct`,
  `answer`, and the protocol's own: `answer_judge`, `retrieval_precision`, `retrieval_recall`,
  `retrieved_fhir_ids`), under `protocol_of(task)`. `judge` decides free-text answers (fhir_agentbench); its
  `model` (and `votes`) are EHRNoteQA's judge (ehrnoteqa; without a model, the recorded stand-ins).
- `protocol_of(task) -> str`: `task.gold.protocol`, else the suite's default (`DEFAULT_PROTOCOLS`: ehrsql →
  ehrsql2024, chatqa → ehrchatqa, fhir → fhir_agentbench, noteqa → ehrnoteqa). The `dq` suite has its own scorer
  (`ehrbench.dq.score`).
- `score_predictions(protocol, gold_items, predictions, execute, *, current_time=None) -> dict` for the SQL protocols
  (ehrsql2024, ehrsql2022): the published metrics of a prediction file in the benchmark's own format — `gold_items`
  maps question id → gold SQL ("null" or None: unanswerable), `predictions` question id → predicted SQL or "null";
  `execute(sql) -> rows` runs one query on the target SQLite database as the published scorers do (Python's
  sqlite3; EHRSQL-2024 drops undecodable text bytes; EHRSQL gives a query 60 s) and raises when it fails or times
  out. The answer is one JSON-ready object: `{"protocol", the published keys (ehrsql2024:
  accuracy0, accuracy5, accuracy10, accuracyN = 100 × RS(c); ehrsql2022: precision_ans, recall_ans, f1_ans,
  precision_exec, recall_exec, f1_exec, ×100 rounded to 2 decimals), items, answered, answerable, correct}`.
  `current_time` defaults to the protocol's (2100-12-31 23:59:00; EHRSQL: 2105-12-31 23:59:00).
- `prediction_sql(protocol, sql, current_time=None) -> str`: the query a protocol's scorer runs for a predicted SQL
  (EHRSQL-2024's and EHRSQL's rewrite predictions as they rewrite gold; the others run them as written). The harness
  runs an agent's final SQL this way, so a trial's rows are the ones the published scorer would compare.

The metric formulas over the outcomes (RS(c), F1, SR, Pass@k …) are `ehrbench.metrics`'.
"""

from __future__ import annotations

from collections.abc import Mapping

from ehrbench.scoring import ehrchatqa, ehrnoteqa, ehrsql2022, ehrsql2024, fhir_agentbench
from ehrbench.scoring.ehrsql2024 import Execute
from ehrbench.scoring.fhir_agentbench import Judge
from ehrbench.tasks import AgentAnswer, EvalTask

PROTOCOLS = (ehrsql2024.PROTOCOL, ehrsql2022.PROTOCOL, ehrchatqa.PROTOCOL, fhir_agentbench.PROTOCOL,
             ehrnoteqa.PROTOCOL)
DEFAULT_PROTOCOLS = {"ehrsql": ehrsql2024.PROTOCOL, "chatqa": ehrchatqa.PROTOCOL, "fhir": fhir_agentbench.PROTOCOL,
                     "noteqa": ehrnoteqa.PROTOCOL}
SQL_PROTOCOLS = {ehrsql2024.PROTOCOL: ehrsql2024, ehrsql2022.PROTOCOL: ehrsql2022}


def protocol_of(task: EvalTask) -> str:
    """The protocol a task is scored by: its gold's, else its suite's default."""
    protocol = task.gold.protocol or DEFAULT_PROTOCOLS.get(task.view.suite)
    if protocol not in PROTOCOLS:
        raise ValueError(f"task {task.view.suite}/{task.view.task_id}: protocol {protocol!r}; expected one of "
                         f"{', '.join(PROTOCOLS)} (suite dq is scored by ehrbench.dq.score)")
    return protocol


def prediction_sql(protocol: str | None, sql: str, current_time: str | None = None) -> str:
    """The query `protocol`'s scorer executes for the predicted `sql`: its `post_process_sql` (EHRSQL-2024: the current
    time for `current_time`/'now'/NOW(), DATE_SUB …; EHRSQL: lower-cased first, then the same kind of rewrites) with
    the task's current time (default: the protocol's); any other protocol (or None) runs it unchanged."""
    module = SQL_PROTOCOLS.get(protocol or "")
    if module is None:
        return sql
    return module.post_process_sql(sql, current_time) if current_time else module.post_process_sql(sql)


def score_trial(task: EvalTask, answer: AgentAnswer, *, judge: Judge | None = None) -> dict:
    """The result-row fields of one trial under its protocol."""
    protocol = protocol_of(task)
    if protocol == fhir_agentbench.PROTOCOL:
        return fhir_agentbench.score_trial(task, answer, judge)
    if protocol == ehrnoteqa.PROTOCOL:
        return ehrnoteqa.score_trial(task, answer, getattr(judge, "model", None), getattr(judge, "votes", 1))
    module = {ehrsql2024.PROTOCOL: ehrsql2024, ehrsql2022.PROTOCOL: ehrsql2022, ehrchatqa.PROTOCOL: ehrchatqa}
    return module[protocol].score_trial(task, answer)


def score_predictions(protocol: str, gold_items: Mapping[str, str | None], predictions: Mapping[str, str | None],
                      execute: Execute, *, current_time: str | None = None) -> dict:
    """The published metrics of a prediction file (see the module docstring)."""
    if protocol not in SQL_PROTOCOLS:
        raise ValueError(f"protocol {protocol!r} scores no prediction file; expected one of {', '.join(SQL_PROTOCOLS)}")
    module = SQL_PROTOCOLS[protocol]
    return module.score_predictions(gold_items, predictions, execute,
                                    current_time=current_time or module.CURRENT_TIME)


__all__ = ["DEFAULT_PROTOCOLS", "PROTOCOLS", "SQL_PROTOCOLS", "Execute", "Judge", "protocol_of", "score_predictions",
           "score_trial"]
