"""What every agent returns for a trial, and the interface the harness calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ehrbench.evaluation.tasks import TaskView


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


class Agent(Protocol):
    name: str

    def run(self, view: TaskView) -> AgentAnswer: ...
