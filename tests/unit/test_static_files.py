"""The static server behind the artifacts' links: the dashboard and published Data Docs, nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from ehrbench.stack.static_files import create_app, data_docs_link, report_link


@pytest.fixture
def served(tmp_path: Path) -> TestClient:
    site = tmp_path / "site"
    (site / "tasks").mkdir(parents=True)
    (site / "index.html").write_text("<h1>dashboard</h1>")
    (site / "tasks" / "t1.html").write_text("task one")
    benchmarks = tmp_path / "data" / "benchmarks"
    for build in ("b1", "b2.tmp"):
        (benchmarks / build / "reports" / "gx").mkdir(parents=True)
        (benchmarks / build / "reports" / "gx" / "index.html").write_text(f"docs of {build}")
        (benchmarks / build / "hidden").mkdir()
        (benchmarks / build / "hidden" / "gold.parquet").write_text("secret")
    (tmp_path / "data" / "postgres").mkdir()
    (tmp_path / "data" / "postgres" / "password").write_text("secret")
    return TestClient(create_app(benchmarks, site))


def test_the_dashboard_and_published_data_docs_are_served(served):
    assert served.get("/report/index.html").text == "<h1>dashboard</h1>"
    assert served.get("/report/").text == "<h1>dashboard</h1>"
    assert served.get("/report/tasks/t1.html").text == "task one"
    assert served.get("/builds/b1/gx/index.html").text == "docs of b1"
    assert served.get("/", follow_redirects=True).text == "<h1>dashboard</h1>"


@pytest.mark.parametrize("path", [
    "/builds/b2.tmp/gx/index.html",  # a build still being written
    "/builds/b1/gx/../../hidden/gold.parquet",
    "/builds/b1/gx/%2e%2e/%2e%2e/hidden/gold.parquet",
    "/builds/..%2Fb1/gx/index.html",
    "/report/../data/postgres/password",
    "/report/%2e%2e/data/postgres/password",
    "/builds/b1/hidden/gold.parquet",
    "/data/postgres/password",
])
def test_nothing_else_is_served(served, path):
    response = served.get(path)
    assert response.status_code == 404 and "secret" not in response.text


def test_links_are_http_when_a_static_server_serves_them_else_files(tmp_path, monkeypatch):
    site, benchmarks = tmp_path / "site", tmp_path / "benchmarks"
    monkeypatch.delenv("EHRBENCH_FILES_URL", raising=False)
    assert report_link(site / "index.html", site) == (site / "index.html").resolve().as_uri()
    assert data_docs_link(benchmarks, "b1") == (benchmarks / "b1" / "reports" / "gx" / "index.html").resolve().as_uri()
    monkeypatch.setenv("EHRBENCH_FILES_URL", "http://127.0.0.1:4201/")
    assert report_link(site / "index.html", site) == "http://127.0.0.1:4201/report/index.html"
    assert report_link(tmp_path / "elsewhere" / "index.html", site).startswith("file://")  # not what it serves
    assert data_docs_link(benchmarks, "b1") == "http://127.0.0.1:4201/builds/b1/gx/index.html"
