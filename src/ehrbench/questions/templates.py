"""Question templates as data: YAML files under `ehrbench/questions/templates/` (one file per question category).

One template, in YAML:

    - id: lab_value_exact                      # unique, snake_case; part of every question id made from it
      category: labs
      question: What was the {exact} measured value of a {lab_name} lab test of patient {patient_id} {time}?
      phrasings:                               # >= 3 offline paraphrases with the same {slots}
        - ...
      operators: [agg]                         # operator slots (ehrbench.questions.operators)
      time:                                    # time slots: global families, or exact / within kinds
        time: [none, absolute, relative, hospital_visit]
        exact: exact
      values:                                  # per database: candidate slot values, one row per candidate;
        mimic_iv: select ... as patient_id, ... as lab_name, ... as anchor_time from ...
      sql:                                     # per database: the gold SQL, DuckDB dialect, Jinja
        mimic_iv: select ... {{ patient_id }} ... {{ time.on('labevents.charttime') }} {{ exact.order(...) }}

Databases: `mimic_iv` (the ehrsql2024 profile's database) and `eicu` (the ehrsql_eicu profile's); a template
leaves out a database whose data lacks the concept. Unanswerable templates (`answerable: false`) have values but
no SQL. In SQL, `{{ slot }}` is the value as a SQL literal, `{{ agg }}` an operator's fragment, `{{ time.on(col) }}`
/ `{{ time.visit('admissions'|'icustays') }}` (eICU: `{{ time.visit('patient', 'hospital'|'icu') }}`) /
`{{ exact.order(col) }}` / `{{ within.between(t1, t2, v1, v2) }}`
the time slots' fragments, `{{ now }}` the build's current time.
"""

from __future__ import annotations

import re
import string
from functools import cached_property
from pathlib import Path
from typing import Literal, NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ehrbench.errors import EhrbenchError
from ehrbench.profiles import BenchmarkDatabase, VarGroup
from ehrbench.questions.operators import OPERATORS
from ehrbench.questions.time_filters import EXACT_KINDS, GLOBAL_FAMILIES, WITHIN_KINDS

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
DATABASES = ("mimic_iv", "eicu")
# the question categories of EHRSQL (answerable) that the template set must cover
CATEGORIES = ("demographics", "admissions", "icu_stays", "diagnoses", "procedures", "prescriptions", "labs",
              "vitals", "intake_output", "microbiology", "cost", "survival", "population")
ANCHOR = "anchor_time"
MIN_PHRASINGS = 3
_ID = re.compile(r"^[a-z][a-z0-9_]*$")


class TemplateError(EhrbenchError, ValueError):
    """A template file that does not say what the loader expects (the message names the file and template)."""


class Template(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    category: str
    question: str
    phrasings: list[str] = Field(default_factory=list)
    answerable: bool = True
    operators: list[str] = Field(default_factory=list)
    time: dict[str, list[str] | Literal["global", "exact", "within"]] = Field(default_factory=dict)
    values: dict[str, str] = Field(default_factory=dict)
    sql: dict[str, str] = Field(default_factory=dict)
    max_rows: int = 100
    note: str | None = None

    @field_validator("id")
    @classmethod
    def _snake_case(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError(f"template id {value!r} must be snake_case (a-z, 0-9, _)")
        return value

    @field_validator("operators")
    @classmethod
    def _known_operators(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in OPERATORS]
        if unknown:
            raise ValueError(f"unknown operator slot(s) {unknown}; expected some of {', '.join(OPERATORS)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Template:
        databases = set(self.values) | set(self.sql)
        if unknown := sorted(databases - set(DATABASES)):
            raise ValueError(f"unknown database(s) {unknown}; expected some of {DATABASES}")
        if self.answerable and not self.sql:
            raise ValueError("an answerable template needs `sql` for at least one database")
        if not self.answerable and self.sql:
            raise ValueError("an unanswerable template has no `sql`")
        if not self.answerable and self.category != self.id:
            raise ValueError(f"an unanswerable template's id is its category (questions name it as template_id); "
                             f"got id {self.id!r}, category {self.category!r}")
        for slot, spec in self.time.items():
            family = time_family(slot)
            if isinstance(spec, str):
                if spec != family:
                    raise ValueError(f"time slot {slot!r} is a {family} slot (by its name), not {spec!r}")
            elif unknown := sorted(set(spec) - set(_TIME_KINDS[family])):
                raise ValueError(f"time slot {slot!r}: unknown {family} kind(s) {unknown}; expected some of "
                                 f"{_TIME_KINDS[family]}")
        slots = _placeholders(self.question)
        if len(self.phrasings) < MIN_PHRASINGS:
            raise ValueError(f"needs at least {MIN_PHRASINGS} offline phrasings, has {len(self.phrasings)}")
        order = slot_order(self.question)
        for phrasing in self.phrasings:
            if slot_order(phrasing) != order:
                raise ValueError(f"phrasing {phrasing!r} has slots {slot_order(phrasing)}; the question has "
                                 f"{order} (same slots, same order)")
        if missing := sorted(set(self.operators) - slots):
            raise ValueError(f"operator slot(s) {missing} not used in the question")
        if missing := sorted(set(self.time) - slots):
            raise ValueError(f"time slot(s) {missing} not used in the question")
        value_slots = slots - set(self.operators) - set(self.time)
        databases = set(self.sql) if self.answerable else set(self.values)
        if value_slots and (missing := sorted(databases - set(self.values))):
            raise ValueError(f"`values` missing for database(s) {missing}: slots {sorted(value_slots)} need them")
        return self

    @cached_property
    def slots(self) -> set[str]:
        return _placeholders(self.question)

    @cached_property
    def value_slots(self) -> list[str]:
        """Slots filled with sampled values (not operators or time expressions), in question order."""
        return [s for s in slot_order(self.question) if s not in self.operators and s not in self.time]

    def time_kinds(self, slot: str) -> tuple[str, ...]:
        """The kinds (exact / within) or families (global) a time slot draws from."""
        spec = self.time[slot]
        return tuple(spec) if isinstance(spec, list) else _TIME_KINDS[time_family(slot)]

    def asks(self, database: str) -> bool:
        """Whether questions of this template are asked of `database`: answerable ones where they have SQL,
        unanswerable ones where they have values (or everywhere, when they need none)."""
        if self.answerable:
            return database in self.sql
        return database in self.values or not self.value_slots

    @property
    def patient_scoped(self) -> bool:
        return "patient_id" in self.value_slots


_TIME_KINDS = {"global": GLOBAL_FAMILIES, "exact": EXACT_KINDS, "within": WITHIN_KINDS}


def time_family(slot: str) -> str:
    """A time slot's family from its name: exact*, within*, else global (time, time2, …)."""
    return "exact" if slot.startswith("exact") else "within" if slot.startswith("within") else "global"


def slot_order(text: str) -> list[str]:
    """The {slots} of a wording, each once, in the order they first appear."""
    return list(dict.fromkeys(name for _, name, _, _ in string.Formatter().parse(text) if name))


def _placeholders(text: str) -> set[str]:
    try:
        return {name for _, name, _, _ in string.Formatter().parse(text) if name}
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from None


def load_templates(directory: Path = TEMPLATES_DIR) -> list[Template]:
    """Every template of every `*.yaml` under `directory` (sorted by file, then as written); ids are unique."""
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise TemplateError(f"no template files (*.yaml) in {directory}")
    templates: list[Template] = []
    where: dict[str, Path] = {}
    for path in files:
        try:
            items = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise TemplateError(f"{path}: not valid YAML ({exc})") from None
        if not isinstance(items, list):
            raise TemplateError(f"{path}: expected a list of templates, got {type(items).__name__}")
        for index, item in enumerate(items):
            name = item.get("id", f"#{index + 1}") if isinstance(item, dict) else f"#{index + 1}"
            try:
                template = Template.model_validate(item)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'template'}: {e['msg']}" for e in exc.errors())
                raise TemplateError(f"{path}: template {name}: {problems}") from None
            if template.id in where:
                raise TemplateError(f"{path}: template id {template.id!r} is also used in {where[template.id]}")
            where[template.id] = path
            templates.append(template)
    return templates


class ProfileDatabase(NamedTuple):
    """The benchmark database a template database key runs on (`db/<profile>/<database>` of a build), and the dbt
    var group that holds its current time (`ProfileVars.time_shift(var_group)`)."""

    profile: str
    database: str
    var_group: VarGroup

    @property
    def benchmark(self) -> BenchmarkDatabase:
        return BenchmarkDatabase(self.profile, self.database)


PROFILE_OF: dict[str, ProfileDatabase] = {
    "mimic_iv": ProfileDatabase(profile="ehrsql2024", database="mimic_iv", var_group="ehrsql2024"),
    "eicu": ProfileDatabase(profile="ehrsql_eicu", database="eicu", var_group="ehrsql_eicu"),
}
