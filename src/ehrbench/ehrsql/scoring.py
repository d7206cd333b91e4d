"""EHRSQL-2024 scoring: the published scorer's SQL preprocessing and answer comparison
(docs/benchmarks.md#ehrsql-2024-answer-comparison-and-reliability-score).

`prepare_gold_sql` rewrites a gold (or predicted) SQLite query the way the published scorer does
before executing it; `format_answer` turns executed rows into the string that the published
`answer.json` stores, and `answers_match` compares two results in that form.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

CURRENT_TIME = "2100-12-31 23:59:00"
MAX_ROWS = 100
FLOAT_DIGITS = 3

# Normal ranges of the vital-sign placeholders `<vital>_lower` / `<vital>_upper`
# (docs/benchmarks.md#vital-sign-normal-ranges).
VITAL_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (35.5, 38.1),
    "sao2": (95.0, 100.0),
    "heart rate": (60.0, 100.0),
    "respiration": (12.0, 18.0),
    "systolic bp": (90.0, 120.0),
    "diastolic bp": (60.0, 90.0),
    "mean bp": (60.0, 110.0),
}

_LOWER = re.compile(r"[ \n]+([a-zA-Z0-9_]+_lower)")
_UPPER = re.compile(r"[ \n]+([a-zA-Z0-9_]+_upper)")


def prepare_gold_sql(sql: str, current_time: str = CURRENT_TIME) -> str:
    """Collapse whitespace, fix split operators, put the current time in for `current_time` and
    `'now'`, replace the vital placeholders with their normal range, and map `%y`→`%Y`, `%j`→`%J`."""
    query = re.sub("[ ]+", " ", sql.replace("\n", " ")).strip()
    query = query.replace("> =", ">=").replace("< =", "<=").replace("! =", "!=")
    query = query.replace("current_time", f"'{current_time}'")
    query = query.replace("'now'", f"'{current_time}'")

    lower = _LOWER.findall(query)
    upper = _UPPER.findall(query)
    if lower and upper:
        lower_expr, upper_expr = lower[0], upper[0]
        names = set(re.findall("([a-zA-Z0-9_]+)_lower", lower_expr) + re.findall("([a-zA-Z0-9_]+)_upper", upper_expr))
        if len(names) == 1:
            vital = names.pop().replace("_", " ")
            if vital in VITAL_RANGES:
                low, high = VITAL_RANGES[vital]
                query = query.replace(lower_expr, f"{low}").replace(upper_expr, f"{high}")

    return query.replace("%y", "%Y").replace("%j", "%J")


def format_cell(cell: object) -> str:
    """Floats rounded to 3 decimals, everything else as `str` (so None → 'None')."""
    if type(cell) is float:
        return str(round(cell, FLOAT_DIGITS))
    return str(cell)


def format_answer(rows: Iterable[Sequence[object]]) -> str:
    """The published answer string: the rows' cells as strings, rows sorted, at most 100 rows."""
    return str(sorted([[format_cell(cell) for cell in row] for row in rows])[:MAX_ROWS])


def _as_answer(result: str | Iterable[Sequence[object]]) -> str:
    return result if isinstance(result, str) else format_answer(result)


def answers_match(a: str | Iterable[Sequence[object]], b: str | Iterable[Sequence[object]]) -> bool:
    """True when two results agree under the EHRSQL-2024 comparison. Each side is either executed rows
    or an already formatted answer string (e.g. a value of `answer.json`)."""
    return _as_answer(a) == _as_answer(b)
