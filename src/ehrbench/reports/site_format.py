"""How the site's pages show values: metric values and intervals by scale, cell data values, JSON, shortened text,
manifest cells and table columns."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ehrbench.reports.model import Estimate

QUESTION_PREVIEW_CHARS = 160


def format_value(value: float | None, scale: str) -> str:
    """A metric value as the tables show it, by `Metric.scale`."""
    if value is None:
        return "—"
    if scale == "share":
        return f"{value * 100:.1f} %"
    if scale == "score":
        return f"{value * 100:.1f}"
    if scale == "usd":
        return f"${value:.4f}"
    if scale == "seconds":
        return f"{value:.2f} s"
    if scale == "count":
        return f"{value:,.0f}"
    return f"{value:.4g}"


def format_interval(estimate: Estimate, scale: str) -> str:
    """`[lo, hi]`, or empty when the estimate has no interval."""
    if estimate.low is None or estimate.high is None:
        return ""
    return f"[{format_value(estimate.low, scale)}, {format_value(estimate.high, scale)}]"


def data_value(value: float | None) -> str:
    """The machine-readable value of a cell (data-value)."""
    return "" if value is None else str(round(value, 6))


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def truncate(text: str | None, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def plain(value: Any) -> str:
    """A cell of a manifest table: thousands separators for integers, lists of names joined, other lists as JSON."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return ", ".join(value)
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def table_columns(rows: Sequence[dict], preferred: Sequence[str]) -> list[str]:
    """The preferred columns first, then any other key the rows have."""
    keys = dict.fromkeys(key for row in rows for key in row)
    return [c for c in preferred if c in keys] + [k for k in keys if k not in preferred]
