"""Code, dbt models and docs cite `docs/<page>.md#<section>`: every cited page and section exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"docs/([a-z_-]+\.md)#([a-z0-9-]+)")
SOURCES = ("src", "flows", "tests", "dbt_project", "bench")
TOP_FILES = ("README.md", "Makefile", "pyproject.toml", "prefect.yaml")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens (duplicates get -1, -2, …)."""
    seen: dict[str, int] = {}
    found = set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not (match := re.match(r"#{1,6}\s+(.*)", line)):
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def citations() -> list[tuple[str, str, str]]:
    files = [REPO / name for name in TOP_FILES] + [
        path for folder in SOURCES for path in (REPO / folder).rglob("*")
        if path.is_file() and path.suffix in {".py", ".sql", ".yml", ".yaml", ".md", ".json"}]
    found = []
    for path in files:
        for page, anchor in CITATION.findall(path.read_text(errors="replace")):
            found.append((str(path.relative_to(REPO)), page, anchor))
    return found


def test_the_anchor_rule_follows_github(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("## EHRSQL-2024: answer comparison and reliability score\n```\n# not a heading\n```\n"
                    "## Stack versions and pitfalls\n### Pitfalls\n### Pitfalls\n")
    assert anchors(page) == {"ehrsql-2024-answer-comparison-and-reliability-score", "stack-versions-and-pitfalls",
                             "pitfalls", "pitfalls-1"}


def test_the_code_cites_the_docs_and_not_a_document_outside_the_repository():
    found = citations()
    assert len(found) > 50  # the scan sees the citations (metrics, dq, dbt macros, …)
    outside = [str(path.relative_to(REPO)) for folder in SOURCES for path in (REPO / folder).rglob("*.py")
               if path != Path(__file__) and "DESIGN" + " §" in path.read_text()]
    assert outside == [], "cite docs/<page>.md#<section>: DESIGN.md is not in the repository"


@pytest.mark.parametrize("page", sorted({page for _, page, _ in citations()}))
def test_every_cited_section_exists(page):
    path = REPO / "docs" / page
    assert path.is_file(), f"docs/{page} is cited but does not exist"
    missing = sorted({(where, anchor) for where, cited, anchor in citations()
                      if cited == page and anchor not in anchors(path)})
    assert missing == [], f"sections of docs/{page} that do not exist: {missing}"
