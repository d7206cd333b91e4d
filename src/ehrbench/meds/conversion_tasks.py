"""MEDS format conversion tasks (HealthAgentBench's "EHR format conversion"; docs/benchmarks.md#meds-conversion-tasks):
raw MIMIC-IV tables of a seeded sample of subjects, an event configuration that customises the MEDS-for-MIMIC-IV
mapping in seeded ways, and an instruction to produce the MEDS data. The gold is what ehrbench's own conversion
(ehrbench.meds.convert) makes of the task's files under the task's configuration; the verifier
(ehrbench.meds.conversion_verify) compares the agent's MEDS data with it.

    workspace_tasks/meds_conversion/<task_id>/
      instruction.md
      workspace/event_config.yaml        the customised configuration the agent implements
      workspace/data/<table>.csv.gz      the raw tables, e.g. data/hosp/admissions.csv.gz, of the task's subjects
      gold/events.parquet                the expected events (meds DataSchema, MEDS order)
      gold/task.json                     seed, tables, customisations and the expected counts and content hash
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import meds
import yaml

from ehrbench.errors import MissingInputError
from ehrbench.layout import WorkspaceTaskLayout
from ehrbench.meds.conversion_verify import gold_events_path, summarise_events
from ehrbench.meds.convert import convert, csv_relation, table_file
from ehrbench.meds.event_config import parse_event_config
from ehrbench.meds.export import write_checked
from ehrbench.seeding import keyed_rng
from ehrbench.sources.ingest import META_SCHEMA
from ehrbench.sources.releases import raw_schema
from ehrbench.warehouse import open_duckdb

FAMILY = "meds_conversion"
DEFAULT_EVENT_CONFIG = Path(__file__).parent / "data" / "mimic_iv_event_config.yaml"
INSTRUCTION_TEMPLATE = Path(__file__).parent / "data" / "conversion_instruction.md"
BASE_TABLES = ("hosp/patients", "hosp/admissions", "hosp/diagnoses_icd")  # every task's
EXTRA_TABLES = ("hosp/procedures_icd", "icu/icustays", "hosp/transfers", "hosp/labevents", "hosp/omr")
CUSTOMISATIONS_PER_TASK = 2
SUBJECTS_PER_TASK = 50  # the sample's size (all subjects when fewer): small files, the same task on the full release


@dataclass(frozen=True)
class Customisation:
    """One seeded change to the standard mapping: the tables it needs, the code prefixes (a code's first `//` part)
    whose events it changes or adds, what the instruction says, and the change to the configuration."""

    name: str
    tables: tuple[str, ...]
    prefixes: tuple[str, ...]
    description: str
    apply: Callable[[dict], None]


def _admission_demographics(config: dict) -> None:
    for field in ("insurance", "language", "marital_status", "race"):
        config["hosp/admissions"][f"admission_{field}"] = {
            "code": f"f\"ADMISSION_{field.upper()}//{{${field} ?? 'UNK'}}\"",
            "time": config["hosp/admissions"]["admission"]["time"], "hadm_id": "$hadm_id"}


def _set(table: str, event: str, key: str, value: object) -> Callable[[dict], None]:
    def apply(config: dict) -> None:
        if value is None:
            config[table][event].pop(key, None)
        else:
            config[table][event][key] = value
    return apply


def _drop(table: str, *events: str) -> Callable[[dict], None]:
    def apply(config: dict) -> None:
        for event in events:
            del config[table][event]
    return apply


def _diagnosis_at_admission(config: dict) -> None:
    config["hosp/diagnoses_icd"]["_table"]["join"]["hosp/admissions"]["cols"] = ["admittime"]
    config["hosp/diagnoses_icd"]["diagnosis"]["time"] = '$admittime::"%Y-%m-%d %H:%M:%S"'


CUSTOMISATIONS = {c.name: c for c in (
    Customisation("admission_demographics", ("hosp/admissions",),
                  ("ADMISSION_INSURANCE", "ADMISSION_LANGUAGE", "ADMISSION_MARITAL_STATUS", "ADMISSION_RACE"),
                  "Each admission's insurance, language, marital status and race are events of their own at the "
                  "admission time, coded ADMISSION_INSURANCE//<insurance>, ADMISSION_LANGUAGE//<language>, "
                  "ADMISSION_MARITAL_STATUS//<marital status> and ADMISSION_RACE//<race> (UNK when missing).",
                  _admission_demographics),
    Customisation("chart_prefix", ("icu/chartevents",), ("CHART", "LAB"),
                  "ICU charted measurements (icu/chartevents) get a prefix of their own, CHART//<itemid>//<unit>, "
                  "instead of sharing LAB// with laboratory results.",
                  _set("icu/chartevents", "event", "code", "f\"CHART//{$itemid}//{$valueuom ?? 'UNK'}\"")),
    Customisation("lab_result_without_unit", ("hosp/labevents",), ("LAB",),
                  "Laboratory results are coded LAB//RESULT//<itemid>, without the unit.",
                  _set("hosp/labevents", "lab_result", "code", 'f"LAB//RESULT//{$itemid}"')),
    Customisation("lab_result_without_text", ("hosp/labevents",), ("LAB",),
                  "Laboratory results keep only their numeric value: they have no text_value.",
                  _set("hosp/labevents", "lab_result", "text_value", None)),
    Customisation("diagnosis_prefix", ("hosp/diagnoses_icd",), ("DIAGNOSIS", "DX"),
                  "Diagnoses are coded DX//ICD<version>//<code> (e.g. DX//ICD10//I10) instead of "
                  "DIAGNOSIS//ICD//<version>//<code>.",
                  _set("hosp/diagnoses_icd", "diagnosis", "code", 'f"DX//ICD{$icd_version}//{$icd_code}"')),
    Customisation("diagnosis_at_admission", ("hosp/diagnoses_icd",), ("DIAGNOSIS", "DX"),
                  "Diagnoses are timed at their admission's admission time (admittime), not its discharge time.",
                  _diagnosis_at_admission),
    Customisation("no_ed_events", ("hosp/admissions",), ("ED_REGISTRATION", "ED_OUT"),
                  "Emergency-department registration and exit times are not events: there are no ED_REGISTRATION or "
                  "ED_OUT codes.",
                  _drop("hosp/admissions", "ed_registration", "ed_out")),
    Customisation("transfer_careunit_only", ("hosp/transfers",), ("TRANSFER_TO",),
                  "Transfers are coded TRANSFER_TO//<careunit> (UNK when missing), without the event type.",
                  _set("hosp/transfers", "transfer", "code", "f\"TRANSFER_TO//{$careunit ?? 'UNK'}\"")),
)}


@dataclass(frozen=True)
class ConversionTaskPlan:
    task_id: str
    seed: int
    tables: tuple[str, ...]
    customisations: tuple[str, ...]
    subjects: tuple[int, ...]


def plan_conversion_tasks(subject_ids: list[int], count: int, seed: int, available: set[str] | None = None,
                          subjects_per_task: int = SUBJECTS_PER_TASK) -> list[ConversionTaskPlan]:
    """`count` tasks, each drawing its customisations, one more table and its subjects from its own keyed stream
    (a task does not change when `count` does). `available`: the tables present (default all); customisations and
    tables needing another are not drawn."""
    if available is not None and not set(BASE_TABLES) <= available:
        raise MissingInputError(f"MEDS conversion tasks need the tables {', '.join(BASE_TABLES)}; the release lacks "
                                f"{', '.join(sorted(set(BASE_TABLES) - available))}")
    usable = sorted(n for n, c in CUSTOMISATIONS.items() if available is None or set(c.tables) <= available)
    extras = [t for t in EXTRA_TABLES if available is None or t in available]
    plans = []
    for index in range(count):
        rng = keyed_rng(seed, FAMILY, str(index))
        names = tuple(sorted(str(n) for n in rng.choice(usable, CUSTOMISATIONS_PER_TASK, replace=False)))
        needed = {table for name in names for table in CUSTOMISATIONS[name].tables}
        extra = str(rng.choice(sorted(set(extras) - needed)))
        tables = tuple(sorted(set(BASE_TABLES) | needed | {extra}))
        drawn = rng.choice(sorted(subject_ids), min(subjects_per_task, len(subject_ids)), replace=False)
        subjects = tuple(sorted(int(s) for s in drawn))
        plans.append(ConversionTaskPlan(f"{FAMILY}_{index + 1:02d}", seed, tables, names, subjects))
    return plans


def ingested_mimic_iv(warehouse: Path) -> tuple[dict[str, Path], list[int]]:
    """The raw MIMIC-IV files the build ingested and verified (table, e.g. hosp/admissions → its csv.gz; ingest's
    record) and the subjects of its patients table."""
    with open_duckdb(str(warehouse), read_only=True) as con:
        files = con.execute(f"select path from {META_SCHEMA}.loaded_files where schema_name = ?",
                            [raw_schema("mimic_iv")]).fetchall()
        subjects = [s for (s,) in con.execute(f"select subject_id from {raw_schema('mimic_iv')}.patients "
                                              "order by 1").fetchall()]
    sources = {f"{Path(p).parent.name}/{Path(p).name.removesuffix('.csv.gz')}": Path(p) for (p,) in files}
    return sources, subjects


def customised_config(tables: tuple[str, ...], customisations: tuple[str, ...]) -> dict:
    """The standard configuration's events of `tables`, with `customisations` applied."""
    standard = yaml.safe_load(DEFAULT_EVENT_CONFIG.read_text(encoding="utf-8"))
    config = {table: copy.deepcopy(body) for table, body in standard.items() if table in tables}
    for name in customisations:
        CUSTOMISATIONS[name].apply(config)
    for body in config.values():  # a join to a table the task lacks (patients' death time) keeps its table
        for other in list((body.get("_table") or {}).get("join") or {}):
            if other not in tables:
                raise ValueError(f"customised configuration joins {other}, which the task lacks")
    return config


def write_conversion_task(plan: ConversionTaskPlan, sources: Mapping[str, Path], task_dir: Path) -> dict:
    """Write one task (layout above) from the raw release's files (`sources`: table → its csv.gz); returns its
    gold/task.json."""
    task = WorkspaceTaskLayout(task_dir)
    config = customised_config(plan.tables, plan.customisations)
    parse_event_config(config, f"{plan.task_id} event configuration")  # ours must read back
    task.workspace.mkdir(parents=True)
    (task.workspace / "event_config.yaml").write_text(
        yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=200), encoding="utf-8")
    data = task.workspace / "data"
    with open_duckdb() as con:
        con.execute("create temp table task_subjects (subject_id varchar)")
        con.executemany("insert into task_subjects values (?)", [[str(s)] for s in plan.subjects])
        for table in plan.tables:
            target = table_file(data, table)
            target.parent.mkdir(parents=True, exist_ok=True)
            source = str(sources[table]).replace("'", "''")
            con.execute(f"copy (select * from read_csv('{source}', header = true, all_varchar = true) where "
                        "subject_id in (select subject_id from task_subjects)) to "
                        f"'{str(target).replace(chr(39), chr(39) * 2)}' (header, compression gzip)")
        events = convert(parse_event_config(config), csv_relation(data), con)
    write_checked(gold_events_path(task), meds.DataSchema, events)
    summary = summarise_events(gold_events_path(task))
    customisations = [{"name": n, "description": CUSTOMISATIONS[n].description,
                       "prefixes": list(CUSTOMISATIONS[n].prefixes)} for n in plan.customisations]
    gold = {"family": FAMILY, **asdict(plan), "subjects": len(plan.subjects),
            "customisations": customisations, "expected": summary}
    task.task_json.write_text(json.dumps(gold, indent=2) + "\n", encoding="utf-8")
    task.instruction.write_text(conversion_instruction(plan, customisations), encoding="utf-8")
    return gold


def conversion_instruction(plan: ConversionTaskPlan, customisations: list[dict]) -> str:
    changes = "\n".join(f"- {c['description']}" for c in customisations)
    tables = "\n".join(f"- `data/{table}.csv.gz`" for table in plan.tables)
    return INSTRUCTION_TEMPLATE.read_text(encoding="utf-8").format(tables=tables, changes=changes,
                                                                    subjects=len(plan.subjects))
