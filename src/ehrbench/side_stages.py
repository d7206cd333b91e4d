"""The side stages — dq, noteqa, meds — and what they read, so that they run while dbt still builds the profiles.

The databases stage builds the models in two dbt runs. First the side stages' models (`side_models_command`: the
audit extract, the notes, the MEDS events, and what they are made from beyond staging), whose outputs
(`side_stage_inputs`) are copied into a file of their own; the side stages then read that copy, in worker processes,
while the second run (`profiles_command`: the profiles, the FHIR views, every other model) writes the warehouse.
The two runs build exactly the models and tests of the one run they replace (tests/integration/
test_side_stages.py): the first selects its tests whose parents it builds or finds built (dbt's `buildable`), the
second every test it selects one parent of.
"""

from __future__ import annotations

from collections.abc import Sequence

from ehrbench.dq.extract import EXTRACT_SCHEMA
from ehrbench.meds.export import TIMELINES
from ehrbench.noteqa.suite import FACTS_SCHEMA, NOTES_MODELS, NOTES_SCHEMAS
from ehrbench.profiles import PROFILE_SELECTION
from ehrbench.settings import NotesSource
from ehrbench.sources.ingest import META_SCHEMA
from ehrbench.sources.releases import raw_schema


def side_models(notes_source: NotesSource) -> list[str]:
    """dbt selectors of the models the side stages read."""
    return ["dq", NOTES_MODELS[notes_source], "meds"]


def side_models_command(notes_source: NotesSource) -> list[str]:
    """The first dbt run: the side stages' models and their ancestors but staging (built and validated before)."""
    return ["build", "--select", *(f"+{selector}" for selector in side_models(notes_source)), "--exclude", "staging",
            "--indirect-selection", "buildable"]


def profiles_command(downstream: Sequence[str], notes_source: NotesSource) -> list[str]:
    """The second dbt run: every profile and the `downstream` models (the FHIR views), but what the first built."""
    return ["build", "--select", *PROFILE_SELECTION, *downstream,
            "--exclude", *(f"+{selector}" for selector in side_models(notes_source))]


def side_stage_inputs(notes_source: NotesSource) -> list[str]:
    """What the side stages read from the warehouse: whole schemas, or `schema.table`.
    dq: the audit extract; noteqa: the notes (and the synthetic notes' facts); meds: the MEDS models, and the ingest
    record and raw patients of MIMIC-IV (the conversion tasks' raw files and subjects)."""
    notes = [NOTES_SCHEMAS[notes_source], *([FACTS_SCHEMA] if notes_source == "synthetic" else [])]
    meds = list(dict.fromkeys(schema for schema, _ in TIMELINES.values()))
    return [EXTRACT_SCHEMA, *notes, *meds, META_SCHEMA, f"{raw_schema('mimic_iv')}.patients"]
