"""The FHIR search index of a view, shared by every FHIR trial of a process."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ehrbench.fhir.search import SearchIndex


@cache
def search_index(resources_db: Path) -> SearchIndex:
    """Built once per process and view: it scans every resource."""
    return SearchIndex(resources_db)
