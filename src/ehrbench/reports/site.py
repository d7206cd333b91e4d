"""The static HTML dashboard of an evaluation report: `render_site(data, out)` writes plain pages that work from
file:// and any static host (no CDN, no fetch of data files: everything is embedded), and publishes them atomically
(a reader never sees a half-written site, a failed render leaves the previous one in place).

Layout of a site:

    index.html  breakdowns.html  curves.html  trends.html  build.html
    assets/plotly.min.js  assets/style.css
    failures/<page_name(agent)>--<suite>.html
    tasks/index.html  tasks/<suite>/<page_name(task_id)>.html
    gx/  (the build's Great Expectations Data Docs, when given)

The pages are written by site_leaderboard (index, failures), site_breakdowns, site_curves, site_trends,
site_build_page and site_tasks (with site_transcripts), through site_render (templates, assets); site_links and
site_format hold the page names, links and value formatting. This module renders and publishes the whole site and
re-exports the public names of those modules.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from ehrbench.reports import charts
from ehrbench.reports.model import ReportData
from ehrbench.reports.site_breakdowns import BREAKDOWN_CHART_VALUES, FACET_LABELS, write_breakdowns
from ehrbench.reports.site_build_page import FOLDED_JSON_CHARS, write_build
from ehrbench.reports.site_curves import write_curves
from ehrbench.reports.site_format import (
    QUESTION_PREVIEW_CHARS,
    data_value,
    format_interval,
    format_value,
    pretty_json,
    truncate,
)
from ehrbench.reports.site_leaderboard import failure_page_pairs, leaderboard_columns, write_failures, write_leaderboard
from ehrbench.reports.site_links import failures_href, page_name, task_href
from ehrbench.reports.site_render import TEMPLATES_DIR, Site, write_assets
from ehrbench.reports.site_render import environment as _environment  # looked up here at render time (tests swap it)
from ehrbench.reports.site_tasks import FOLDED_LIST_ITEMS, write_tasks
from ehrbench.reports.site_transcripts import TOOL_RESULT_CHARS, transcript_view
from ehrbench.reports.site_trends import write_trends

__all__ = [
    "BREAKDOWN_CHART_VALUES", "DATA_DOCS_DIR", "FACET_LABELS", "FOLDED_JSON_CHARS", "FOLDED_LIST_ITEMS",
    "QUESTION_PREVIEW_CHARS", "TEMPLATES_DIR", "TOOL_RESULT_CHARS", "data_value", "failures_href", "format_interval",
    "format_value", "leaderboard_columns", "page_name", "pretty_json", "render_site", "task_href", "transcript_view",
    "truncate",
]

DATA_DOCS_DIR = "gx"  # where the build's GX Data Docs go in the site


def render_site(data: ReportData, out: Path, data_docs: Path | None = None) -> Path:
    """Render the report into `out` (replaced whole) and return the path of its index.html.

    `data_docs` is the build's Great Expectations Data Docs folder, copied into the site as `gx/` (where
    `data.build.data_docs` points): anything put into `out` beforehand would be lost when the new site is swapped in.
    A folder that does not exist is skipped, and the build page then says the Data Docs are not in the site."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}-{secrets.token_hex(6)}"
    staging.mkdir()
    try:
        if data_docs is not None and Path(data_docs).is_dir():
            shutil.copytree(data_docs, staging / DATA_DOCS_DIR)
        _write_site(data, staging)
        _swap_in(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out / "index.html"


def _swap_in(staging: Path, out: Path) -> None:
    """Replace `out` by `staging` with two renames, so `out` is always either the old site or the new one."""
    if not out.exists() and not out.is_symlink():
        staging.rename(out)
        return
    retired = out.parent / f".{out.name}-old-{secrets.token_hex(6)}"
    out.rename(retired)
    try:
        staging.rename(out)
    except BaseException:
        retired.rename(out)
        raise
    if retired.is_symlink() or retired.is_file():
        retired.unlink()
    else:
        shutil.rmtree(retired, ignore_errors=True)


def _write_site(data: ReportData, root: Path) -> None:
    site = Site(data=data, root=root, env=_environment(), colors=charts.agent_colors(_all_agents(data)))
    write_assets(root)
    task_pages = {(task.suite, task.task_id) for task in data.tasks}
    failure_pages = failure_page_pairs(data)
    write_leaderboard(site, failure_pages)
    write_breakdowns(site)
    write_curves(site)
    write_trends(site)
    write_build(site)
    write_failures(site, failure_pages, task_pages)
    write_tasks(site)


def _all_agents(data: ReportData) -> list[str]:
    seen = [row.agent for rows in data.leaderboard.values() for row in rows]
    return list(dict.fromkeys([*data.agents, *seen, *(p.agent for p in data.trends)]))
