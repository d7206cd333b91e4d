"""Page rendering for the site: the Jinja environment over `templates/`, the `Site` every page writer renders
through (its root, data, agent colours; links kept relative) and the static assets (Plotly, the stylesheet)."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from plotly.offline import get_plotlyjs

from ehrbench.reports.model import Metric, ReportData
from ehrbench.reports.site_format import data_value, format_interval, format_value, plain, pretty_json, truncate
from ehrbench.reports.site_links import failures_href, task_href

TEMPLATES_DIR = Path(__file__).parent / "templates"


def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES_DIR), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.globals.update(failures_href=failures_href, task_href=task_href, fmt=format_value,
                       interval=format_interval, data_value=data_value, pretty_json=pretty_json)
    env.filters.update(plain=plain, truncate_text=truncate)
    return env


@dataclass
class Site:
    data: ReportData
    root: Path
    env: Environment
    colors: dict[str, str]

    def page(self, relative: str, template: str, title: str, section: str, **context: Any) -> None:
        """Render one page; `root` is the way back to the site root, so every link stays relative."""
        html = self.env.get_template(template).render(
            root="../" * relative.count("/"), title=title, section=section, run_id=self.data.run_id,
            build_id=self.data.build_id, generated_at=self.data.generated_at, **context)
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")

    def agents(self, seen: Iterable[str] = ()) -> list[str]:
        """The report's agents in its order, then any others the rows mention."""
        return list(dict.fromkeys([*self.data.agents, *seen]))

    def suites(self, seen: Iterable[str] = ()) -> list[str]:
        return list(dict.fromkeys([*self.data.suites, *seen]))

    def metric(self, suite: str, key: str) -> Metric:
        for metric in self.data.metrics.get(suite, []):
            if metric.key == key:
                return metric
        return Metric(key=key, label=key, scale="")


def write_assets(root: Path) -> None:
    assets = root / "assets"
    assets.mkdir()
    (assets / "plotly.min.js").write_text(get_plotlyjs(), encoding="utf-8")
    shutil.copy2(TEMPLATES_DIR / "style.css", assets / "style.css")
