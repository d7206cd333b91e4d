"""What a task set is made of: a task as a format reads it from a published file (`ImportedTask`), the database it
runs on (`Target`), and the task set's manifest (`TaskSetManifest`, with the reproduction report of its published
answers). Task ids: a task set's task is `<task set>/<published id>` in the evaluation and its results (see
`task_id`), so it never collides with a generated suite's question id or another task set's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from ehrbench.settings import TASKSET_NAME_MAX, is_run_id

SEPARATOR = "/"  # generated question ids and dq task folders never hold one


def is_name(text: str) -> bool:
    """A task set's name: one plain folder name (the rule of run ids), at most 100 characters."""
    return is_run_id(text) and len(text) <= TASKSET_NAME_MAX


def task_id(taskset: str, source_id: str) -> str:
    """The evaluation's id of a task set's task: unique across task sets and generated suites, stable across runs
    (so a resumed run skips it once it completed)."""
    return f"{taskset}{SEPARATOR}{source_id}"


def taskset_of(evaluated_task_id: str) -> str | None:
    """The task set an evaluated task id belongs to; None for a generated suite's task."""
    name, separator, _ = evaluated_task_id.partition(SEPARATOR)
    return name if separator else None


@dataclass(frozen=True)
class Target:
    """Where a task runs: a database of a build (`db/<profile>/<database>`); a format over FHIR would name the build's
    FHIR view here (profile `fhir`)."""

    profile: str
    database: str

    def __str__(self) -> str:
        return f"{self.profile}/{self.database}"


@dataclass(frozen=True)
class ImportedTask:
    """One task as a format reads it from a published file, before anything is executed."""

    source_id: str  # the id the published file gives it (and a prediction file keys it by)
    source_file: str  # the file it was read from
    question: str  # the question; for chatqa the simulated user's instruction
    db: str  # the database it asks about: mimic_iv | eicu
    is_answerable: bool = True
    gold_sql: str | None = None  # as published (SQLite dialect, the benchmark's placeholders kept)
    published_answer: str | None = None  # the published answer as the file writes it (JSON or the answer string)
    answer_rows: tuple[tuple, ...] | None = None  # the published answer read into rows, for a format without gold SQL
    template: str | None = None
    task_type: str | None = None  # EHR-ChatQA: incre | adapt
    context: str | None = None
    patient_fhir_id: str | None = None
    fhir_ids: tuple[str, ...] = ()  # the gold resource ids (FHIR-AgentBench)
    fhir_types: tuple[str, ...] = ()  # the resource type of each of fhir_ids
    extra: Mapping[str, Any] = field(default_factory=dict)  # a format's own fields, kept in the row's `extra` JSON


class SourceFile(BaseModel):
    path: str
    sha256: str
    bytes: int


class Mismatch(BaseModel):
    task_id: str  # the published id
    published: str
    reproduced: str  # the gold SQL's answer on the build, in the protocol's form


class IdCoverage(BaseModel):
    """Of one resource type's gold ids, how many the build's FHIR view has."""

    published: int
    found: int


class Reproduction(BaseModel):
    """How many published answers the build's database reproduces: every task's gold SQL is executed on it; where the
    file has an answer (and the format compares on this build), the two are compared under the protocol's rules."""

    executed: int = 0  # gold SQL run on the build (answerable tasks)
    compared: int = 0  # of those, with a published answer compared
    reproduced: int = 0
    mismatches: list[Mismatch] = Field(default_factory=list)
    note: str | None = None  # e.g. why answers were recomputed instead of compared
    fhir_ids: dict[str, IdCoverage] = Field(default_factory=dict)  # resource type -> gold ids found in the FHIR view

    @property
    def share(self) -> float | None:
        return self.reproduced / self.compared if self.compared else None

    def describe_fhir_ids(self) -> str | None:
        """One line: the gold resource ids found in the build's FHIR view, in all and by type."""
        if not self.fhir_ids:
            return None
        published = sum(c.published for c in self.fhir_ids.values())
        found = sum(c.found for c in self.fhir_ids.values())
        by_type = ", ".join(f"{kind} {c.found:,}/{c.published:,}" for kind, c in sorted(self.fhir_ids.items()))
        return f"gold FHIR ids in the build's FHIR view: {found:,}/{published:,} ({found / published:.1%}); {by_type}"

    def describe(self) -> str:
        if not self.executed and self.note:
            return f"no gold SQL run: {self.note}"
        if not self.compared:
            return f"{self.executed:,} gold answers recomputed on the build" + (f" ({self.note})" if self.note else "")
        return (f"{self.reproduced:,}/{self.compared:,} published answers reproduced ({self.share:.1%})"
                + (f"; {self.executed - self.compared:,} recomputed" if self.executed > self.compared else ""))


class BuildRef(BaseModel):
    build_id: str
    folder: str
    eicu_preset: str | None = None
    editions: dict[str, str] = Field(default_factory=dict)  # dataset -> demo | full


class TaskSetManifest(BaseModel):
    """`tasksets/<name>/manifest.json`."""

    name: str
    format: str
    protocol: str  # the published scoring rules its tasks are scored by (ehrbench.tasks.Gold.protocol)
    suite: str  # the agent suite that runs its tasks
    created_at: datetime
    sources: list[SourceFile]
    build: BuildRef  # the build it was imported against: the gold answers are this build's
    targets: list[str]  # <profile>/<database> its tasks run on
    requires: dict[str, str] = Field(default_factory=dict, description="build parameters it needs, e.g. eicu_preset")
    current_time: dict[str, str] = Field(default_factory=dict, description="target -> 'now' of that database")
    tasks: int
    answerable: int
    reproduction: Reproduction
    warnings: list[str] = Field(default_factory=list)
    ehrbench_version: str | None = None
