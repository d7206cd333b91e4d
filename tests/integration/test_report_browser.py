"""The report site in a real browser (headless Chromium via Playwright): opened from file://, its leaderboard
holds the values the parquet results give (computed here with pyarrow, not with the report's SQL), its charts draw,
a leaderboard cell leads to the failing tasks and on to a transcript, and nothing is fetched from the network."""

from __future__ import annotations

import json
from collections import defaultdict

import pyarrow.parquet as pq
import pytest

from ehrbench.reports.assemble import report_data
from ehrbench.reports.model import Bootstrap
from ehrbench.reports.site import render_site
from tests.browser import chromium_page, screenshot
from tests.report_fixtures import trial, write_build, write_run

pytestmark = pytest.mark.integration

LLM = "llm:m@http://127.0.0.1:9/v1"
RUNS = ("nightly-20261101T020000Z", "nightly-20261102T020000Z")


def transcript(answer: str) -> str:
    call = {"id": "c1", "type": "function",
            "function": {"name": "sql_execute", "arguments": json.dumps({"query": "select max(valuenum) from lab"})}}
    return json.dumps([
        {"role": "system", "content": "You answer questions over a database."},
        {"role": "user", "content": "What was the last glucose?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "[[1]] <script>window.__pwned = 1</script>"},
        {"role": "assistant", "content": f"The answer is {answer}."}])


def run_rows(good: bool) -> list[dict]:
    """Two agents on ehrsql, fhir and dq, three trials each; the LLM agent fails every ehrsql task unless `good`."""
    rows = []
    for k in range(3):
        for agent in ("oracle", LLM):
            fails = agent == LLM and not good
            rows += [trial(agent, "ehrsql", "t1", k, reward=0.0 if fails or (agent == LLM and k == 0) else 1.0,
                           answer="[['2']]" if fails else "[['1']]", predicted_sql="select 2",
                           transcript=transcript("2" if fails else "1"), input_tokens=120, output_tokens=30,
                           cost_usd=0.002, latency_s=1.5),
                     trial(agent, "ehrsql", "t2", k, reward=0.0 if fails else 1.0, transcript=transcript("2")),
                     trial(agent, "ehrsql", "t3", k, answerable=False, abstained=not fails, reward=float(not fails)),
                     trial(agent, "fhir", "f1", k, reward=float(agent == "oracle"), retrieval_precision=0.5,
                           retrieval_recall=0.5, retrieved_fhir_ids=["id-1", "id-9"]),
                     trial(agent, "dq", "combined", k, answerable=None, reward=float(agent == "oracle"),
                           dq_recall=1.0 if agent == "oracle" else 0.5, dq_precision=0.2)]
    rows.append(trial(LLM, "ehrsql", "t2", 3, status="invalid", reward=None))
    return rows


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    write_build(root / "benchmarks")
    for run_id, good in zip(RUNS, (True, False), strict=True):
        write_run(root / "results", run_id, run_rows(good))
    data = report_data(root / "results", RUNS[-1], root / "benchmarks", bootstrap=Bootstrap(200, 0, 0.95))
    index = render_site(data, root / "site")
    return index, root / "results" / f"run_id={RUNS[-1]}"


def success_rates(run_folder) -> dict[tuple[str, str], float]:
    """Mean reward per (suite, agent) over the scored trials (invalid ones are not scored; errors count as 0)."""
    rewards = defaultdict(list)
    for row in pq.read_table(sorted(run_folder.glob("part-*.parquet"))).to_pylist():
        if row["status"] != "invalid":
            rewards[(row["suite"], row["agent"])].append(row["reward"] or 0.0)
    return {key: sum(values) / len(values) for key, values in rewards.items()}


def test_the_leaderboard_shows_the_parquet_values(site):
    index, run_folder = site
    expected = success_rates(run_folder)
    with chromium_page() as page:
        page.goto(index.as_uri())
        shown = {}
        for table in page.locator("table.leaderboard").all():
            suite = table.get_attribute("data-suite")
            for row in table.locator("tr.agent-row").all():
                cell = row.locator('td[data-metric="success_rate"]')
                shown[(suite, row.get_attribute("data-agent"))] = (float(cell.get_attribute("data-value")),
                                                                  cell.inner_text())
        assert set(shown) == set(expected)
        for key, value in expected.items():
            assert shown[key][0] == pytest.approx(value, abs=1e-6), key
            assert f"{100 * value:.1f} %" in shown[key][1], key
        assert page.locator("div.chart .main-svg").count() >= 3  # plotly drew the leaderboard charts
        assert page.errors == [] and all(url.startswith("file://") for url in page.requested), page.requested
        print("screenshot:", screenshot(page, "report-leaderboard"))


def test_a_leaderboard_cell_leads_to_the_failing_task_and_its_transcript(site):
    index, _ = site
    with chromium_page() as page:
        page.goto(index.as_uri())
        row = page.locator(f'table.leaderboard[data-suite="ehrsql"] tr.agent-row[data-agent="{LLM}"]')
        row.locator('td[data-metric="success_rate"] a.failing-link').click()
        page.wait_for_load_state()
        assert "/failures/" in page.url
        links = page.locator("table.failing a.task-link")
        assert links.all_inner_texts() == ["t1", "t2", "t3"]
        links.first.click()
        page.wait_for_load_state()
        assert page.url.endswith(".html") and "/tasks/ehrsql/" in page.url
        assert "What was the last glucose?" in page.inner_text("body")
        trial_section = page.locator(f'section.trial[data-agent="{LLM}"][data-trial="1"]')
        side_by_side = trial_section.locator(".gold-vs-prediction").inner_text()
        assert "[['1']]" in side_by_side and "[['2']]" in side_by_side  # the gold beside the wrong prediction
        tool_call = trial_section.locator('.tool-call[data-tool="sql_execute"]')
        assert not tool_call.is_visible()  # the transcript starts folded
        trial_section.locator("details.transcript > summary").click()
        assert tool_call.is_visible() and "select max(valuenum) from lab" in tool_call.inner_text()
        assert "<script>window.__pwned = 1</script>" in trial_section.inner_text()  # shown as text, not run
        assert page.evaluate("window.__pwned") is None
        assert page.errors == [] and all(url.startswith("file://") for url in page.requested)
        print("screenshot:", screenshot(page, "report-transcript"))


def test_trends_breakdowns_curves_and_build_pages_draw(site):
    index, _ = site
    with chromium_page() as page:
        page.goto(index.as_uri())
        for name, expected_chart in (("breakdowns.html", "breakdown-"), ("curves.html", "pass-curve-ehrsql"),
                                     ("trends.html", "trend-ehrsql-success_rate"), ("build.html", None)):
            page.goto((index.parent / name).as_uri())
            if expected_chart:
                chart = page.locator(f'div.chart[data-chart^="{expected_chart}"]').first
                assert chart.locator(".main-svg").count() >= 1, name
        page.goto((index.parent / "trends.html").as_uri())
        regressions = page.locator("table.regressions").inner_text()
        assert LLM in regressions and "success_rate" in regressions  # 8/9 [2/3, 1] → 0/9 [0, 0]
        page.goto((index.parent / "build.html").as_uri())
        assert "b1" in page.inner_text("body")
        page.goto((index.parent / "tasks" / "index.html").as_uri())
        page.locator("a", has_text="f1").first.click()
        retrieved = page.locator("section.trial details.retrieved").first.inner_text()
        assert "2; 1 in the gold" in retrieved and "id-1  ✓ gold" in retrieved  # retrieved ids beside the gold
        assert page.errors == [] and all(url.startswith("file://") for url in page.requested)
        print("screenshot:", screenshot(page, "report-build"))
