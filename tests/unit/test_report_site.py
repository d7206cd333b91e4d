"""The static report site: pages, links that work from file://, no network loads, escaping, atomic publication."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from jinja2 import ChoiceLoader, DictLoader, Environment

from ehrbench.reports import aggregates
from ehrbench.reports import site as site_module
from ehrbench.reports.model import (
    Bootstrap,
    BreakdownRow,
    BuildInfo,
    Estimate,
    FailingTask,
    LeaderboardRow,
    Metric,
    PassCurvePoint,
    ReportData,
    TaskDetail,
    TrendPoint,
    TrialDetail,
)
from ehrbench.reports.site import failures_href, format_value, page_name, render_site, task_href

LLM = "llm:m@http://127.0.0.1:9/v1"
ORACLE = "oracle"
FAILING_TASK = "ehrsql/q-0001"
DQ_TASK = "combined_clues"


def _trial(agent: str, trial: int, status: str, reward: float | None, transcript: list[dict], **fields) -> TrialDetail:
    values = dict(answer=None, predicted_sql=None, abstained=None, retrieval_precision=None, retrieval_recall=None,
                  retrieved_fhir_ids=[], dq_recall=None, dq_precision=None, error=None, latency_s=1.5,
                  input_tokens=1200, output_tokens=80, cost_usd=None, tool_calls=1, user_turns=None,
                  stop_reason="submit")
    values.update(fields)
    return TrialDetail(agent=agent, trial=trial, status=status, reward=reward, transcript=transcript, **values)


def _transcript() -> list[dict]:
    return [
        {"role": "system", "content": "You answer questions over an EHR database."},
        {"role": "user", "content": "How many lab tests did patient 10001 have?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "sql_execute", "arguments": json.dumps({"sql": "SELECT count(*) FROM labevents"})}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "<script>alert('pwned')</script>" + "x" * 5000},
        {"role": "assistant", "content": "There were 42.", "reasoning_content": "counted rows"},
        {"role": "harness", "content": "the SQL failed: timeout",
         "user_attempts": [{"conversation": [{"role": "user", "content": "Hb of my patient?"},
                                             {"role": "assistant", "content": "Which patient?"}],
                            "valid": False, "validator": "the user named no patient"}],
         "user_tokens": [10, 20]},
    ]


@pytest.fixture
def report() -> ReportData:
    share = Metric("sr", "Success rate", "share", description="Share of trials solved")
    score = Metric("rs10", "RS(10)", "score", description="Reliability score with penalty 10")
    cost = Metric("cost", "Cost per trial", "usd", higher_is_better=False)
    latency = Metric("latency", "Latency", "seconds", higher_is_better=False)
    recall = Metric("dq_recall", "DQ recall", "share")
    flagged = Metric("flagged", "Flagged rows", "count")
    leaderboard = {
        "ehrsql": [
            LeaderboardRow(ORACLE, "ehrsql", tasks=6, trials=12, k=2, errors=0, invalid=0, failing_tasks=0,
                           values={"sr": Estimate(1.0, 1.0, 1.0), "rs10": Estimate(1.0, 1.0, 1.0),
                                   "cost": Estimate(0.0), "latency": Estimate(0.01)}),
            LeaderboardRow(LLM, "ehrsql", tasks=6, trials=12, k=2, errors=1, invalid=0, failing_tasks=1,
                           values={"sr": Estimate(0.8333333333, 0.5, 1.0), "rs10": Estimate(-0.125, -0.9, 0.4),
                                   "cost": Estimate(0.0123), "latency": Estimate(1.2345)}),
        ],
        "dq": [
            LeaderboardRow(LLM, "dq", tasks=1, trials=2, k=2, errors=0, invalid=1, failing_tasks=1,
                           values={"dq_recall": Estimate(0.5, 0.25, 0.75), "flagged": Estimate(17.0)}),
        ],
    }
    failing = {
        (LLM, "ehrsql"): [FailingTask(FAILING_TASK, "mimic_iv", "How many lab tests " * 20, trials=2,
                                      mean_reward=0.5, statuses="completed×1, error×1")],
        (LLM, "dq"): [FailingTask(DQ_TASK, None, "Find the corrupted rows.", trials=2, mean_reward=0.0,
                                  statuses="completed×1, invalid×1")],
    }
    tasks = [
        TaskDetail("ehrsql", FAILING_TASK, "mimic_iv", "How many lab tests did patient 10001 have?", None,
                   {"category": ["labs"], "template": ["labs_count"]}, True, "SELECT count(*) FROM labevents", "42",
                   [], [], trials=[
                       _trial(LLM, 1, "completed", 1.0, _transcript(), answer="42",
                              predicted_sql="SELECT count(*) FROM labevents"),
                       _trial(LLM, 2, "error", 0.0, [], error="Timeout <b>after</b> 30 s"),
                       _trial(ORACLE, 1, "completed", 1.0, []),
                   ]),
        TaskDetail("dq", DQ_TASK, None, "Find the corrupted rows.", "Tables are CSV files.",
                   {"dq_family": ["combined"]}, None, None, None, [],
                   [{"table": "lab_results", "row_id": "r1", "cluster_id": 1, "family": "impossible_values",
                     "subtype": "decimal_shift", "field": "value", "original_value": "1.2", "corrupted_value": "120"}],
                   trials=[_trial(LLM, 1, "completed", 0.0, [], dq_recall=0.5, dq_precision=0.2),
                           _trial(LLM, 2, "invalid", None, [])]),
    ]
    breakdowns = [
        BreakdownRow("category", value, agent, "ehrsql", tasks=3, trials=6, success_rate=Estimate(rate, 0.1, 0.95))
        for value, agent, rate in [("labs", LLM, 0.5), ("labs", ORACLE, 1.0), ("vitals", LLM, 0.9),
                                   ("vitals", ORACLE, 1.0)]
    ] + [
        BreakdownRow("template", f"t{i:03d}", LLM, "ehrsql", tasks=1, trials=2,
                     success_rate=Estimate((i % 10) / 10, 0.0, 1.0))
        for i in range(40)
    ]
    trends = [
        TrendPoint("run-1", LLM, "ehrsql", "sr", Estimate(0.9, 0.85, 0.95)),
        TrendPoint("run-2", LLM, "ehrsql", "sr", Estimate(0.6, 0.5, 0.7), change="regression"),
        TrendPoint("run-1", ORACLE, "ehrsql", "sr", Estimate(1.0, 1.0, 1.0)),
        TrendPoint("run-2", ORACLE, "ehrsql", "sr", Estimate(1.0, 1.0, 1.0)),
        TrendPoint("run-2", LLM, "ehrsql", "cost", Estimate(0.01), change="improvement"),
    ]
    manifest = {
        "build_id": "20260101T000000Z", "created_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:03:00Z",
        "seed": 0, "parameters": {"seed": 0, "mimic_iv_edition": "demo"},
        "packages": {"duckdb": "1.5.6"},
        "inputs": [{"dataset": "mimic_iv", "table": "admissions", "status": "verified", "verification": "verified",
                    "rows": 275, "sha256": "910b9f160ffdf1e08ea673585393f347c773ccc87d66875c627584a903ae8493"}],
        "raw_row_counts": {"raw_mimic_iv.admissions": 275},
        "built_row_counts": {"ehrsql2024__mimic_iv": {"admissions": 119, "patients": 100}},
        "validation": {"staging_mimic_iv": {"success": True, "evaluated": 94}},
        "questions": {"generated": 10, "quarantined": 1},
        "stages": {"ingest": {"started_at": "2026-01-01T00:00:00Z", "seconds": 2.4},
                   "transform": {"started_at": "2026-01-01T00:00:03Z", "seconds": 39.2}},
        "fhir": {"counts": {"Patient": 100}},
    }
    quarantine = [{"question_id": "q-bad", "suite": "ehrsql", "db": "eicu", "template_id": "labs_count",
                   "failed_expectations": ["sql_runs_in_both_dialects", "same_answer"]}]
    return ReportData(
        run_id="nightly-20260102", build_id="20260101T000000Z", generated_at="2026-01-02T03:04:05Z",
        agents=[ORACLE, LLM], suites=["ehrsql", "dq"], bootstrap=Bootstrap(replicates=1000, seed=7, level=0.95),
        metrics={"ehrsql": [share, score, cost, latency], "dq": [recall, flagged]},
        headline={"ehrsql": "sr", "dq": "dq_recall"}, leaderboard=leaderboard, breakdowns=breakdowns,
        pass_curves=[PassCurvePoint(agent, "ehrsql", k, at, hat) for agent, k, at, hat in
                     [(LLM, 1, 0.8, 0.8), (LLM, 2, 0.9, 0.7), (ORACLE, 1, 1.0, 1.0), (ORACLE, 2, 1.0, 1.0)]],
        trend_runs=["run-1", "run-2"], trends=trends, failing=failing, tasks=tasks,
        build=BuildInfo("20260101T000000Z", manifest, quarantine, data_docs="gx/index.html"),
    )


@pytest.fixture
def data_docs(tmp_path: Path) -> Path:
    folder = tmp_path / "gx-source"
    folder.mkdir()
    (folder / "index.html").write_text("<html><body>Data Docs</body></html>", encoding="utf-8")
    return folder


@pytest.fixture
def site(tmp_path: Path, report: ReportData, data_docs: Path) -> Path:
    index = render_site(report, tmp_path / "public" / "report", data_docs=data_docs)
    assert index == tmp_path / "public" / "report" / "index.html"
    return index.parent


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [value for name, value in attrs if name in ("href", "src") and value is not None]


def _links(page: Path) -> list[str]:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.links


def _pages(root: Path) -> list[Path]:
    return sorted(root.rglob("*.html"))


def _row(html: str, agent: str, suite: str) -> str:
    table = re.search(rf'<table class="leaderboard" data-suite="{suite}">(.*?)</table>', html, re.S).group(1)
    return re.search(rf'<tr class="agent-row" data-agent="{re.escape(agent)}">(.*?)</tr>', table, re.S).group(1)


def test_page_names_are_safe_and_distinct() -> None:
    assert page_name(LLM) != page_name("llm_m_http_127.0.0.1_9_v1")
    assert re.fullmatch(r"[A-Za-z0-9._-]+-[0-9a-f]{8}", page_name(LLM))
    assert failures_href(LLM, "dq") == f"failures/{page_name(LLM)}--dq.html"
    assert task_href("ehrsql", FAILING_TASK) == f"tasks/ehrsql/{page_name(FAILING_TASK)}.html"


@pytest.mark.parametrize(("value", "scale", "text"), [
    (0.8333333, "share", "83.3 %"), (-0.125, "score", "-12.5"), (0.0123, "usd", "$0.0123"),
    (1.2345, "seconds", "1.23 s"), (17.0, "count", "17"), (None, "share", "—"),
])
def test_values_are_formatted_by_scale(value: float | None, scale: str, text: str) -> None:
    assert format_value(value, scale) == text


def test_index_has_one_leaderboard_per_suite_with_values(site: Path) -> None:
    html = (site / "index.html").read_text(encoding="utf-8")
    assert re.findall(r'<table class="leaderboard" data-suite="([^"]+)"', html) == ["ehrsql", "dq"]
    assert '<section class="suite" id="suite-ehrsql">' in html
    llm = _row(html, LLM, "ehrsql")
    assert 'data-metric="sr" data-value="0.833333"' in llm
    assert "83.3 %" in llm and '<span class="ci">[50.0 %, 100.0 %]</span>' in llm
    assert 'data-metric="rs10" data-value="-0.125"' in llm and "-12.5" in llm
    assert "$0.0123" in llm and "1.23 s" in llm
    assert "17" in _row(html, LLM, "dq")
    assert 'data-chart="leaderboard-ehrsql"' in html and 'data-chart="leaderboard-dq"' in html
    assert 'class="num headline" data-metric="sr" title="Share of trials solved"' in html
    assert "1,000 replicates, seed 7" in html


def test_the_agent_column_is_sticky_and_the_key_columns_come_first(tmp_path: Path) -> None:
    # dq's columns in the suite's order: Recall, Precision, Pass (the headline), Pass@k, Pass^k, Cost, Latency
    metrics = aggregates.suite_metrics("dq")
    row = LeaderboardRow(LLM, "dq", tasks=2, trials=2, k=1, errors=0, invalid=0, failing_tasks=1,
                         values={m.key: Estimate(0.5) for m in metrics})
    data = ReportData(run_id="r", build_id="b", generated_at="2026-01-02T03:04:05Z", agents=[LLM], suites=["dq"],
                      bootstrap=Bootstrap(0, 0, 0.95), metrics={"dq": metrics}, headline={"dq": "success_rate"},
                      leaderboard={"dq": [row]})
    root = render_site(data, tmp_path / "site").parent
    table = re.search(r'<table class="leaderboard" data-suite="dq">(.*?)</table>', (root / "index.html").read_text(),
                      re.S).group(1)
    header = re.findall(r'<th class="([^"]*)"(?: data-metric="([^"]*)")?', table.split("</thead>")[0])
    assert [metric or cls for cls, metric in header] == [
        "agent", "success_rate", "cost_per_trial", "latency_per_trial", "dq_recall", "dq_precision", "pass_at_k",
        "pass_hat_k", "num", "num", "num", "num", "num"]  # then tasks, trials, k, errors, invalid
    cells = re.findall(r'<td class="([^"]*)"(?: data-metric="([^"]*)")?', table.split("</thead>")[1])
    assert [metric or cls for cls, metric in cells][:4] == ["agent", "success_rate", "cost_per_trial",
                                                            "latency_per_trial"]
    css = (root / "assets" / "style.css").read_text()
    rule = re.search(r"table\.leaderboard \.agent \{([^}]*)\}", css)
    assert rule is not None and "position: sticky" in rule.group(1) and "left: 0" in rule.group(1)


def test_every_metric_cell_of_a_failing_row_links_its_failures(site: Path) -> None:
    html = (site / "index.html").read_text(encoding="utf-8")
    href = failures_href(LLM, "ehrsql")
    llm = _row(html, LLM, "ehrsql")
    assert llm.count(f'<a class="failing-link" href="{href}"') == 1 + 4  # the agent cell and every metric
    assert "failing-link" not in _row(html, ORACLE, "ehrsql")


def test_failing_links_lead_to_the_task_page(site: Path) -> None:
    failures = site / failures_href(LLM, "ehrsql")
    html = failures.read_text(encoding="utf-8")
    assert f'<a class="task-link" href="../{task_href("ehrsql", FAILING_TASK)}">{FAILING_TASK}</a>' in html
    assert "completed×1, error×1" in html and "How many lab tests " * 3 in html
    assert "How many lab tests " * 20 not in html.split("title=")[0]  # the question is shortened in the list
    task = (site / task_href("ehrsql", FAILING_TASK)).read_text(encoding="utf-8")
    assert '<div class="gold-vs-prediction">' in task
    assert f'<section class="trial" data-agent="{LLM}" data-trial="1" data-status="completed"' in task
    assert f"{LLM} · trial 2" in task


def test_every_link_resolves_inside_the_site(site: Path) -> None:
    pages = _pages(site)
    assert len(pages) >= 10
    for page in pages:
        for link in _links(page):
            target = urlsplit(link)
            assert not target.scheme and not target.netloc, f"{page.name}: external link {link}"
            if not target.path:
                continue  # an anchor on the same page
            assert (page.parent / unquote(target.path)).resolve().is_file(), f"{page.relative_to(site)}: {link}"


def test_no_page_loads_anything_from_the_network(site: Path) -> None:
    for page in _pages(site):
        html = page.read_text(encoding="utf-8")
        assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I), page
        assert "@import" not in html
    assert "http" not in (site / "assets" / "style.css").read_text(encoding="utf-8")
    assert (site / "assets" / "plotly.min.js").stat().st_size > 100_000
    assert '<script src="../../assets/plotly.min.js">' not in (
        site / task_href("ehrsql", FAILING_TASK)).read_text(encoding="utf-8")  # task pages need no charts
    assert '<script src="assets/plotly.min.js"></script>' in (site / "index.html").read_text(encoding="utf-8")


def test_transcript_is_escaped_and_structured(site: Path) -> None:
    html = (site / task_href("ehrsql", FAILING_TASK)).read_text(encoding="utf-8")
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in html
    assert "Timeout &lt;b&gt;after&lt;/b&gt; 30 s" in html
    assert '<details class="transcript"><summary>Transcript (6 messages)</summary>' in html
    assert '<div class="tool-call" data-tool="sql_execute">' in html
    assert '&#34;sql&#34;: &#34;SELECT count(*) FROM labevents&#34;' in html  # arguments pretty-printed
    assert "result of <code>sql_execute</code>" in html
    assert "more characters not shown" in html and "x" * 5000 not in html
    assert '<div class="message" data-role="harness">' in html
    assert "Simulated-user attempt 1" in html and "the user named no patient" in html and "rejected" in html
    assert "Hb of my patient?" in html
    assert "reasoning_content" in html and "user_tokens" in html  # unknown fields shown as JSON


def test_dq_task_shows_labels_and_scores(site: Path) -> None:
    html = (site / task_href("dq", DQ_TASK)).read_text(encoding="utf-8")
    assert '<table class="dq-labels">' in html and "decimal_shift" in html
    assert "50.0 %" in html and 'data-status="invalid"' in html


def test_trends_list_the_regression(site: Path) -> None:
    html = (site / "trends.html").read_text(encoding="utf-8")
    table = re.search(r'<table class="regressions">(.*?)</table>', html, re.S).group(1)
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S)
    assert len(rows) == 1
    assert "run-2" in rows[0] and LLM in rows[0] and "60.0 %" in rows[0] and "[85.0 %, 95.0 %]" in rows[0]
    assert 'data-chart="trend-ehrsql-sr"' in html and 'data-chart="trend-ehrsql-cost"' in html


def test_trends_need_two_runs(tmp_path: Path, report: ReportData) -> None:
    report.trend_runs, report.trends = ["run-2"], [p for p in report.trends if p.run_id == "run-2"]
    html = (render_site(report, tmp_path / "site").parent / "trends.html").read_text(encoding="utf-8")
    assert "at least two runs with the same prefix" in html and "data-chart" not in html


def test_breakdowns_and_curves(site: Path) -> None:
    html = (site / "breakdowns.html").read_text(encoding="utf-8")
    assert 'data-chart="breakdown-category-ehrsql"' in html
    assert '<table class="breakdown" data-facet="category" data-suite="ehrsql">' in html
    assert "Question category" in html
    template = re.search(r'<table class="breakdown" data-facet="template".*?</table>', html, re.S).group(0)
    rates = [float(v) for v in re.findall(r'data-value="([0-9.]+)"', template)]
    assert len(rates) == 40 and rates == sorted(rates)
    assert "the 30 worst of 40 values" in html and "40 values: the chart shows the 30 worst" in html
    curves = (site / "curves.html").read_text(encoding="utf-8")
    assert 'data-chart="pass-curve-ehrsql"' in curves and '"dash":"dash"' in curves


def test_build_page(site: Path) -> None:
    html = (site / "build.html").read_text(encoding="utf-8")
    assert 'data-chart="build-stages"' in html
    assert '<code title="910b9f160ffdf1e08ea673585393f347c773ccc87d66875c627584a903ae8493">910b9f160ffd</code>' in html
    quarantine = re.search(r'<table class="quarantine">(.*?)</table>', html, re.S).group(1)
    assert "q-bad" in quarantine and "sql_runs_in_both_dialects, same_answer" in quarantine
    assert 'href="gx/index.html"' in html
    assert "ehrsql2024__mimic_iv" in html and "119" in html  # nested row counts


def test_missing_build_and_older_manifests(tmp_path: Path, report: ReportData) -> None:
    report.build = None
    html = (render_site(report, tmp_path / "a").parent / "build.html").read_text(encoding="utf-8")
    assert "build folder of this run was not found" in html
    report.build = BuildInfo("old", {"build_id": "old"}, [], data_docs="gx/index.html")
    html = (render_site(report, tmp_path / "b", data_docs=tmp_path / "gone").parent / "build.html").read_text(
        encoding="utf-8")
    assert "No stage timings" in html and "not in this site" in html


def test_tasks_index_shows_mean_rewards(site: Path) -> None:
    html = (site / "tasks" / "index.html").read_text(encoding="utf-8")
    assert f'href="../{task_href("dq", DQ_TASK)}"' in html
    assert f'data-agent="{LLM}" data-value="0.5">0.50<' in html  # trials 1.0 and 0.0


def test_rerender_replaces_the_site(tmp_path: Path, report: ReportData, site: Path) -> None:
    (site / "stale.html").write_text("old", encoding="utf-8")
    report.run_id = "nightly-20260103"
    render_site(report, site)
    assert not (site / "stale.html").exists()
    assert "nightly-20260103" in (site / "index.html").read_text(encoding="utf-8")
    assert [p.name for p in site.parent.iterdir()] == ["report"]


def test_failed_render_keeps_the_previous_site(monkeypatch: pytest.MonkeyPatch, report: ReportData,
                                               site: Path) -> None:
    before = {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    real = site_module._environment

    def broken() -> Environment:
        env = real()
        env.loader = ChoiceLoader([DictLoader({"trends.html.j2": "{{ 1 / 0 }}"}), env.loader])
        return env

    monkeypatch.setattr(site_module, "_environment", broken)
    report.run_id = "broken-run"
    with pytest.raises(ZeroDivisionError):
        render_site(report, site)
    after = {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    assert after == before
    assert [p.name for p in site.parent.iterdir()] == ["report"]  # no temporary folder left behind
