"""GX Data Docs offline in a real browser (headless Chromium via Playwright): `validate_questions` builds the Data
Docs of a tiny question set and localizes them with the npm copies of reports/gx_assets/; opened from file://, the
index and a nested validation page request nothing but files, raise no errors, and Bootstrap, Font Awesome, jQuery
and bootstrap-table take effect."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ehrbench.validation.data_docs import ASSETS_DIR, CDN_FILES
from ehrbench.validation.questions import validate_questions
from tests.browser import chromium_page, screenshot
from tests.unit.test_question_validation import CATEGORIES, SMALL, SUITE, question, unanswerable

pytestmark = pytest.mark.integration

GX_TEMPLATES = Path(__import__("great_expectations").__file__).parent / "render" / "view" / "templates"


@pytest.fixture(scope="session")
def gx_assets() -> Path:
    """reports/gx_assets/node_modules, installed from the lock file when absent. Without npm a test skips — except
    under CI, where it must be there (chromium_page's rule)."""
    modules = ASSETS_DIR / "node_modules"
    if not modules.is_dir():
        npm = shutil.which("npm")
        if npm is None:
            message = "npm is missing: install Node.js (npm) and run `make gx-assets`"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=ASSETS_DIR, check=True,
                       timeout=600)
    return modules


@pytest.fixture(scope="module")
def validation(gx_assets, tmp_path_factory):
    """A tiny question set (one slow question quarantined), its Data Docs built and localized by validate_questions."""
    records = [question(f"q_{c}", category=c, template_id=f"{c}_template") for c in CATEGORIES]
    records += [unanswerable("u1"), unanswerable("u2"), question("slow", execution_s=12.5)]
    return validate_questions(records, SUITE, thresholds=SMALL,
                              data_docs_dir=tmp_path_factory.mktemp("build") / "reports" / "gx")


def test_validation_localizes_every_cdn_url_of_its_data_docs(validation):
    offline = validation.data_docs_offline
    assert offline.ok, offline.problems()
    assert set(offline.replaced) == set(CDN_FILES)  # index pages and the others, between them, load all 16
    for page in offline.site_dir.rglob("*.html"):
        assert not re.search(r"(?:src|href)=\"https://(?!(?:docs\.)?greatexpectations\.io)", page.read_text()), page
    print(f"vendored: {offline.vendored_bytes / 1e6:.1f} MB in {offline.site_dir / 'static' / 'vendor'}")


def test_the_copies_are_the_bytes_gx_pins_with_subresource_integrity(gx_assets):
    # GX's templates pin popper and bootstrap.js by hash; the localizer drops the attribute (it blocks file://)
    imports = (GX_TEMPLATES / "js_script_imports.j2").read_text()
    pinned = re.findall(r'src="([^"]+)" integrity="sha384-([^"]+)"', imports)
    assert len(pinned) == 2
    for url, digest in pinned:
        cdn = CDN_FILES[url]
        data = (gx_assets / cdn.package / cdn.path).read_bytes()
        assert base64.b64encode(hashlib.sha384(data).digest()).decode() == digest, url


def open_offline(page, path: Path) -> list[str]:
    """Open `path` from file:// and return the requests that failed."""
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    page.evaluate("document.fonts.ready.then(() => true)")
    return failed


def assert_offline(page, failed: list[str]) -> None:
    assert page.errors == [], page.errors
    assert page.requested and all(url.startswith("file://") for url in page.requested), page.requested
    assert failed == [], failed
    assert any("/static/vendor/bootstrap@4.3.1/" in url for url in page.requested)


def style(page, selector: str, prop: str) -> str:
    return page.evaluate("([s, p]) => getComputedStyle(document.querySelector(s)).getPropertyValue(p)",
                         [selector, prop])


def without_bootstrap(page, selector: str, prop: str) -> str:
    """The computed style with the Bootstrap stylesheets switched off (then back on): what the pages showed before.
    Both: bootstrap-prefers-dark holds a whole Bootstrap for the dark theme."""
    toggle = "off => document.querySelectorAll('link[href*=\"/vendor/\"][href*=\"bootstrap\"]')" \
             ".forEach(l => { l.sheet.disabled = off; })"  # the sheet, not the <link>: no reload
    page.evaluate(toggle, True)
    try:
        return style(page, selector, prop)
    finally:
        page.evaluate(toggle, False)


def assert_bootstrap_styles(page) -> None:
    """Bootstrap's values on GX's navbar, which differ with its stylesheets off (a bare page)."""
    for selector, prop, value in (("nav.navbar", "display", "flex"), ("nav.navbar.sticky-top", "position", "sticky"),
                                  ("nav.navbar.border-bottom", "border-bottom-style", "solid")):
        assert style(page, selector, prop) == value, (selector, prop)
        assert without_bootstrap(page, selector, prop) != value, (selector, prop)


def test_the_index_page_is_styled_and_scripted_offline(validation):
    with chromium_page() as page:
        failed = open_offline(page, validation.data_docs_index)
        assert_offline(page, failed)
        assert_bootstrap_styles(page)
        assert page.evaluate("typeof jQuery.fn.bootstrapTable === 'function' && typeof vegaEmbed === 'function'")
        assert page.locator(".bootstrap-table").count() >= 1  # bootstrap-table's script rebuilt the index table
        assert page.locator("img.NO-CACHE").evaluate("img => img.complete && img.naturalWidth > 0")  # GX's logo
        print("screenshot:", screenshot(page, "gx-data-docs-index"))


def test_a_nested_validation_page_is_styled_offline_also_in_dark_mode(validation):
    site = validation.data_docs_offline.site_dir
    result = next((site / "validations" / "questions").rglob("*.html"))  # four folders down
    with chromium_page() as page:
        page.emulate_media(color_scheme="dark")  # the dark theme's logo was a remote CSS background
        failed = open_offline(page, result)
        assert_offline(page, failed)
        assert_bootstrap_styles(page)
        icons = page.locator("i.fas, i.fa").first
        assert "Font Awesome" in icons.evaluate("i => getComputedStyle(i).fontFamily")
        assert page.evaluate("[...document.fonts].some(f => f.family.includes('Font Awesome') "
                             "&& f.status === 'loaded')")
        assert "slow" in page.inner_text("body")  # the quarantined question's id, in the failing expectation
        print("screenshot:", screenshot(page, "gx-data-docs-validation"))
