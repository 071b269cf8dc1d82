"""`POST /v1/workflows` on a backend of the tiny Wan 2.1 T2V files started with
`--comfyui-dir`: the fixture's UI form queues the job `workflow import` maps it to (202 with
its request; the job runs and makes the frames of that request sent to `POST /v1/jobs`),
`?dry_run=1` answers what `workflow import --json` prints, and a workflow naming a file
outside the ComfyUI folder (`..`, an absolute path, a link leading out), a file the backend
does not run, or a node paradit does not map is refused with 422 naming the node; a server
without `--comfyui-dir` resolves none.

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from comfy_workflow_files import write_comfyui
from conftest import run_job

from paradit.backend.client.http import BackendError
from paradit.backend.config import ServeConfig
from paradit.backend.serving.workflows import WorkflowRefused, plan_for_server
from paradit.backend.tools.workflow import plan_of

sys.path.insert(0, str(Path(__file__).parents[1] / "comfy_workflows"))
from make_fixtures import GRAPHS, to_ui  # noqa: E402

FIXTURES = Path(__file__).parents[1] / "comfy_workflows"
NAME = "wan21_t2v"


@pytest.fixture(scope="module")
def comfy(tmp_path_factory) -> Path:
    return write_comfyui(tmp_path_factory.mktemp("ComfyUI"))


@pytest.fixture(scope="module")
def server(comfy, backends):
    """A backend of the fixture's files, resolving workflows in `comfy`."""
    plan, _ = plan_of(str(FIXTURES / f"{NAME}.ui.json"), str(comfy))
    return backends.get(plan.serve["model"], 1, *plan.serve_argv()[2:], "--comfyui-dir", str(comfy))


def _refused(server, workflow: dict) -> str:
    with pytest.raises(BackendError) as caught:
        server.submit_workflow(workflow)
    assert caught.value.status == 422, caught.value
    return str(caught.value)


def test_a_workflow_queues_the_job_import_maps_it_to(comfy, server):
    workflow = json.loads((FIXTURES / f"{NAME}.ui.json").read_text())
    plan, variant = plan_of(str(FIXTURES / f"{NAME}.ui.json"), str(comfy))
    dry = server.submit_workflow(workflow, dry_run=True)
    assert dry["request"] == plan.request and dry["serve"] == plan.serve
    assert dry["nodes"] == plan.to_dict()["nodes"] and dry["variant"] == variant
    assert dry["workflow"]["file"] == "request body" and dry["workflow"]["format"] == "ui"
    created = server.submit_workflow(workflow)
    assert set(created) == {"id", "status", "request"} and created["request"] == plan.request
    job = server.wait(created["id"], timeout_s=300)
    frames = [server.frame(job["id"], i) for i in range(job["num_frames"])]
    _, direct = run_job(server, plan.body())  # the same request sent to POST /v1/jobs
    assert frames == direct


def test_files_outside_the_comfyui_folder_are_refused(comfy, server, tmp_path):
    outside = tmp_path / "secret.safetensors"
    outside.write_bytes(
        (comfy / "models/diffusion_models/wan2.1_t2v_tiny_fp32.safetensors").read_bytes()
    )
    link = comfy / "models/diffusion_models/leads_out.safetensors"
    link.symlink_to(outside)
    for name, words in (
        ("../../secret.safetensors", "a name outside"),
        (str(outside), "a name outside"),
        ("leads_out.safetensors", "a link leading outside"),
    ):
        graph = GRAPHS[NAME]()
        graph["37"]["inputs"]["unet_name"] = name
        error = _refused(server, graph)
        assert error.startswith("node 37 (UNETLoader): ") and words in error, error
    graph = GRAPHS[NAME]()
    graph["39"]["inputs"]["vae_name"] = "../vae/wan_2.1_vae_tiny.safetensors"
    assert _refused(server, graph).startswith("node 39 (VAELoader): ")


def test_files_the_backend_does_not_run_and_unknown_nodes_are_refused(comfy, server):
    dit = comfy / "models/diffusion_models/wan2.1_t2v_tiny_fp32.safetensors"
    (dit.parent / "another_copy.safetensors").write_bytes(dit.read_bytes())  # not its file
    graph = GRAPHS[NAME]()
    graph["37"]["inputs"]["unet_name"] = "another_copy.safetensors"
    error = _refused(server, graph)
    assert error.startswith("node 37 (UNETLoader): ") and "this server runs" in error, error
    ui = to_ui(GRAPHS[NAME]())
    ui["nodes"][0]["type"] = "WanVideoModelLoader"
    error = _refused(server, ui)
    assert error.startswith("node 1 (WanVideoModelLoader): not a node paradit maps"), error


def test_a_server_without_comfyui_dir_resolves_no_workflow(comfy):
    config = ServeConfig(
        model=str(comfy / "models/diffusion_models/wan2.1_t2v_tiny_fp32.safetensors")
    )
    with pytest.raises(WorkflowRefused, match="started without --comfyui-dir"):
        plan_for_server(GRAPHS[NAME](), "0" * 64, "", config, ("uni_pc",))
