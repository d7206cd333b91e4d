"""Fill one template's slots: sampled values, drawn operators and time expressions → question text and gold SQL."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

import jinja2
import numpy as np

from ehrbench.errors import EhrbenchError
from ehrbench.questions.operators import Operator, draw_operator
from ehrbench.questions.templates import ANCHOR, Template, time_family
from ehrbench.questions.time_filters import TimeFilter, draw_exact, draw_global, draw_within, parse_time, timestamp_sql

_SQL = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)
_SPACES = re.compile(r"\s+")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([?.,!])")


class InstantiationError(EhrbenchError, ValueError):
    """A template whose SQL or question could not be filled (names the template and the database)."""


@dataclass(frozen=True)
class Instance:
    """A filled template: what the question says and what its gold SQL asks (DuckDB dialect)."""

    template: Template
    database: str
    values: dict[str, object]  # value slot → sampled value
    operators: dict[str, Operator]
    times: dict[str, TimeFilter]
    question: str  # the template's own wording
    sql: str

    @property
    def slot_texts(self) -> dict[str, str]:
        """Every non-empty slot's text as it reads in the question (what a paraphrase must keep)."""
        texts = {name: value_text(v) for name, v in self.values.items()}
        texts |= {name: op.text for name, op in self.operators.items()}
        texts |= {name: t.text for name, t in self.times.items() if t.text}
        return texts


def value_text(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def sql_literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return repr(value.item() if hasattr(value, "item") else value)
    return "'" + str(value).replace("'", "''") + "'"


@lru_cache(maxsize=4096)
def _compiled(source: str) -> jinja2.Template:
    """A template's SQL compiled once per process (compiling costs more than rendering)."""
    return _SQL.from_string(source)


def fill(wording: str, values: dict, operators: dict[str, Operator], times: dict[str, TimeFilter]) -> str:
    texts = {name: value_text(v) for name, v in values.items()}
    texts |= {name: op.text for name, op in operators.items()}
    texts |= {name: t.text for name, t in times.items()}
    return fill_texts(wording, texts)


def fill_texts(wording: str, texts: Mapping[str, str]) -> str:
    """`wording` with each {slot} replaced by its text (a slot without one reads "", like an unused time slot),
    and the spaces an empty slot leaves closed up."""
    text = wording.format_map(defaultdict(str, texts))
    return _SPACE_BEFORE_PUNCTUATION.sub(r"\1", _SPACES.sub(" ", text)).strip()


def instantiate(template: Template, database: str, row: dict, rng: np.random.Generator, now: datetime) -> Instance:
    """Fill `template` for `database` with one candidate `row` (its value columns, and `anchor_time` to aim the
    global time expressions at); operators and time expressions are drawn from `rng`."""
    missing = [slot for slot in template.value_slots if slot not in row]
    if missing:
        raise InstantiationError(f"template {template.id} ({database}): its values query returns no column(s) "
                                 f"{missing}; columns were {sorted(row)}")
    values = {slot: row[slot] for slot in template.value_slots}
    anchor = parse_time(row.get(ANCHOR))
    operators = {name: draw_operator(rng, name) for name in template.operators}
    times: dict[str, TimeFilter] = {}
    for slot in template.time:
        family = time_family(slot)
        if family == "global":
            times[slot] = draw_global(rng, list(template.time_kinds(slot)), now, anchor)
        elif family == "exact":
            times[slot] = draw_exact(rng, now, template.time_kinds(slot))
        else:
            times[slot] = draw_within(rng, now, template.time_kinds(slot))
    question = fill(template.question, values, operators, times)
    sql = ""
    if template.answerable:
        context = {slot: sql_literal(v) for slot, v in values.items()} | operators | times
        context["now"] = timestamp_sql(now)
        try:
            sql = _compiled(template.sql[database]).render(**context)
        except (jinja2.TemplateError, ValueError) as exc:
            raise InstantiationError(f"template {template.id} ({database}): its SQL does not render: {exc}") from None
        sql = _SPACES.sub(" ", sql).strip()
    return Instance(template, database, values, operators, times, question, sql)
