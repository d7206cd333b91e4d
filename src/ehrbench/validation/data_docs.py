"""Offline Great Expectations Data Docs: the files GX's pages load from public CDNs, served by the site itself.

GX 1.x page templates (great_expectations/render/view/templates/) load Bootstrap, jQuery, Popper, bootstrap-table,
bootstrap-datepicker, Font Awesome and vega from CDNs, so offline a page is bare headings. reports/gx_assets/ pins
exactly those versions in an npm lock file (`make gx-assets` installs them into its node_modules/).
`localize_data_docs` copies the files a site's pages load into `<site>/static/vendor/<name>@<version>/` and points
each page at them with a path relative to that page, so the site keeps working when copied whole (the report site
copies it as gx/). GX's remote logos become the copies GX writes into `<site>/static/images/`, or nothing. Links
(`<a href>`) are not loads and stay. A remote URL this module does not know is left in place and reported.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

ASSETS_DIR = Path(__file__).resolve().parents[3] / "reports" / "gx_assets"
DEFAULT_ASSETS = ASSETS_DIR / "node_modules"  # read at call time: tests point it elsewhere
INSTALL_HINT = "`make gx-assets` installs them (npm ci in reports/gx_assets/)"
VENDOR_DIR = "static/vendor"
IMAGES_DIR = "static/images"  # GX copies its logos there itself
GX_IMAGE_HOST = "great-expectations-web-assets.s3.us-east-2.amazonaws.com"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CdnFile:
    package: str  # folder under node_modules; an npm alias where a second version is needed
    version: str  # as the URL pins it: exact, or a major version ("5") that the lock file resolves
    path: str  # the file inside the package
    folders: tuple[str, ...] = ()  # package folders the file loads from (Font Awesome's css/ -> ../webfonts/)


_BT_1_19_1 = "https://unpkg.com/bootstrap-table@1.19.1/dist"
_BT_1_19_0 = "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control"
_CDNJS = "https://cdnjs.cloudflare.com/ajax/libs"

# Every CDN URL of GX 1.x's templates. jsDelivr serves a bare package URL as the file its "jsdelivr" field names.
CDN_FILES: dict[str, CdnFile] = {
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css":
        CdnFile("@forevolve/bootstrap-dark", "1.1.0", "dist/css/bootstrap-prefers-dark.css"),
    "https://cdn.jsdelivr.net/npm/vega@5": CdnFile("vega", "5", "build/vega.min.js"),
    "https://cdn.jsdelivr.net/npm/vega-lite@5": CdnFile("vega-lite", "5", "build/vega-lite.min.js"),
    "https://cdn.jsdelivr.net/npm/vega-embed@6": CdnFile("vega-embed", "6", "build/vega-embed.min.js"),
    f"{_CDNJS}/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css":
        CdnFile("bootstrap-datepicker", "1.9.0", "dist/css/bootstrap-datepicker.min.css"),
    f"{_CDNJS}/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js":
        CdnFile("bootstrap-datepicker", "1.9.0", "dist/js/bootstrap-datepicker.min.js"),
    f"{_CDNJS}/font-awesome/6.6.0/css/all.min.css":
        CdnFile("@fortawesome/fontawesome-free", "6.6.0", "css/all.min.css", folders=("webfonts",)),
    f"{_CDNJS}/popper.js/1.12.9/umd/popper.min.js": CdnFile("popper.js-1.12.9", "1.12.9", "dist/umd/popper.min.js"),
    "https://code.jquery.com/jquery-3.7.1.min.js": CdnFile("jquery", "3.7.1", "dist/jquery.min.js"),
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css":
        CdnFile("bootstrap", "4.3.1", "dist/css/bootstrap.min.css"),
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js":
        CdnFile("bootstrap", "4.3.1", "dist/js/bootstrap.min.js"),
    f"{_BT_1_19_1}/bootstrap-table.min.css": CdnFile("bootstrap-table", "1.19.1", "dist/bootstrap-table.min.css"),
    f"{_BT_1_19_1}/bootstrap-table.min.js": CdnFile("bootstrap-table", "1.19.1", "dist/bootstrap-table.min.js"),
    f"{_BT_1_19_1}/extensions/filter-control/bootstrap-table-filter-control.min.js": CdnFile(
        "bootstrap-table", "1.19.1", "dist/extensions/filter-control/bootstrap-table-filter-control.min.js"),
    # index pages load the minified stylesheet, the other pages the plain one
    f"{_BT_1_19_0}/bootstrap-table-filter-control.min.css": CdnFile(
        "bootstrap-table-1.19.0", "1.19.0", "dist/extensions/filter-control/bootstrap-table-filter-control.min.css"),
    f"{_BT_1_19_0}/bootstrap-table-filter-control.css": CdnFile(
        "bootstrap-table-1.19.0", "1.19.0", "dist/extensions/filter-control/bootstrap-table-filter-control.css"),
}

# Where a page loads something: attributes of loading tags (not <a>), CSS url() and @import.
_LOADING_TAG = re.compile(r"<(?:script|link|img|source|iframe|embed|video|audio|track|object)\b[^>]*>", re.I)
_LOADING_ATTR = re.compile(r"""(\s)(src|href|srcset|poster|data)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""",
                           re.I)
_CSS_URL = re.compile(r"""url\(\s*(["']?)((?:https?:)?//[^"')\s]+)\1\s*\)""", re.I)
_CSS_IMPORT = re.compile(r"""(@import\s+)(["'])((?:https?:)?//[^"']+)\2""", re.I)
# SRI and CORS on a file:// load block it (the response is opaque); the copies are the bytes the hashes name
_SRI_ATTR = re.compile(r"""\s(?:integrity|crossorigin)(?=[\s=/>])(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'>]+))?""",
                       re.I)


class LocalizeReport(BaseModel):
    """What `localize_data_docs` did to one site. `left`: remote URLs the pages still load (unknown ones and
    known ones whose npm files are `missing`), each with the pages (relative to the site) that load it."""

    site_dir: Path
    assets: Path
    pages: int = 0
    rewritten: int = 0  # pages changed
    replaced: dict[str, str] = Field(default_factory=dict)  # CDN URL -> its copy, relative to the site
    logos: list[str] = Field(default_factory=list)  # remote GX images (query dropped) pointed at local copies or cut
    left: dict[str, list[str]] = Field(default_factory=dict)
    missing: dict[str, str] = Field(default_factory=dict)  # known CDN URL -> why its npm file is not usable
    vendored_bytes: int = 0  # size of the site's static/vendor/ (this run's copies and earlier ones)

    @property
    def unknown(self) -> list[str]:
        return [url for url in self.left if url not in self.missing]

    @property
    def ok(self) -> bool:
        return not self.left

    def problems(self) -> list[str]:
        problems = []
        if self.missing:
            problems.append(f"{len(self.missing)} CDN file(s) not installed under {self.assets}, so the pages still "
                            f"load them from the network; {INSTALL_HINT}")
        if self.unknown:
            problems.append(f"remote URL(s) this module does not know, left in the pages: {', '.join(self.unknown)}")
        return problems


def localize_data_docs(site_dir: Path, assets: Path | None = None) -> LocalizeReport:
    """Copy the CDN files the HTML pages under `site_dir` load from `assets` (an npm node_modules folder; default:
    reports/gx_assets/node_modules) into the site and rewrite the pages to load the copies (see the module doc).
    Never fails for missing assets: those URLs stay and the report says so. Running it again changes nothing."""
    site_dir = site_dir.resolve()
    vendor = _Vendor(site_dir, (assets if assets is not None else DEFAULT_ASSETS).resolve())
    report = LocalizeReport(site_dir=site_dir, assets=vendor.assets)
    logos: set[str] = set()
    for page in sorted(site_dir.rglob("*.html")):
        report.pages += 1
        text = page.read_text(encoding="utf-8")
        rewrite = _PageRewrite(page, site_dir, vendor)
        new = rewrite.apply(text)
        if new != text:
            _write_atomically(page, new)
            report.rewritten += 1
        for url in rewrite.left:
            report.left.setdefault(url, []).append(page.relative_to(site_dir).as_posix())
        logos |= rewrite.logos
    report.replaced = dict(sorted(vendor.copies.items()))
    report.missing = dict(sorted(vendor.missing.items()))
    report.logos = sorted(logos)
    report.vendored_bytes = sum(f.stat().st_size for f in (site_dir / VENDOR_DIR).rglob("*") if f.is_file())
    for problem in report.problems():
        log.warning("Data Docs %s: %s", site_dir, problem)
    return report


def remote_loads(html: str) -> list[str]:
    """The remote URLs an HTML text (or GX template) loads, in order: tag attributes, CSS url() and @import."""
    urls = [url for tag in _LOADING_TAG.finditer(html) for _, _, url in _tag_urls(tag.group(0))]
    urls += [m.group(2) for m in _CSS_URL.finditer(html)] + [m.group(3) for m in _CSS_IMPORT.finditer(html)]
    return [url for url in urls if _is_remote(url)]


class _Vendor:
    """Copies CDN files into the site on first use; remembers what it copied and what it could not."""

    def __init__(self, site_dir: Path, assets: Path):
        self.site_dir, self.assets = site_dir, assets
        self.copies: dict[str, str] = {}
        self.missing: dict[str, str] = {}

    def copy(self, url: str) -> Path | None:
        """The copy of a known CDN URL's file in the site, or None (unknown URL, or its npm file is missing)."""
        cdn = CDN_FILES.get(url)
        if cdn is None or url in self.missing:
            return None
        if url not in self.copies:
            root = self._package_root(url, cdn)
            if root is None:
                return None
            (root / cdn.path).parent.mkdir(parents=True, exist_ok=True)
            _copy_if_changed(self.assets / cdn.package / cdn.path, root / cdn.path)
            for folder in cdn.folders:
                shutil.copytree(self.assets / cdn.package / folder, root / folder, dirs_exist_ok=True,
                                copy_function=_copy_if_changed)
            self.copies[url] = (root / cdn.path).relative_to(self.site_dir).as_posix()
        return self.site_dir / self.copies[url]

    def _package_root(self, url: str, cdn: CdnFile) -> Path | None:
        """`<site>/static/vendor/<name>@<version>` for the installed package, or None (recorded as missing)."""
        manifest = self.assets / cdn.package / "package.json"
        try:
            package = json.loads(manifest.read_text())
            name, version = package["name"], package["version"]
        except (OSError, ValueError, KeyError):
            self.missing[url] = f"{manifest} not found or unreadable"
            return None
        if version != cdn.version and not version.startswith(f"{cdn.version}."):
            self.missing[url] = f"{cdn.package} {version} is installed, the page wants {cdn.version}"
            return None
        absent = [p for p in (cdn.path, *cdn.folders) if not (self.assets / cdn.package / p).exists()]
        if absent:
            self.missing[url] = f"{cdn.package} {version} has no {', '.join(absent)}"
            return None
        return self.site_dir / VENDOR_DIR / f"{name}@{version}"


class _PageRewrite:
    """Rewrites one page's remote loads; collects the URLs it left and the GX logos it cut."""

    def __init__(self, page: Path, site_dir: Path, vendor: _Vendor):
        self.page, self.site_dir, self.vendor = page, site_dir, vendor
        self.left: list[str] = []
        self.logos: set[str] = set()

    def apply(self, text: str) -> str:
        text = _LOADING_TAG.sub(lambda m: self._tag(m.group(0)), text)
        text = _CSS_URL.sub(self._css_url, text)
        return _CSS_IMPORT.sub(self._css_import, text)

    def _tag(self, tag: str) -> str:
        localized = False

        def attribute(m: re.Match) -> str:
            nonlocal localized
            space, name, value = m.group(1), m.group(2), next(g for g in m.groups()[2:] if g is not None)
            if name.lower() == "srcset":
                new = " ".join(self._url(token) or "" if _is_remote(token) else token for token in value.split())
            elif _is_remote(value):
                new = self._url(value)
                if new is None:  # a GX logo with no local copy: no source, the alt text shows
                    return ""
            else:
                return m.group(0)
            localized |= new != value and not _is_remote(new)
            return f'{space}{name}="{new}"'

        tag = _LOADING_ATTR.sub(attribute, tag)
        return _SRI_ATTR.sub("", tag) if localized else tag

    def _css_url(self, m: re.Match) -> str:
        new = self._url(m.group(2))
        return "none" if new is None else f"url({m.group(1)}{new}{m.group(1)})"

    def _css_import(self, m: re.Match) -> str:
        new = self._url(m.group(3))
        return "" if new is None else f"{m.group(1)}{m.group(2)}{new}{m.group(2)}"

    def _url(self, url: str) -> str | None:
        """The replacement of a remote URL: a path relative to the page, the URL itself (left, recorded), or None
        (a GX logo without a local copy: drop it)."""
        copy = self.vendor.copy(url)
        if copy is not None:
            return self._relative(copy)
        parts = urlsplit(url if "://" in url else f"https:{url}")
        if parts.hostname == GX_IMAGE_HOST:
            self.logos.add(parts._replace(query="", fragment="").geturl())
            local = self.site_dir / IMAGES_DIR / Path(parts.path).name
            return self._relative(local) if local.is_file() else None
        if url not in self.left:
            self.left.append(url)
        return url

    def _relative(self, target: Path) -> str:
        return Path(os.path.relpath(target, self.page.parent)).as_posix()


def _tag_urls(tag: str) -> list[tuple[str, str, str]]:
    """(attribute, quote-free value, url) for each URL a loading tag names (srcset: one per candidate)."""
    found = []
    for m in _LOADING_ATTR.finditer(tag):
        name, value = m.group(2), next(g for g in m.groups()[2:] if g is not None)
        urls = value.split() if name.lower() == "srcset" else [value]
        found += [(name, value, url) for url in urls]
    return found


def _is_remote(url: str) -> bool:
    return url.lower().startswith(("http://", "https://", "//"))


def _copy_if_changed(source: str | Path, target: str | Path) -> None:
    """Copy unless the target already has the source's size (a second run of one build copies nothing)."""
    source, target = Path(source), Path(target)
    if not target.is_file() or target.stat().st_size != source.stat().st_size:
        shutil.copyfile(source, target)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
