"""FHIR ground truth of a list of questions on one build (stages fhir and questions): resource ids from the gold SQL's
rows (ehrbench.fhir.ground_truth, on the database's SQLite file, its hidden lineage and the build's
`fhir/resources.duckdb`), then the dual check (ehrbench.fhir.grounding_check) of a seeded sample of at most
CHECK_LIMIT of the single-patient ones: the answer computed from the resources must equal the SQL answer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ehrbench.ehrsql.published import load_questions
from ehrbench.fhir.ground_truth import Grounding, Question, ground_questions, summarize
from ehrbench.fhir.grounding_check import CheckResult, check_groundings
from ehrbench.fhir.resource_source import ResourceSource
from ehrbench.layout import BuildLayout
from ehrbench.profiles import BenchmarkDatabase

CHECK_LIMIT = 500  # questions of the dual grounding check (a seeded sample beyond that)
# The database the published EHRSQL-2024 questions (and the MIMIC-IV template questions) run on.
EHRSQL2024_DATABASE = BenchmarkDatabase("ehrsql2024", "mimic_iv")


@dataclass
class BuildGrounding:
    groundings: list[Grounding]
    check: CheckResult

    @property
    def summary(self) -> dict:
        """Counts per status, for all and for single-patient questions, and why the unmapped ones are."""
        return summarize(self.groundings)

    def to_dict(self) -> dict:
        """The summary and the check's counts and disagreements, as the manifest records them."""
        return {**self.summary, "grounding_check": self.check.to_dict()}


def ground_on_build(questions: list[Question], build: BuildLayout, database: BenchmarkDatabase, current_time: str,
                    seed: int, resources: ResourceSource | None = None) -> BuildGrounding:
    """Ground `questions` (gold SQL in SQLite's dialect, on `database` of the build) in the EHRSQL-aligned view's
    FHIR resources (`resources`; default: the build's exported ones) and check a seeded sample of the single-patient
    ones both ways."""
    sqlite_file = build.database_files(database.profile, database.database)[1]
    resources = build.fhir_resources if resources is None else resources
    groundings = ground_questions(questions, sqlite_file, build.lineage(database.key), resources, current_time)
    check = check_groundings(groundings, {q.question_id: q.sql for q in questions}, sqlite_file, resources,
                             current_time, limit=CHECK_LIMIT, seed=seed)
    return BuildGrounding(groundings, check)


def published_ehrsql2024_questions(ehrsql2024_dir: Path, split: str = "valid") -> list[Question]:
    """The published EHRSQL-2024 questions of a split (its `mimic_iv/` folder), as questions to ground."""
    return [Question(q.question_id, q.sql, q.patient_id is not None) for q in load_questions(ehrsql2024_dir, split)]
