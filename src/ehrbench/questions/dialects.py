"""Gold SQL is written once, in DuckDB's dialect, and transpiled to SQLite for the exported databases.

sqlglot transpiles most of it; its SQLite generator writes interval arithmetic, `date_trunc` and `epoch` in
forms SQLite does not run (`x - INTERVAL '1' YEAR`, `TIMESTAMP_TRUNC`, `TIME_TO_UNIX`). `to_sqlite` rewrites
those into SQLite's date functions, the way EHRSQL's gold SQL writes them (`datetime(x, '-1 year')`,
`datetime(x, 'start of year')`, `strftime('%s', x)`), before generating. Every generated question runs in both
dialects and the answers are compared (the questions suite), so a construct this module misses shows up there.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

_UNITS = {"YEAR": "year", "YEARS": "year", "MONTH": "month", "MONTHS": "month", "DAY": "day", "DAYS": "day",
          "HOUR": "hour", "HOURS": "hour", "MINUTE": "minute", "MINUTES": "minute"}
_TRUNC_UNITS = {"YEAR": "year", "MONTH": "month", "DAY": "day"}


class UntranspilableSql(ValueError):
    """DuckDB SQL with a construct that has no SQLite form here."""


def to_sqlite(sql: str) -> str:
    """The SQLite form of one DuckDB query (timestamps compared as 'YYYY-MM-DD HH:MM:SS' text, as exported)."""
    tree = _bottom_up(sqlglot.parse_one(sql, read="duckdb"), _sqlite_dates)
    return tree.sql(dialect="sqlite")


def _bottom_up(node: exp.Expression, rewrite) -> exp.Expression:
    """Rewrite the children first, so that a rewritten node sees its children's SQLite forms."""
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, _bottom_up(value, rewrite))
        elif isinstance(value, list):
            node.set(key, [_bottom_up(v, rewrite) if isinstance(v, exp.Expression) else v for v in value])
    return rewrite(node)


def _sqlite_dates(node: exp.Expression) -> exp.Expression:
    if isinstance(node, (exp.Add, exp.Sub)) and isinstance(node.expression, exp.Interval):
        amount, unit = _interval(node.expression)
        sign = "-" if isinstance(node, exp.Sub) else "+"
        if amount.startswith("-"):
            sign, amount = ("+" if sign == "-" else "-"), amount[1:]
        return _datetime(node.this, f"{sign}{amount} {unit}")
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
        unit = node.text("unit").upper()
        if unit not in _TRUNC_UNITS:
            raise UntranspilableSql(f"date_trunc to {unit!r} has no SQLite form; use year, month or day")
        return _datetime(node.this, f"start of {_TRUNC_UNITS[unit]}")
    if isinstance(node, exp.TimeToUnix):
        # seconds since the epoch, as a number (strftime('%s') returns text)
        return exp.Cast(this=exp.func("strftime", exp.Literal.string("%s"), _as_text(node.this)),
                        to=exp.DataType.build("INTEGER"))
    if isinstance(node, exp.Cast) and node.to.is_type(*exp.DataType.TEMPORAL_TYPES) \
            and isinstance(node.this, exp.Literal):
        # TIMESTAMP '2100-12-31 23:59:00' → '2100-12-31 23:59:00': exported times are text of that form
        return exp.Literal.string(_timestamp_text(node.this.this, node.to))
    return node


def _interval(interval: exp.Interval) -> tuple[str, str]:
    unit = interval.text("unit").upper()
    amount = interval.this.name if isinstance(interval.this, exp.Literal) else None
    if not unit and amount and " " in amount:  # INTERVAL '24 months'
        amount, unit = amount.split(" ", 1)
        unit = unit.strip().upper()
    if amount is None or unit not in _UNITS:
        raise UntranspilableSql(f"interval {interval.sql('duckdb')!r}: expected a constant amount of years, months, "
                                "days, hours or minutes")
    return amount.strip(), _UNITS[unit]


def _datetime(value: exp.Expression, modifier: str) -> exp.Expression:
    # datetime(x, 'start of year', '-1 year') when x is itself a datetime(...) call: one call, as SQLite reads it
    if isinstance(value, exp.Anonymous) and value.name.lower() == "datetime":
        return exp.Anonymous(this="datetime", expressions=[*value.expressions, exp.Literal.string(modifier)])
    return exp.Anonymous(this="datetime", expressions=[_as_text(value), exp.Literal.string(modifier)])


def _as_text(value: exp.Expression) -> exp.Expression:
    if isinstance(value, exp.Cast) and isinstance(value.this, exp.Literal):
        return exp.Literal.string(_timestamp_text(value.this.this, value.to))
    return value


def _timestamp_text(text: str, to: exp.DataType) -> str:
    text = text.strip().replace("T", " ")
    if to.is_type(exp.DataType.Type.DATE):
        return text[:10]
    return text if len(text) > 10 else f"{text} 00:00:00"
