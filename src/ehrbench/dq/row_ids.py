"""Row ids of audit tables: stable under mutation because they are computed once, on the pristine row
(docs/benchmarks.md#data-quality-error-injection: the first 16 hex digits of sha1(table + "|" + "|".join(values)))."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def row_id(table: str, values: Iterable[object]) -> str:
    """The id of one pristine row; None is written as the empty string, as in the agent-visible CSV."""
    text = table + "|" + "|".join("" if value is None else str(value) for value in values)
    return hashlib.sha1(text.encode()).hexdigest()[:16]
