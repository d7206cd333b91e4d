"""EHRSQL-2024 scoring: the published scorer's SQL post-processing and answer comparison
(docs/benchmarks.md#ehrsql-2024-answer-comparison-and-reliability-score).

Two answer forms, both strings of sorted rows:

- `format_answer` — what the published `answer.json` stores (float cells rounded to 3 decimals, other cells `str`):
  the gold answer string of every question (`answer_text`);
- `scorer_answer` — what the published scorer (`scoring_program/scoring_utils.py`) compares: every cell that
  Python's `float()` reads is rounded to 3 decimals, so `94`, `94.0` and `'94'` all become `'94.0'`; other cells
  `str`; rows sorted, the first 100. `answers_match` compares two results in this form; an answer string (of
  `answer.json`) is read back into its rows first, so it compares as the executed rows it was made from.

`post_process_sql` rewrites a gold or predicted SQLite query as the published scorer does before executing either.
"""

from __future__ import annotations

import ast
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
# MySQL date arithmetic the scorer turns into SQLite's: DATE_SUB(NOW(), INTERVAL 2 DAY) → datetime(NOW(), '-2 days').
# The base is a call without arguments or a quoted literal; upper case only, as the scorer matches it.
_DATE_ARITHMETIC = re.compile(
    r"(?P<op>DATE_SUB|DATE_ADD)\((?P<base>\w+\(\)|'[^']+')[, ]+ INTERVAL (?P<n>\d+) (?P<unit>MONTH|YEAR|DAY)\)")


def _sqlite_date_arithmetic(match: re.Match) -> str:
    unit = match["unit"].lower()
    unit = unit if match["n"] == "1" else unit + "s"  # '-1 day' but '-2 days' (and '-01 days')
    sign = "-" if match["op"] == "DATE_SUB" else "+"
    return f"datetime({match['base']}, '{sign}{match['n']} {unit}')"


def post_process_sql(sql: str, current_time: str = CURRENT_TIME) -> str:
    """The published scorer's rewrite, in its order: collapse whitespace and strip; join split operators
    (`> =`, `< =`, `! =`); MySQL DATE_SUB/DATE_ADD(…, INTERVAL n UNIT) → SQLite datetime(…, '±n unit[s]'); the
    current time for `current_time`, `'now'` and `NOW()`, its date for `current_date` and `CURDATE()`, its time of
    day for `CURTIME()` (plain substring replacements, case-sensitive); the vital-sign placeholders → their normal
    range; `%y` → `%Y`, `%j` → `%J`."""
    today, _, clock = current_time.partition(" ")
    query = re.sub("[ ]+", " ", sql.replace("\n", " ")).strip()
    query = query.replace("> =", ">=").replace("< =", "<=").replace("! =", "!=")
    query = _DATE_ARITHMETIC.sub(_sqlite_date_arithmetic, query)
    for token, value in (("current_time", current_time), ("current_date", today), ("'now'", current_time),
                         ("NOW()", current_time), ("CURDATE()", today), ("CURTIME()", clock)):
        query = query.replace(token, f"'{value}'")
    query = replace_vital_ranges(query)
    return query.replace("%y", "%Y").replace("%j", "%J")


def prepare_gold_sql(sql: str, current_time: str = CURRENT_TIME) -> str:
    """A gold (or predicted) query as the published scorer executes it: `post_process_sql`."""
    return post_process_sql(sql, current_time)


def replace_vital_ranges(query: str) -> str:
    """The first `<vital>_lower` and `<vital>_upper` placeholders (each after whitespace) → the vital's normal range,
    when both name the same known vital sign; otherwise the query is left alone."""
    lower, upper = _LOWER.findall(query), _UPPER.findall(query)
    if not (lower and upper):
        return query
    lower_expr, upper_expr = lower[0], upper[0]
    names = set(re.findall("([a-zA-Z0-9_]+)_lower", lower_expr) + re.findall("([a-zA-Z0-9_]+)_upper", upper_expr))
    if len(names) != 1:
        return query
    vital = names.pop().replace("_", " ")
    if vital not in VITAL_RANGES:
        return query
    low, high = VITAL_RANGES[vital]
    return query.replace(lower_expr, f"{low}").replace(upper_expr, f"{high}")


def format_cell(cell: object) -> str:
    """A cell as answer.json stores it: floats rounded to 3 decimals, everything else as `str` (None → 'None')."""
    if type(cell) is float:
        return str(round(cell, FLOAT_DIGITS))
    return str(cell)


def format_answer(rows: Iterable[Sequence[object]]) -> str:
    """The answer.json string: the rows' cells as strings, rows sorted, at most 100 rows."""
    return str(sorted([[format_cell(cell) for cell in row] for row in rows])[:MAX_ROWS])


def scorer_cell(cell: object) -> str:
    """A cell as the published scorer compares it: whatever `float()` reads (ints, floats, numeric text, booleans)
    rounded to 3 decimals, else `str` (None → 'None')."""
    try:
        number = float(cell)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return str(cell)
    return str(round(number, FLOAT_DIGITS))


def answer_rows(answer: str) -> list[list[object]] | None:
    """The rows of an answer string (answer.json's form), or None when the string is not one (e.g. free text)."""
    try:
        rows = ast.literal_eval(answer)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if isinstance(rows, list) and all(isinstance(row, list | tuple) for row in rows):
        return [list(row) for row in rows]
    return None


def scorer_answer(result: str | Iterable[Sequence[object]]) -> str:
    """The published scorer's string of a result: rows, or an answer string read back into its rows (any other
    string, e.g. the scorer's 'null' or 'error_pred', is kept as it is)."""
    if isinstance(result, str):
        rows = answer_rows(result)
        if rows is None:
            return result
        result = rows
    return str(sorted([[scorer_cell(cell) for cell in row] for row in result])[:MAX_ROWS])


def answers_match(a: str | Iterable[Sequence[object]], b: str | Iterable[Sequence[object]]) -> bool:
    """True when two results are equal under the published scorer's comparison (`scorer_answer`). Each side is
    executed rows or an answer string (e.g. a value of `answer.json`)."""
    return scorer_answer(a) == scorer_answer(b)
