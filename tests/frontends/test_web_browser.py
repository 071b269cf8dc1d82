"""The app in a real browser: headless Chromium (Debian's package) driven by Playwright.

Types a prompt, clicks Generate and waits for the finished video to load in the player.
The screenshot is kept under $PARADIT_TEST_ARTIFACTS (default: test-artifacts/ in the repo).
Needs `apt-get install -y chromium` and `pip install playwright` (never `playwright install`).

Cost: about 7 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import NEEDS_CHROMIUM, chromium, new_page

from paradit.web.app import launch
from paradit.web.ui import build_ui

REPO = Path(__file__).resolve().parents[2]
PROMPT = "a red fox running through snow"
LOADED_VIDEO = """() => [...document.querySelectorAll('video')].some(
    v => v.offsetParent !== null && v.readyState >= 1 && v.duration > 0)"""

pytestmark = NEEDS_CHROMIUM


@pytest.fixture(scope="module")
def app_url(backends, tmp_path_factory) -> Iterator[tuple[str, object]]:
    client = backends.get("tiny-wan", 2)
    out = tmp_path_factory.mktemp("browser-outputs")
    demo = build_ui(client, out, poll_s=0.1)
    try:
        yield launch(demo, out), client
    finally:
        demo.close()


@pytest.fixture
def page() -> Iterator[object]:
    with chromium() as browser:
        yield new_page(browser, 1280, 1000)


def test_type_a_prompt_generate_and_see_the_video(app_url, page):
    url, backend = app_url
    artifacts = Path(os.environ.get("PARADIT_TEST_ARTIFACTS", REPO / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "web-generate.png"
    page.goto(url)
    try:
        page.get_by_label("Prompt", exact=True).fill(PROMPT)
        page.get_by_role("button", name="Generate").click()
        page.locator('.paradit-status[data-status="succeeded"]').wait_for(timeout=60_000)
        page.wait_for_function(LOADED_VIDEO, timeout=30_000)
        assert "Done: 4 steps" in page.locator(".paradit-status").inner_text()
        size = (
            page.locator("video")
            .filter(visible=True)
            .evaluate("v => [v.videoWidth, v.videoHeight]")
        )
        assert size == [64, 64]
        job_id = page.locator(".paradit-status").get_attribute("data-job")
        job = backend.job(job_id)
        assert job["status"] == "succeeded" and job["request"]["prompt"] == PROMPT
    finally:
        page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    # the history lists the job (refreshed when it finished); a click on it shows its video
    page.get_by_role("tab", name="History").click()
    page.get_by_text(job_id, exact=True).filter(visible=True).first.click()
    page.wait_for_function(LOADED_VIDEO, timeout=30_000)
    page.screenshot(path=str(artifacts / "web-history.png"), full_page=True)
    # the backend tab: health, world size, one row per rank
    page.get_by_role("tab", name="Backend").click()
    panel = page.get_by_text("DiT parameters held").locator("xpath=ancestor::table")
    assert panel.locator("tbody tr").count() == 2
    page.get_by_text("World size: 2").wait_for()
    # the memory plan's decision, and the settings, read-only (the app did not start it)
    plan = page.get_by_label("Memory plan and layout (GET /v1/info: memory, plan)")
    assert "memory plan:" in plan.input_value() and "replicas: 1" in plan.input_value()
    page.get_by_text("Backend settings").click()
    page.get_by_text("Read-only:").wait_for()
    assert page.get_by_label("offload", exact=True).is_disabled()
    assert page.get_by_role("button", name="Apply (restarts the backend)").count() == 0
    page.screenshot(path=str(artifacts / "web-backend.png"), full_page=True)
