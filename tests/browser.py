"""Headless Chromium for the dashboard tests: Debian's package (`make browser` installs it), driven by Playwright,
which downloads no browser of its own. Without it a test skips — except under CI, where it must be there."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
# Without the background-networking flags Chromium keeps calling home, which this network refuses.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
OUTPUT = Path(__file__).resolve().parents[1] / "test-output"  # screenshots (gitignored)


@contextmanager
def chromium_page(width: int = 1400, height: int = 900) -> Iterator:
    """A Playwright page in headless Chromium that records the page's errors and every request it makes."""
    if not CHROMIUM.is_file():
        message = f"{CHROMIUM} is missing: `make browser` installs Debian's chromium"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.errors, page.requested = [], []
            page.on("pageerror", lambda error: page.errors.append(str(error)))
            page.on("request", lambda request: page.requested.append(request.url))
            yield page
        finally:
            browser.close()


def screenshot(page, name: str) -> Path:
    OUTPUT.mkdir(exist_ok=True)
    path = OUTPUT / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
