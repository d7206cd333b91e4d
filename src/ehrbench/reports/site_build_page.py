"""The build page (build.html): the build's manifest (inputs, row counts, stages, validation), its quarantined
questions and the link to its Data Docs when they are in the site."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ehrbench.reports import charts
from ehrbench.reports.model import BuildInfo
from ehrbench.reports.site_format import pretty_json, table_columns
from ehrbench.reports.site_links import site_relative
from ehrbench.reports.site_render import Site

FOLDED_JSON_CHARS = 1_500  # pretty JSON longer than this starts folded
_QUARANTINE_COLUMNS = ("question_id", "suite", "db", "template_id", "failed_expectations")


def write_build(site: Site) -> None:
    build = site.data.build
    view = _build_view(build, site.root) if build is not None else None
    site.page("build.html", "build.html.j2", "Build", "build", build=view)


def _build_view(build: BuildInfo, root: Path) -> dict:
    manifest = build.manifest or {}
    stages = {name: float(stage["seconds"]) for name, stage in (manifest.get("stages") or {}).items()
              if isinstance(stage, dict) and isinstance(stage.get("seconds"), int | float)}
    shown = {"build_id", "created_at", "finished_at", "parameters", "seed", "sources", "packages", "inputs",
             "raw_row_counts", "built_row_counts", "validation", "questions", "dq", "stages"}
    return {
        "build_id": build.build_id,
        "manifest": manifest,
        "parameters": pretty_json(manifest.get("parameters", {})),
        "inputs": [_input_row(item) for item in manifest.get("inputs") or [] if isinstance(item, dict)],
        "row_counts": [(title, manifest.get(key)) for title, key in
                       (("Raw rows", "raw_row_counts"), ("Built rows", "built_row_counts")) if manifest.get(key)],
        "json_sections": [_json_section(title, manifest.get(key)) for key, title in
                          (("validation", "Validation"), ("questions", "Questions"), ("dq", "DQ tasks"))
                          if manifest.get(key)],
        "other_sections": [_json_section(key, value) for key, value in manifest.items()
                           if key not in shown and value not in (None, {}, [])],
        "stages": stages,
        "stages_chart": charts.build_stages_chart(stages) if stages else None,
        "quarantine": build.quarantine or [],
        "quarantine_columns": table_columns(build.quarantine or [], _QUARANTINE_COLUMNS),
        "data_docs": build.data_docs,
        "data_docs_href": _data_docs_href(build.data_docs, root),
    }


def _input_row(item: dict) -> dict:
    sha = item.get("sha256") or ""
    return {"dataset": item.get("dataset", ""), "table": item.get("table", ""), "status": item.get("status", ""),
            "verification": item.get("verification", ""), "rows": item.get("rows"), "sha256": sha,
            "sha256_short": sha[:12]}


def _json_section(title: str, value: Any) -> dict:
    text = pretty_json(value)
    return {"title": title, "json": text, "open": len(text) <= FOLDED_JSON_CHARS}


def _data_docs_href(data_docs: str | None, root: Path) -> str | None:
    """A link to the Data Docs only if they are really in the site (a dangling link is worse than none)."""
    relative = site_relative(data_docs) if data_docs else None
    if relative is None:
        return None
    target = root / relative
    if target.is_dir() and (target / "index.html").is_file():
        return f"{relative}/index.html"
    return str(relative) if target.is_file() else None
