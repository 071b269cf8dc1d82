"""ComfyUI's CFGNorm node in a workflow (`paradit workflow import`): on a Qwen-Image graph it
becomes `cfg_mode` norm with its strength as `cfg_norm` where the sampler's cfg is above 1,
in the API and the UI format (whose widget values save `pre_cfg` after the strength, as
ComfyUI's templates do); at cfg 1 strength 1 changes nothing and other strengths are refused;
its pre-CFG form, two on one model and a family whose packed pixels paradit does not know
are refused naming the node. (The job it becomes: tests/sampling/test_cfg_norm.py.)

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "comfy_workflows"))

from comfy_workflow_files import write_comfyui  # noqa: E402
from make_fixtures import qwen_image, to_ui, z_image_turbo  # noqa: E402

from paradit.backend.tools.workflow import plan_of  # noqa: E402

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def comfy(tmp_path_factory) -> Path:
    return write_comfyui(tmp_path_factory.mktemp("ComfyUI"))


def _with_cfg_norm(graph: dict, sampler: str, model_from: str, **widgets) -> dict:
    """`graph` with CFGNorm (node 75) between `model_from` and the sampler's model input."""
    inputs = {"model": [model_from, 0], "strength": 1.0, "pre_cfg": False, **widgets}
    graph["75"] = {"class_type": "CFGNorm", "inputs": inputs, "_meta": {"title": "CFGNorm"}}
    graph[sampler]["inputs"]["model"] = ["75", 0]
    return graph


def _plan(comfy: Path, tmp_path: Path, graph: dict):
    path = tmp_path / "workflow.json"
    path.write_text(json.dumps(graph))
    return plan_of(str(path), str(comfy))[0]


@pytest.mark.parametrize("form", ["api", "ui"])
def test_cfg_norm_becomes_cfg_mode_norm_at_its_strength(comfy, tmp_path, form):
    graph = _with_cfg_norm(qwen_image(), "3", "66", strength=0.8)
    plan = _plan(comfy, tmp_path, to_ui(graph) if form == "ui" else graph)
    # the fixture's KSampler: cfg 2.5; without CFGNorm the job is cfg_mode plain
    assert plan.request["guidance_scale"] == 2.5
    assert (plan.request["cfg_mode"], plan.request["cfg_norm"]) == ("norm", 0.8)
    assert any(t == "CFGNorm" and "cfg_norm" in text for _, t, text in plan.lines)


def test_cfg_norm_at_cfg_1(comfy, tmp_path):
    """One branch: strength 1 scales its denoised image by |c| / (|c| + 1e-8), the branch as
    it is; another strength would scale it, which paradit does not."""
    graph = _with_cfg_norm(qwen_image(), "3", "66")
    graph["3"]["inputs"]["cfg"] = 1.0
    plan = _plan(comfy, tmp_path, graph)
    assert "cfg_mode" not in plan.request and "cfg_norm" not in plan.request
    graph["75"]["inputs"]["strength"] = 0.5
    with pytest.raises(ValueError, match=r"^node 75 \(CFGNorm\): strength 0.5 at cfg 1"):
        _plan(comfy, tmp_path, graph)


def test_cfg_norm_refusals_name_the_node(comfy, tmp_path):
    graph = _with_cfg_norm(qwen_image(), "3", "66", pre_cfg=True)
    with pytest.raises(ValueError, match=r"^node 75 \(CFGNorm\): pre_cfg true"):
        _plan(comfy, tmp_path, graph)
    graph = _with_cfg_norm(qwen_image(), "3", "66")
    graph["76"] = {"class_type": "CFGNorm", "inputs": {"model": ["75", 0], "strength": 1.0}}
    graph["3"]["inputs"]["model"] = ["76", 0]
    with pytest.raises(ValueError, match=r"^node 76 \(CFGNorm\): a second CFGNorm"):
        _plan(comfy, tmp_path, graph)
    turbo = z_image_turbo()
    sampler = next(k for k, n in turbo.items() if n["class_type"] == "KSampler")
    turbo = _with_cfg_norm(turbo, sampler, turbo[sampler]["inputs"]["model"][0])
    turbo[sampler]["inputs"]["cfg"] = 2.0
    with pytest.raises(ValueError, match=r"^node 75 \(CFGNorm\): paradit runs CFGNorm on Qwen"):
        _plan(comfy, tmp_path, turbo)
