"""Format `fhir-agentbench`: FHIR-AgentBench's question file (glee4810/FHIR-AgentBench
`final_dataset/questions_answers_sql_fhir.csv`, or a redistribution keeping its columns), a CSV with one question per
row:

| column | read as |
|---|---|
| `question_id` | the task id (the EHRSQL-2024 question it comes from) |
| `question` | the question (the patient's raw MIMIC-IV id, raw calendar years) |
| `assumption` | the task's context: the current time when the question needs one, value-search hints (may be empty) |
| `patient_fhir_id` | the Patient resource the question is about |
| `true_answer` | the gold answer rows as `str()` of the numpy array FHIR-AgentBench's query returned (its
  `create_question_answer_dataset.py`): `[['2133-12-31 02:00:00']]`, or over lines without commas `[['a']\n ['b']]` |
| `true_fhir_ids` | the gold resource ids: a Python-literal dict of resource type -> ids |
| `template` | the EHRSQL template (optional) |

Other columns (the official file's `sql_query`, a redistribution's `task_type`) are kept out: the gold SQL ran on
the original MIMIC-IV, not on a database of the build. The tasks run with the `fhir` agent suite on the build's
`mimic_iv_on_fhir` FHIR view (MIMIC-IV on FHIR's resources of every raw row, raw times: the data the questions were
answered on) and are scored by protocol `fhir_agentbench`; their gold is the published answer and ids (no gold SQL to
run). On import, the share of gold ids that exist in that view is reported by resource type."""

from __future__ import annotations

import ast
import csv
import io
import tokenize
from collections.abc import Sequence
from pathlib import Path

from ehrbench.errors import ConfigError
from ehrbench.layout import BuildLayout
from ehrbench.tasksets.formats import BuildInfo, TaskFormat
from ehrbench.tasksets.model import ImportedTask, Target

COLUMNS = ("question_id", "question", "assumption", "patient_fhir_id", "true_answer", "true_fhir_ids")
FILE = ("FHIR-AgentBench's question CSV with the columns " + ", ".join(COLUMNS)
        + " (template optional), e.g. questions_answers_sql_fhir.csv")
FHIR_VIEW = Target("fhir", "mimic_iv_on_fhir")  # the build's view fhir/mimic_iv_on_fhir/


class FhirAgentBenchFormat(TaskFormat):
    name = "fhir-agentbench"
    protocol = "fhir_agentbench"
    suite = "fhir"
    profile = FHIR_VIEW.profile
    summary = "FHIR-AgentBench question CSV (true_answer, true_fhir_ids) on the build's mimic_iv_on_fhir view"

    def read(self, paths: Sequence[Path]) -> list[ImportedTask]:
        if len(paths) != 1:
            raise ConfigError(f"{', '.join(map(str, paths))}: expected one file, {FILE}")
        path = Path(paths[0])
        if not path.is_file():
            raise ConfigError(f"{path}: {'not a file' if path.exists() else 'not found'}; expected {FILE}")
        with path.open(newline="", encoding="utf-8", errors="replace") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise ConfigError(f"{path}: no column(s) {', '.join(missing)}; expected {FILE}")
            return [_task(row, path, line) for line, row in enumerate(reader, start=2)]

    def default_name(self, paths: Sequence[Path]) -> str:
        return "fhir-agentbench"

    def target(self, task: ImportedTask) -> Target:
        return FHIR_VIEW

    def check_build(self, build: BuildInfo) -> list[str]:
        resources = self.fhir_resources(build)
        if not resources.is_file():
            raise ConfigError(f"--build: build {build.build_id} has no {FHIR_VIEW.database} FHIR view ({resources}; "
                              "builds of ehrbench before it have only the EHRSQL-aligned one): rebuild, then import")
        return []

    def fhir_resources(self, build: BuildInfo) -> Path:
        return BuildLayout(build.folder).fhir_view_resources(FHIR_VIEW.database)

    def not_compared(self, build: BuildInfo) -> str | None:
        return "the published answers and resource ids are the gold: the file has no gold SQL for this build"


def _task(row: dict[str, str | None], path: Path, line: int) -> ImportedTask:
    key = (row.get("question_id") or "").strip()
    if not key:
        raise ConfigError(f"{path}: line {line}: no question_id; expected a task id in every row")

    def text(column: str, required: bool = True) -> str:
        value = (row.get(column) or "").strip()
        if required and not value:
            raise ConfigError(f"{path}: task {key}: empty {column}; expected {_EXPECTED[column]}")
        return value

    answer = text("true_answer")
    rows = answer_rows(answer)
    if rows is None:
        raise ConfigError(f"{path}: task {key}: true_answer is not a list of rows; expected {_EXPECTED['true_answer']}")
    ids = _literal(text("true_fhir_ids"), path, key, "true_fhir_ids")
    if not isinstance(ids, dict) or not all(isinstance(t, str) and isinstance(v, (list, tuple))
                                            and all(isinstance(i, str) for i in v) for t, v in ids.items()):
        raise ConfigError(f"{path}: task {key}: true_fhir_ids is not a dict of resource type -> ids; expected "
                          f"{_EXPECTED['true_fhir_ids']}")
    pairs = sorted({(kind, resource_id) for kind, values in ids.items() for resource_id in values})
    return ImportedTask(key, path.name, text("question"), "mimic_iv", published_answer=answer,
                        answer_rows=tuple(tuple(row) for row in rows),
                        template=text("template", required=False) or None,
                        context=text("assumption", required=False) or None,
                        patient_fhir_id=text("patient_fhir_id"), fhir_ids=tuple(i for _, i in pairs),
                        fhir_types=tuple(t for t, _ in pairs))


_EXPECTED = {"question": "the question text", "patient_fhir_id": "the Patient resource id",
             "true_answer": "the answer rows as numpy prints them, e.g. [['2133-12-31 02:00:00']]",
             "true_fhir_ids": "a Python-literal dict, e.g. {'Observation': ['b2c4828b-…']}"}


_VALUE = (tokenize.STRING, tokenize.NUMBER, tokenize.NAME)


def answer_rows(text: str) -> list[list] | None:
    """The rows of a `true_answer`: `str()` of a 2-D numpy array (elements apart by spaces, rows by a newline, no
    commas; `nan` for a missing number), read by putting the commas back and reading the Python literal. None when
    the text is not a list of rows."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                                    tokenize.ENDMARKER)]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    parts: list[str] = []
    previous = None
    for token in tokens:
        starts = token.type in _VALUE or token.string in ("[", "-")
        if starts and previous is not None and (previous.type in _VALUE or previous.string == "]"):
            parts.append(",")
        parts.append("None" if token.type == tokenize.NAME and token.string == "nan" else token.string)
        previous = token
    try:
        rows = ast.literal_eval(" ".join(parts))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        return None
    return rows


def _literal(value: str, path: Path, key: str, column: str):
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ConfigError(f"{path}: task {key}: {column} is not a Python literal; expected {_EXPECTED[column]}"
                          ) from None
