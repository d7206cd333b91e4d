"""Offline Data Docs (ehrbench.validation.data_docs) on small hand-written sites with pages in nested folders and
a fake node_modules: CDN URLs become paths relative to each page, GX's remote logos go local or away, unknown remote
URLs and missing npm files are reported and left, links stay; the lock file pins what the table names."""

from __future__ import annotations

import json
import re
from importlib.util import find_spec
from pathlib import Path

import pytest

import ehrbench.validation.data_docs as data_docs
from ehrbench.validation.data_docs import ASSETS_DIR, CDN_FILES, LocalizeReport, localize_data_docs, remote_loads
from ehrbench.validation.questions import validate_questions
from tests.unit.test_question_validation import SMALL, SUITE, question, unanswerable

REPO = Path(__file__).resolve().parents[2]

# found, not imported: importing GX costs ~5 s, which every test worker would pay while collecting
GX_TEMPLATES = Path(find_spec("great_expectations").origin).parent / "render" / "view" / "templates"
BOOTSTRAP_CSS = "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css"
BOOTSTRAP_JS = "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js"
FONT_AWESOME = "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css"
VEGA = "https://cdn.jsdelivr.net/npm/vega@5"
LOGO = "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/logo-long.png"
DARK_LOGO = "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/full_logo_dark.png"
UNKNOWN = "https://cdn.example.org/chart.js"
DOCS_LINK = "https://docs.greatexpectations.io/docs/"
INSTALLED = {"vega": "5.33.1", "vega-lite": "5.23.0", "vega-embed": "6.29.0"}  # what "@5" resolved to


def page(*, unknown: bool = False) -> str:
    """A page shaped like GX's: stylesheets, scripts with SRI, the remote logo, the dark-mode logo in CSS, a link."""
    return f"""<!DOCTYPE html><html><head>
<link rel="stylesheet" href="{BOOTSTRAP_CSS}"/>
<link rel="stylesheet" href="{FONT_AWESOME}">
<style>
  .navbar-brand a {{ background: url('{DARK_LOGO}') 0 0 no-repeat; }}
</style>
<script src="{VEGA}"></script>
<script src="{BOOTSTRAP_JS}" integrity="sha384-abc" crossorigin="anonymous"></script>
{f'<script src="{UNKNOWN}"></script>' if unknown else ''}
</head><body>
<nav class="navbar"><a href="#"><img class="NO-CACHE" src="{LOGO}?d=20261126T143329.932283Z" alt="Great Expectations"
  style="height: 50px"/></a></nav>
<p>See <a href="{DOCS_LINK}">the docs</a>.</p>
</body></html>"""


PAGES = ("index.html", "expectations/questions.html", "validations/questions/__none__/20261126T1Z/run.html")


def make_site(root: Path, *, unknown_in: str | None = None, logo: bool = True) -> Path:
    site = root / "gx"
    for name in PAGES:
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(page(unknown=name == unknown_in))
    if logo:  # GX copies its images into every site
        (site / "static" / "images").mkdir(parents=True)
        (site / "static" / "images" / "logo-long.png").write_bytes(b"png")
    return site


def make_assets(root: Path, *, skip: tuple[str, ...] = (), versions: dict[str, str] | None = None) -> Path:
    """A node_modules with every package of CDN_FILES (an alias folder keeps the real name in package.json)."""
    modules = root / "node_modules"
    for cdn in CDN_FILES.values():
        if cdn.package in skip:
            continue
        folder = modules / cdn.package
        name = re.sub(r"-\d+\.\d+\.\d+$", "", cdn.package)
        version = (versions or {}).get(cdn.package) or INSTALLED.get(cdn.package, cdn.version)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text(json.dumps({"name": name, "version": version}))
        (folder / cdn.path).parent.mkdir(parents=True, exist_ok=True)
        (folder / cdn.path).write_text(f"/* {name} {version} {cdn.path} */")
        for sub in cdn.folders:
            (folder / sub).mkdir(exist_ok=True)
            (folder / sub / "fa-solid-900.woff2").write_bytes(b"font")
    return modules


def loads(path: Path) -> list[str]:
    return re.findall(r'(?:src|href)="([^"#][^"]*)"', path.read_text())


def test_cdn_urls_become_paths_relative_to_each_page(tmp_path):
    site = make_site(tmp_path)
    report = localize_data_docs(site, make_assets(tmp_path))
    assert report.ok and report.left == {} and report.missing == {}
    assert (report.pages, report.rewritten) == (3, 3)
    assert report.replaced[BOOTSTRAP_CSS] == "static/vendor/bootstrap@4.3.1/dist/css/bootstrap.min.css"
    assert report.replaced[VEGA] == "static/vendor/vega@5.33.1/build/vega.min.js"
    depth = {"index.html": "", "expectations/questions.html": "../",
             "validations/questions/__none__/20261126T1Z/run.html": "../../../../"}
    for name, up in depth.items():
        urls = loads(site / name)
        assert f"{up}static/vendor/bootstrap@4.3.1/dist/css/bootstrap.min.css" in urls, name
        assert f"{up}static/vendor/@fortawesome/fontawesome-free@6.6.0/css/all.min.css" in urls, name
        assert f"{up}static/images/logo-long.png" in urls, name  # GX's own copy of the logo
        for url in urls:
            if not url.startswith("https://"):
                assert (site / name).parent.joinpath(url).resolve().is_file(), (name, url)
        text = (site / name).read_text()
        assert "integrity" not in text and "crossorigin" not in text  # they block file:// loads
        assert "background: none 0 0 no-repeat" in text  # the dark-mode logo, which has no local copy
        assert "amazonaws" not in text and remote_loads(text) == []
        assert f'href="{DOCS_LINK}"' in text  # links are not loads
    assert (site / "static/vendor/vega@5.33.1/build/vega.min.js").read_text() == "/* vega 5.33.1 build/vega.min.js */"
    assert report.logos == [DARK_LOGO, LOGO]
    assert report.vendored_bytes > 0


def test_only_the_loaded_files_are_copied_with_font_awesomes_webfonts(tmp_path):
    site = make_site(tmp_path)
    localize_data_docs(site, make_assets(tmp_path))
    copied = sorted(p.relative_to(site / "static/vendor").as_posix()
                    for p in (site / "static/vendor").rglob("*") if p.is_file())
    assert copied == ["@fortawesome/fontawesome-free@6.6.0/css/all.min.css",
                      "@fortawesome/fontawesome-free@6.6.0/webfonts/fa-solid-900.woff2",
                      "bootstrap@4.3.1/dist/css/bootstrap.min.css", "bootstrap@4.3.1/dist/js/bootstrap.min.js",
                      "vega@5.33.1/build/vega.min.js"]


def test_an_unknown_remote_url_is_reported_and_left(tmp_path):
    site = make_site(tmp_path, unknown_in="expectations/questions.html")
    report = localize_data_docs(site, make_assets(tmp_path))
    assert not report.ok
    assert report.left == {UNKNOWN: ["expectations/questions.html"]} and report.unknown == [UNKNOWN]
    assert UNKNOWN in report.problems()[0]
    assert f'src="{UNKNOWN}"' in (site / "expectations/questions.html").read_text()
    assert BOOTSTRAP_CSS in report.replaced  # the rest of the page is localized


def test_missing_assets_leave_the_pages_and_name_the_make_target(tmp_path, caplog):
    site = make_site(tmp_path)
    before = {name: (site / name).read_text() for name in PAGES}
    report = localize_data_docs(site, tmp_path / "no" / "node_modules")
    assert set(report.missing) == {BOOTSTRAP_CSS, BOOTSTRAP_JS, FONT_AWESOME, VEGA}
    assert set(report.left) == set(report.missing) and report.unknown == [] and report.replaced == {}
    assert all(pages == sorted(PAGES) for pages in report.left.values())  # each page loads all four
    assert "make gx-assets" in report.problems()[0] and "make gx-assets" in caplog.text
    assert not (site / "static" / "vendor").exists()
    for name in PAGES:
        text = (site / name).read_text()
        assert BOOTSTRAP_CSS in text and 'integrity="sha384-abc"' in text  # untouched: still works online
        assert text == before[name].replace(f"{LOGO}?d=20261126T143329.932283Z", "../" * name.count("/")
                                            + "static/images/logo-long.png").replace(f"url('{DARK_LOGO}')", "none")


def test_a_missing_package_or_a_wrong_version_is_reported_and_the_rest_localized(tmp_path):
    site = make_site(tmp_path)
    report = localize_data_docs(site, make_assets(tmp_path, skip=("vega",), versions={"bootstrap": "4.6.2"}))
    assert set(report.missing) == {VEGA, BOOTSTRAP_CSS, BOOTSTRAP_JS}
    assert "bootstrap 4.6.2 is installed, the page wants 4.3.1" in report.missing[BOOTSTRAP_CSS]
    assert list(report.replaced) == [FONT_AWESOME]
    text = (site / "index.html").read_text()
    assert VEGA in text and BOOTSTRAP_CSS in text and FONT_AWESOME not in text


def test_without_a_local_logo_the_remote_one_is_dropped(tmp_path):
    site = make_site(tmp_path, logo=False)
    report = localize_data_docs(site, make_assets(tmp_path))
    text = (site / "index.html").read_text()
    assert report.ok and "amazonaws" not in text
    assert re.search(r'<img class="NO-CACHE" alt="Great Expectations"', text)  # no src: the alt text shows


def test_a_second_run_changes_nothing(tmp_path):
    site = make_site(tmp_path)
    assets = make_assets(tmp_path)
    first = localize_data_docs(site, assets)
    pages = {name: (site / name).read_text() for name in PAGES}
    again = localize_data_docs(site, assets)
    assert again.ok and again.rewritten == 0 and again.replaced == {}
    assert again.vendored_bytes == first.vendored_bytes
    assert {name: (site / name).read_text() for name in PAGES} == pages


def test_the_default_assets_are_the_repositorys_npm_folder(tmp_path, monkeypatch):
    assert data_docs.DEFAULT_ASSETS.relative_to(REPO) == Path("reports/gx_assets/node_modules")
    monkeypatch.setattr(data_docs, "DEFAULT_ASSETS", make_assets(tmp_path))
    assert localize_data_docs(make_site(tmp_path)).ok


def test_the_table_names_every_cdn_url_of_gx_templates():
    found = {url for template in GX_TEMPLATES.glob("*.j2") for url in remote_loads(template.read_text())}
    assert found and found <= set(CDN_FILES), found - set(CDN_FILES)
    assert len(found) == len(CDN_FILES) == 16  # the table has no URL GX no longer uses


def test_the_lock_file_pins_what_the_table_names():
    manifest = json.loads((ASSETS_DIR / "package.json").read_text())["dependencies"]
    locked = json.loads((ASSETS_DIR / "package-lock.json").read_text())["packages"]
    for url, cdn in CDN_FILES.items():
        version = locked[f"node_modules/{cdn.package}"]["version"]
        assert version == cdn.version or version.startswith(f"{cdn.version}."), url
        assert manifest[cdn.package].removeprefix(f"npm:{re.sub(r'-[0-9.]+$', '', cdn.package)}@") == version, url


def test_the_report_is_a_model_that_survives_json(tmp_path):
    report = localize_data_docs(make_site(tmp_path), tmp_path / "none")
    assert LocalizeReport.model_validate_json(report.model_dump_json()) == report


@pytest.mark.slow
def test_validate_questions_localizes_its_data_docs_and_survives_missing_assets(tmp_path, monkeypatch):
    monkeypatch.setattr(data_docs, "DEFAULT_ASSETS", tmp_path / "not-installed")
    docs = tmp_path / "reports" / "gx"
    records = [*(question(f"q{i}", template_id=f"t{i}") for i in range(10)), unanswerable("u1")]
    validation = validate_questions(records, SUITE, thresholds=SMALL, data_docs_dir=docs)
    offline = validation.data_docs_offline
    assert offline is not None and offline.site_dir == docs.resolve() and offline.pages >= 3
    assert offline.unknown == [] and set(offline.left) == set(offline.missing) == set(CDN_FILES)
    assert BOOTSTRAP_CSS in validation.data_docs_index.read_text()  # the page is kept as GX wrote it
    assert validation.model_dump()["data_docs_offline"]["missing"]  # travels with the task's result
