"""Open a report in headless Debian chromium through playwright, at a laptop's width, and read what it shows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
WIDTH = 1280
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]


def chromium_or_skip() -> str:
    """The browser path; the test is skipped, saying why, when chromium or playwright is absent."""
    if not Path(CHROMIUM).is_file() and not shutil.which("chromium"):
        pytest.skip(f"Debian's chromium is not installed ({CHROMIUM}); apt-get install -y chromium")
    pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    return CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")


def open_report(path: Path, screenshot: Path | None = None) -> dict:
    """What a reader at 1280 px gets: widths, every image's decoded size, plot names, headings, text."""
    from playwright.sync_api import sync_playwright

    executable = chromium_or_skip()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            page.goto(path.resolve().as_uri(), wait_until="load")
            seen = page.evaluate("""() => ({
                scrollWidth: document.documentElement.scrollWidth,
                innerWidth: window.innerWidth,
                tablesScrollingSideways: Array.from(document.querySelectorAll('.wide'))
                    .filter(box => box.scrollWidth > box.clientWidth)
                    .map(box => (box.previousElementSibling || {}).textContent || '(first table)'),
                images: Array.from(document.images).map(img => ({
                    name: img.dataset.plot || img.alt, complete: img.complete, width: img.naturalWidth})),
                headings: Array.from(document.querySelectorAll('h2, h3')).map(h => h.textContent.trim()),
                tableHeaders: Array.from(document.querySelectorAll('th')).map(th => th.textContent.trim()),
                text: document.body.innerText,
                plotsRendered: document.body.dataset.plotsRendered,
            })""")
            if screenshot is not None:
                page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    return seen
