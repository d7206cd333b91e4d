"""The types every stage of an evaluation shares, at the bottom of the package: the suites, what an agent sees of a
task (TaskView), the gold it is scored against (Gold), a task (EvalTask), an agent's answer (AgentAnswer) and the
interface the harness calls (Agent). Questions, agents, evaluation and reports import them; this module imports
nothing of ehrbench, so none of them has to import another to agree on a task (tests/unit/test_import_layers.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

SUITES = ("ehrsql", "chatqa", "fhir", "dq", "noteqa", "meds_conversion", "event_modelling")
# the suites whose tasks are workspace tasks of the family of the same name: a trial's agent works in a fresh copy
# of the task's folder, which the family's verifier scores (ehrbench.workspace.verify)
WORKSPACE_SUITES = ("meds_conversion", "event_modelling")


@dataclass(frozen=True)
class TaskView:
    """Everything an agent may read about a task; no gold."""

    suite: str
    task_id: str
    db: str | None
    instruction: str  # the question; for chatqa the simulated user's instruction, which the agent never sees
    context: str | None = None  # e.g. "Assume the current time is …"
    database: Path | None = None  # the agent-facing database file (SQL suites)
    data_dir: Path | None = None  # the agent-visible data folder (dq)
    fhir_resources: Path | None = None  # the FHIR resources database (fhir)
    patient_fhir_id: str | None = None  # the Patient resource a fhir question is about (FHIR-AgentBench gives it)
    # an imported published task: the protocol it is scored by and its database's 'now'; the harness runs the agent's
    # final SQL as that protocol's scorer runs a prediction (ehrbench.scoring.prediction_sql)
    protocol: str | None = None
    current_time: str | None = None
    # noteqa (EHRNoteQA): the headed notes block the question is asked over, the five options as shown (file order,
    # or a trial's shuffle: option_order[i] is the file position of shown option i), and the answer format
    notes: str | None = None
    choices: tuple[str, ...] = ()
    qa_format: str | None = None  # multichoice | openended
    option_seed: int | None = None  # the evaluation's seed, which a trial's option shuffle draws from
    option_order: tuple[int, ...] | None = None
    workspace: Path | None = None  # a workspace suite's trial folder, made fresh by the harness before the agent runs


@dataclass(frozen=True)
class Gold:
    is_answerable: bool = True
    answer_text: str | None = None  # the EHRSQL-2024 answer string of the gold rows
    sql: str | None = None
    fhir_ids: tuple[str, ...] = ()
    fhir_types: tuple[str, ...] = ()  # the resource type of each of fhir_ids, when known (imported task sets)
    published_answer: str | None = None  # an imported task's answer as its file writes it (a published judge reads
    # it); noteqa: the correct option's letter among the file's options
    dq_task_dir: Path | None = None  # holds gold/labels.parquet
    workspace_task_dir: Path | None = None  # a workspace suite's task (ehrbench.layout.WorkspaceTaskLayout)
    # the published scoring rules the task is scored by (ehrsql2024 | ehrsql2022 | ehrchatqa | fhir_agentbench);
    # None: the suite's own (a generated suite follows the benchmark it is modelled on)
    protocol: str | None = None
    # the gold answer's rows as executed (cells as the database returned them, not rounded): the protocols that
    # compare raw cells need them (ehrsql2022, ehrchatqa); None: only answer_text is known
    answer_rows: tuple[tuple, ...] | None = None
    # EHR-ChatQA's task type: incre (IncreQA, scored on the executed SQL results) | adapt (AdaptQA, on the answer)
    task_type: str | None = None


@dataclass(frozen=True)
class EvalTask:
    view: TaskView
    gold: Gold = field(repr=False)

    @property
    def key(self) -> tuple[str, str]:
        return self.view.suite, self.view.task_id


@dataclass
class AgentAnswer:
    """An agent's result for one trial: an answer (rows or the EHRSQL-2024 answer string) or an abstention, the SQL
    or resource ids behind it, the flagged rows of an audit, and what it cost."""

    abstained: bool = False
    answer_rows: list[list] | None = None
    answer_text: str | None = None
    free_text: bool = False  # answer_text is the model's own words (FHIR), judged, not compared as a result string
    sql: str | None = None
    fhir_ids: tuple[str, ...] = ()
    # the retrieved ids by resource type as FHIR-AgentBench scores them (its agents: the last retrieval of each type,
    # repeats kept); None: the agent keeps no such record (its fhir_ids are scored without types)
    fhir_ids_by_type: dict[str, list[str]] | None = None
    flagged_rows: list[tuple[str, str]] | None = None  # (table, row id) of a data-quality audit
    model: str | None = None
    tool_calls: int = 0
    tool_errors: int = 0  # malformed tool calls (answered with an error, counted)
    stop_reason: str | None = None  # finished | text | max_actions (LLM agents)
    user_error: bool = False  # the simulated user erred in every attempt: the trial is invalid, not scored
    user_turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0  # None: the model has no list price (local models)
    transcript: list[dict] = field(default_factory=list)
    # how value_similarity_search ranked values (lexical | embedding, "+synonyms" with the synonym table); None when
    # the trial offered no such tool (results column `value_search`)
    value_search: str | None = None
    web_search: str = "disabled"  # the web_search provider offered, or disabled (results column `web_search`)


class Agent(Protocol):
    name: str

    def run(self, view: TaskView) -> AgentAnswer: ...


@dataclass(frozen=True)
class Verdict:
    """A workspace task's verdict (ehrbench.workspace.verify): a binary reward with the family's diagnostic metrics."""

    passed: bool
    reward: float  # 1.0 when passed, else 0.0
    metrics: dict = field(default_factory=dict)
    problem: str | None = None  # why the submission failed, counted as empty, or was partly ignored

    def to_dict(self) -> dict:
        return asdict(self)
