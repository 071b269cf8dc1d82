""" "Queue on paradit" in ComfyUI's own web page, in a real browser.

ComfyUI's frontend (the `comfyui-frontend-package` wheel, its built static files, unchanged)
is served with our node pack's extension (`nodes/js`, the pack's WEB_DIRECTORY) by a small
stand-in for the few ComfyUI server routes the page reads as it starts (tests/comfyui_page.py:
settings, users, the node definitions generated from backend/workflow/sockets.py, the
extension list); no ComfyUI server runs.
Headless Chromium (Debian's package) driven by Playwright opens it, loads the tiny Wan 2.1
T2V workflow (`tests/comfy_workflows/wan21_t2v.ui.json`), clicks the action-bar button
"Queue on paradit" and follows the job on a real `paradit serve` (the fixture's files,
`--comfyui-dir`, `--cors-origin` the page's origin): the job is posted, its progress shows
(the ranks sleep 1.5 s after step 2, `PARADIT_FAULT` kind `slow`, so a step is always seen),
its video plays in the panel and the "paradit" sidebar tab, and the server's job is the
workflow's request. The settings dialog lists "paradit server URL" under paradit, and a
workflow naming a file the backend does not run shows the server's 422 with the node's path.
Screenshots go to $PARADIT_TEST_ARTIFACTS (default test-artifacts/).
Needs `apt-get install -y chromium`, `pip install playwright` (never `playwright install`) and
the test extra's `comfyui-frontend-package`.

Cost: about 18 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import NEEDS_CHROMIUM, chromium, new_page
from comfy_workflow_files import write_comfyui
from comfyui_page import REPO, comfyui_page

from paradit.backend.serving.http import HttpServer
from paradit.backend.tools.workflow import plan_of

WORKFLOW = REPO / "tests/comfy_workflows/wan21_t2v.ui.json"
ARTIFACTS = Path(os.environ.get("PARADIT_TEST_ARTIFACTS", REPO / "test-artifacts"))
SLOW_STEP = ("PARADIT_FAULT", "rank=all,at=step:2,kind=slow,secs=1.5")

pytestmark = NEEDS_CHROMIUM


@pytest.fixture(scope="module")
def page_and_server(backends, tmp_path_factory) -> Iterator[tuple[str, object, Path]]:
    """ComfyUI's page (its URL) and a paradit backend that accepts its calls."""
    comfy = write_comfyui(tmp_path_factory.mktemp("ComfyUI"))
    dit = comfy / "models/diffusion_models/wan2.1_t2v_tiny_fp32.safetensors"
    (dit.parent / "another_copy.safetensors").write_bytes(dit.read_bytes())  # not its file
    settings: dict = {"Comfy.TutorialCompleted": True}
    http = HttpServer(comfyui_page(settings), "127.0.0.1", 0)
    plan, _ = plan_of(str(WORKFLOW), str(comfy))
    flags = [*plan.serve_argv()[2:], "--comfyui-dir", str(comfy), "--cors-origin", http.url]
    backend = backends.start(plan.serve["model"], 1, *flags, env=(SLOW_STEP,))
    settings["paradit.ServerURL"] = backend.url
    http.start()
    try:
        yield http.url, backend.client, comfy
    finally:
        http.stop()


@pytest.fixture
def browser() -> Iterator[object]:
    with chromium() as browser:
        yield browser


# Every text the panel's job line shows, in order (it changes faster than a test can look).
RECORD_STATUS = """
window.__paradit_seen = [];
new MutationObserver(() => {
  const line = document.querySelector('.paradit-queue .paradit-job-status');
  const seen = window.__paradit_seen;
  if (line && seen[seen.length - 1] !== line.textContent) seen.push(line.textContent);
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def _open(browser, url: str, workflow: dict):
    page = new_page(browser, 1400, 900)
    page.add_init_script(RECORD_STATUS)
    page.goto(url)
    page.wait_for_function("() => window.app?.graph && window.app.extensionManager?.setting")
    page.evaluate("w => window.app.loadGraphData(w)", workflow)
    return page


def test_queue_on_paradit_posts_the_workflow_and_shows_progress_and_the_video(
    page_and_server, browser
):
    url, server, comfy = page_and_server
    artifacts = ARTIFACTS
    artifacts.mkdir(parents=True, exist_ok=True)
    page = _open(browser, url, json.loads(WORKFLOW.read_text()))
    setting = page.evaluate("() => app.extensionManager.setting.get('paradit.ServerURL')")
    assert setting == server.url
    try:
        page.get_by_role("button", name="Queue on paradit").click()
        done = page.locator('.paradit-queue .paradit-job[data-status="succeeded"]')
        done.wait_for(timeout=120_000)
        page.locator(".paradit-queue video").evaluate(
            "v => v.readyState >= 1 || new Promise(r => v.onloadedmetadata = r)"
        )
        size = page.locator(".paradit-queue video").evaluate("v => [v.videoWidth, v.videoHeight]")
    finally:
        page.screenshot(path=str(artifacts / "comfyui-queue-on-paradit.png"))
    assert size == [32, 32]
    job_id = done.get_attribute("data-job")
    seen = page.evaluate("() => window.__paradit_seen")
    assert any(re.search(rf"job {job_id}: running: step [1-4] of 4", s) for s in seen), seen
    assert f"job {job_id}: done: video.mp4" in seen[-1]
    plan, _ = plan_of(str(WORKFLOW), str(comfy))
    job = server.job(job_id)
    assert job["status"] == "succeeded" and job["request"]["prompt"] == plan.request["prompt"]
    assert job["num_frames"] == 5
    # the result is also in the "paradit" sidebar tab
    page.get_by_role("button", name="paradit").first.click()
    listed = page.locator(f'.paradit-jobs .paradit-job[data-job="{job_id}"] video')
    listed.wait_for()
    link = page.locator(f'.paradit-jobs .paradit-job[data-job="{job_id}"] a')
    assert link.inner_text() == f"video.mp4 ({server.url}/v1/jobs/{job_id}/video)"
    page.screenshot(path=str(artifacts / "comfyui-paradit-sidebar.png"))


def test_a_refused_workflow_shows_the_servers_reason_with_the_node(page_and_server, browser):
    url, server, _ = page_and_server
    workflow = json.loads(WORKFLOW.read_text())
    loader = next(node for node in workflow["nodes"] if node["type"] == "UNETLoader")
    loader["widgets_values"][0] = "another_copy.safetensors"
    page = _open(browser, url, workflow)
    # the settings dialog lists the server's URL under "paradit"
    page.evaluate("() => app.extensionManager.command.execute('Comfy.ShowSettingsDialog')")
    page.get_by_role("dialog").get_by_text("paradit", exact=True).first.click()
    page.get_by_text("paradit server URL", exact=True).wait_for()
    page.screenshot(path=str(ARTIFACTS / "comfyui-paradit-settings.png"))
    page.keyboard.press("Escape")
    before = len(server.jobs())
    page.get_by_role("button", name="Queue on paradit").click()
    failed = page.locator('.paradit-queue .paradit-job[data-status="failed"]')
    failed.wait_for()
    text = failed.inner_text()
    assert f"{server.url} answered 422: node {loader['id']} (UNETLoader): " in text, text
    assert "another_copy.safetensors: this server runs" in text, text
    page.get_by_text("answered 422").filter(visible=True).last.wait_for()  # the toast too
    assert len(server.jobs()) == before  # nothing queued
