"""The report's plotly charts, each as an HTML `<div class="chart" data-chart="<name>">` snippet.

The snippets call the global `Plotly` that every page loads from `assets/plotly.min.js`, so nothing is fetched from
the network and the pages work from file://. Figures use no plotly template: a named one embeds ~8 kB of styling in
every chart, and pages such as trends.html hold dozens of charts."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import plotly.graph_objects as go
from markupsafe import Markup, escape
from plotly.colors import qualitative

from ehrbench.reports.model import BreakdownRow, Estimate, LeaderboardRow, Metric, PassCurvePoint, TrendPoint

PALETTE = qualitative.Plotly + qualitative.D3
REGRESSION_COLOR = "#d62728"
IMPROVEMENT_COLOR = "#2ca02c"
_LAYOUT = dict(
    height=360, margin=dict(l=60, r=20, t=40, b=60), paper_bgcolor="white", plot_bgcolor="white",
    font=dict(family="system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", size=12),
    legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
)
_AXIS = dict(gridcolor="#e5e7eb", zerolinecolor="#9ca3af", automargin=True)


def agent_colors(agents: Iterable[str]) -> dict[str, str]:
    """One colour per agent, the same in every chart of the site."""
    return {agent: PALETTE[i % len(PALETTE)] for i, agent in enumerate(dict.fromkeys(agents))}


def display_factor(scale: str) -> float:
    """Shares and scores are charted ×100, as the tables show them."""
    return 100.0 if scale in ("share", "score") else 1.0


def axis_title(metric: Metric) -> str:
    return f"{metric.label} (%)" if metric.scale == "share" else metric.label


def chart_div(fig: go.Figure, name: str) -> Markup:
    """The figure as a snippet for a page that already loaded plotly.min.js."""
    div_id = "chart-" + re.sub(r"[^A-Za-z0-9_-]+", "-", name)
    body = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False})
    return Markup(f'<div class="chart" data-chart="{escape(name)}">{body}</div>')


def _styled(fig: go.Figure, *, x_title: str = "", y_title: str = "", **layout) -> go.Figure:
    fig.update_layout(template="none", **{**_LAYOUT, **layout})
    fig.update_xaxes(title_text=x_title, **_AXIS)
    fig.update_yaxes(title_text=y_title, **_AXIS)
    return fig


def _error_bars(estimates: Sequence[Estimate], factor: float) -> dict:
    """Asymmetric error bars from the intervals; None where a bound or the value is missing."""
    def distance(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else max(a - b, 0.0) * factor

    return dict(type="data", symmetric=False, thickness=1.2, width=4,
                array=[distance(e.high, e.value) for e in estimates],
                arrayminus=[distance(e.value, e.low) for e in estimates])


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def leaderboard_chart(suite: str, rows: Sequence[LeaderboardRow], metric: Metric,
                      colors: Mapping[str, str]) -> Markup:
    """The headline metric per agent, with its bootstrap interval."""
    factor = display_factor(metric.scale)
    estimates = [row.values.get(metric.key, Estimate(None)) for row in rows]
    fig = go.Figure(go.Bar(
        x=[row.agent for row in rows], y=[_scaled(e.value, factor) for e in estimates],
        error_y=_error_bars(estimates, factor), marker_color=[colors.get(row.agent) for row in rows],
        hovertemplate="%{x}<br>%{y:.1f}<extra></extra>" if factor != 1 else "%{x}<br>%{y}<extra></extra>",
    ))
    _styled(fig, y_title=axis_title(metric), showlegend=False)
    return chart_div(fig, f"leaderboard-{suite}")


def breakdown_chart(facet: str, suite: str, rows: Sequence[BreakdownRow], values: Sequence[str],
                    agents: Sequence[str], colors: Mapping[str, str], x_title: str) -> Markup:
    """Success rate per facet value (x, in the given order), one bar per agent, Wilson intervals as error bars."""
    fig = go.Figure()
    by_key = {(row.value, row.agent): row for row in rows}
    for agent in agents:
        cells = [by_key.get((value, agent)) for value in values]
        if not any(cells):
            continue
        estimates = [cell.success_rate if cell else Estimate(None) for cell in cells]
        fig.add_trace(go.Bar(
            name=agent, x=list(values), y=[_scaled(e.value, 100) for e in estimates],
            error_y=_error_bars(estimates, 100), marker_color=colors.get(agent),
            customdata=[cell.tasks if cell else None for cell in cells],
            hovertemplate=f"{escape(agent)}<br>%{{x}}: %{{y:.1f}} % (%{{customdata}} tasks)<extra></extra>",
        ))
    _styled(fig, x_title=x_title, y_title="success rate (%)", barmode="group", yaxis_range=[0, 105],
            xaxis_type="category")
    return chart_div(fig, f"breakdown-{facet}-{suite}")


def pass_curve_chart(suite: str, points: Sequence[PassCurvePoint], agents: Sequence[str],
                     colors: Mapping[str, str]) -> Markup:
    """Pass@k (solid: solved at least once in k trials) and Pass^k (dashed: solved in all k) per agent."""
    fig = go.Figure()
    for agent in agents:
        mine = sorted((p for p in points if p.agent == agent), key=lambda p: p.k)
        if not mine:
            continue
        ks = [p.k for p in mine]
        fig.add_trace(go.Scatter(x=ks, y=[p.pass_at_k for p in mine], name=f"{agent} Pass@k", legendgroup=agent,
                                 mode="lines+markers", line=dict(color=colors.get(agent), dash="solid")))
        fig.add_trace(go.Scatter(x=ks, y=[p.pass_hat_k for p in mine], name=f"{agent} Pass^k", legendgroup=agent,
                                 mode="lines+markers", line=dict(color=colors.get(agent), dash="dash")))
    _styled(fig, x_title="k", y_title="probability", yaxis_range=[0, 1.02], xaxis_dtick=1)
    return chart_div(fig, f"pass-curve-{suite}")


def _change_color(change: str | None, default: str | None) -> str | None:
    return {"regression": REGRESSION_COLOR, "improvement": IMPROVEMENT_COLOR}.get(change or "", default)


def trend_chart(suite: str, metric: Metric, points: Sequence[TrendPoint], runs: Sequence[str],
                agents: Sequence[str], colors: Mapping[str, str]) -> Markup:
    """A metric over the runs of the series (x in run order), intervals as error bars; regressions red,
    improvements green."""
    factor = display_factor(metric.scale)
    order = {run: i for i, run in enumerate(runs)}
    fig = go.Figure()
    for agent in agents:
        mine = sorted((p for p in points if p.agent == agent and p.run_id in order), key=lambda p: order[p.run_id])
        if not mine:
            continue
        estimates = [p.estimate for p in mine]
        color = colors.get(agent)
        fig.add_trace(go.Scatter(
            name=agent, x=[p.run_id for p in mine], y=[_scaled(e.value, factor) for e in estimates],
            mode="lines+markers", line=dict(color=color), error_y=_error_bars(estimates, factor),
            marker=dict(color=[_change_color(p.change, color) for p in mine],
                        size=[12 if p.change else 7 for p in mine], line=dict(width=1, color="white")),
            customdata=[p.change or "" for p in mine],
            hovertemplate=f"{escape(agent)}<br>%{{x}}: %{{y}} %{{customdata}}<extra></extra>",
        ))
    _styled(fig, x_title="run", y_title=axis_title(metric),
            xaxis=dict(type="category", categoryorder="array", categoryarray=list(runs), **_AXIS))
    return chart_div(fig, f"trend-{suite}-{metric.key}")


def build_stages_chart(stage_seconds: Mapping[str, float]) -> Markup:
    """How long each build stage took, in pipeline order, top to bottom."""
    names = list(stage_seconds)
    fig = go.Figure(go.Bar(x=[stage_seconds[n] for n in names], y=names, orientation="h", marker_color=PALETTE[0],
                           hovertemplate="%{y}: %{x:.1f} s<extra></extra>"))
    _styled(fig, x_title="seconds", showlegend=False,
            height=max(200, 60 + 28 * len(names)), yaxis_autorange="reversed")
    return chart_div(fig, "build-stages")
