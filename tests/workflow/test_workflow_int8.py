"""`paradit workflow run` of the Z-Image Turbo fixture on a `z_image_turbo_int8_convrot`-style
file (issue 52): the graph names the int8 DiT file (ConvRot groups of 64 at the tiny widths,
written from the format's definition: `tests/quant_files.py`) beside the Qwen3 encoder and the
VAE; the backend its plan starts keeps the DiT's linears int8 (`/v1/info`), and the workflow
makes the image of its request on that backend, byte for byte.

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

from pathlib import Path

from comfy_files import WAN_PREFIX, quantizable, qwen3_comfy, vae_ldm, z_image_original
from comfy_templates import workflow_run
from quant_files import write_int8
from safetensors.torch import save_file

from paradit.backend.models.presets import build_preset
from paradit.backend.tools.workflow import plan_of

FIXTURE = Path(__file__).parents[1] / "comfy_workflows" / "z_image_turbo.ui.json"
BF16_NAME = "z_image_turbo_tiny_bf16.safetensors"
INT8_NAME = "z_image_turbo_tiny_int8_convrot.safetensors"


def _comfyui(root: Path) -> Path:
    """A ComfyUI folder with the tiny Z-Image files, the DiT int8_convrot."""
    tiny = build_preset("tiny-z-image")
    models = root / "models"
    for sub in ("diffusion_models", "text_encoders", "vae"):
        (models / sub).mkdir(parents=True)
    dit = z_image_original(tiny.transformer.state_dict())
    write_int8(models / "diffusion_models" / INT8_NAME, dit, quantizable, WAN_PREFIX, 64)
    save_file(
        qwen3_comfy(tiny.text_encoder.state_dict()),
        str(models / "text_encoders" / "qwen_3_tiny.safetensors"),
    )
    save_file(vae_ldm(tiny.vae.state_dict()), str(models / "vae" / "ae_tiny.safetensors"))
    return root


def test_z_image_int8_convrot_workflow_runs_on_the_int8_file(tmp_path, paradit_warm, backends):
    comfy = _comfyui(tmp_path / "ComfyUI")
    text = FIXTURE.read_text()
    assert BF16_NAME in text
    workflow = tmp_path / "z_image_turbo_int8_convrot.ui.json"
    workflow.write_text(text.replace(BF16_NAME, INT8_NAME))
    plan, _ = plan_of(str(workflow), str(comfy))
    assert plan.serve["model"].endswith(INT8_NAME)
    server, out, record, _, frames = workflow_run(
        paradit_warm, backends, plan, workflow, comfy, tmp_path / "out"
    )
    assert server.info()["ranks"][0]["weights"]["stored"] == {"int8": 46}
    assert record["workflow"]["variant"] == "tiny-z-image"
    assert (out / "image.png").read_bytes() == frames[0]
