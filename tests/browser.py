"""Headless Chromium (Debian's package) driven by Playwright, as the browser tests take it
(tests/frontends/test_web_browser.py, test_comfyui_queue.py, test_comfyui_templates.py): where
it must be, the mark that skips them without it on a developer's machine (under CI they run and
fail, so a missing browser cannot leave the suite green), and the browser and its pages.
Needs `apt-get install -y chromium` and `pip install playwright` (never `playwright install`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() in ("true", "1")
"""Where Chromium must be there (the browser tests fail without it instead of skipping)."""

NEEDS_CHROMIUM = pytest.mark.skipif(
    not CHROMIUM.is_file() and not IN_CI,
    reason=f"{CHROMIUM} is missing: apt-get install -y chromium",
)
"""A browser test's `pytestmark`."""


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium browser (Playwright's `Browser`), closed on leaving."""
    assert CHROMIUM.is_file(), f"{CHROMIUM} is missing (CI=true): apt-get install -y chromium"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser: Any, width: int, height: int) -> Any:
    """A page of `browser` with a `width` x `height` viewport, waiting 30 s at the most."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(30_000)
    return page
