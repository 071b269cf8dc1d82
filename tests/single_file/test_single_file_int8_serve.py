"""An int8_convrot Z-Image file served (issue 52): the DiT's int8 rows stay int8 on 2 ranks.

Files as ComfyUI's `z_image_turbo_int8_convrot` and its Qwen3 encoder hold them (the original
key names, Z-Image's fused `attention.qkv`, a `comfy_quant` record a layer; ConvRot in groups
of 64 at the tiny widths, the 170-wide layers plain per-row int8), written from the format's
definition (`tests/quant_files.py`).

- `--weights auto` keeps the DiT's linears int8 (`/v1/info` `ranks[].weights.stored` names
  `int8`), at one byte a value plus a float32 scale a row; the text encoder (int8 too) is
  dequantized at load.
- The job equals the same job on the DiT's dequantized file (float32, the CPU compute dtype)
  within rounding; a LoRA job likewise, and the next plain job is byte-identical to the first
  (the stored rows were never written).
- `--weights int8` requantizes that float file to per-row int8 (no rotation) on load.
- A `qwen_image_edit_2511_int8_convrot`-style DiT (diffusers' names) with the Qwen2.5-VL
  encoder is served as an edit model with its linears int8; its edit equals the same edit on
  its dequantized file within rounding.

Cost: about 9 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import numpy as np
from comfy_files import WAN_PREFIX, quantizable, qwen3_comfy, vae_ldm, z_image_original
from conftest import REFERENCE_FLAGS, run_job
from lora_files import peft_lora
from quant_files import write_int8
from safetensors.torch import save_file

from paradit.backend.models.presets import build_preset
from paradit.backend.tools.equivalence import FLOAT32, IDENTICAL, WITHIN_ROUNDING, compare
from paradit.backend.tools.verify import decode_png

BODY = {"prompt": "kept in int8", "seed": 4, "width": 32, "height": 32, "num_frames": 1}
BODY |= {"num_inference_steps": 2}


def _files(root):
    tiny = build_preset("tiny-z-image")
    dit_int8 = root / "diffusion_models" / "z_image_turbo_tiny_int8_convrot.safetensors"
    dit_float = root / "diffusion_models" / "z_image_turbo_tiny_dequantized.safetensors"
    encoder = root / "text_encoders" / "qwen_3_tiny_int8_convrot.safetensors"
    vae = root / "vae" / "ae_tiny.safetensors"
    for path in (dit_int8, encoder, vae):
        path.parent.mkdir(parents=True, exist_ok=True)
    held = write_int8(
        dit_int8, z_image_original(tiny.transformer.state_dict()), quantizable, WAN_PREFIX, 64
    )
    save_file({WAN_PREFIX + k: v.contiguous() for k, v in held.items()}, str(dit_float))
    linear = lambda name, t: t.dim() == 2 and "layers." in name  # noqa: E731
    write_int8(encoder, qwen3_comfy(tiny.text_encoder.state_dict()), linear, group=16)
    save_file(vae_ldm(tiny.vae.state_dict()), str(vae))
    quantized = [k for k, v in held.items() if quantizable(k, v)]
    sizes = {"values": sum(held[k].numel() for k in quantized)}
    sizes["rows"] = sum(held[k].shape[0] for k in quantized)
    return tiny, dit_int8, dit_float, ("--text-encoder", str(encoder), "--vae", str(vae)), sizes


def _frames(pngs: list[bytes]) -> np.ndarray:
    return np.stack([decode_png(p) for p in pngs])


def _within_rounding(reference, got) -> None:
    (ref_client, ref_job, ref_frames), (client, job, frames) = reference, got
    result = compare(
        _frames(ref_frames),
        _frames(frames),
        FLOAT32,
        ref_client.latents(ref_job["id"]),
        client.latents(job["id"]),
    )
    assert result.verdict in {IDENTICAL, WITHIN_ROUNDING}, result.overall


def test_int8_convrot_file_served_stays_int8_and_equals_its_dequantized_file(tmp_path, backends):
    tiny, dit_int8, dit_float, flags, sizes = _files(tmp_path)
    peft_lora(
        backends.lora_dir / "int8_resident.safetensors",
        tiny.transformer,
        ("attention.to_q", "feed_forward.w2"),
        seed=12,
    )
    resident = backends.get(str(dit_int8), 2, *flags, *REFERENCE_FLAGS)
    reference = backends.get(str(dit_float), 1, *flags, *REFERENCE_FLAGS)
    held, full = resident.info()["ranks"], reference.info()["ranks"]
    weights = held[0]["weights"]
    assert (weights["mode"], weights["stored"], weights["int8_compute"]) == (
        "auto",
        {"int8": 46},
        False,
    )
    assert full[0]["weights"]["stored"] == {}
    saved = sizes["values"] * 3 - sizes["rows"] * 4  # 1 byte a value of 4, a float32 scale a row
    assert sum(r["dit_param_bytes"] for r in held) == full[0]["dit_param_bytes"] - saved
    first = run_job(resident, BODY)
    _within_rounding((reference, *run_job(reference, BODY)), (resident, *first))
    lora = {**BODY, "loras": [{"name": "int8_resident", "strength": 0.8}]}
    job, frames = run_job(resident, lora)
    _within_rounding((reference, *run_job(reference, lora)), (resident, job, frames))
    assert frames != first[1]  # the LoRA changed the job
    again = run_job(resident, BODY)
    assert again[1] == first[1]
    assert np.array_equal(resident.latents(again[0]["id"]), resident.latents(first[0]["id"]))
    requantized = backends.get(str(dit_float), 2, *flags, "--weights", "int8")
    assert requantized.info()["ranks"][1]["weights"]["stored"] == {"int8": 46}
    image = _frames(run_job(requantized, BODY)[1]).astype(float)
    assert np.abs(image - _frames(first[1]).astype(float)).max() < 0.2 * 255


def _png(width: int, height: int, seed: int) -> str:
    import base64
    import io

    from PIL import Image

    pixels = (np.random.RandomState(seed).rand(height, width, 3) * 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


def test_qwen_image_edit_2511_int8_convrot_file_served(tmp_path, backends):
    """A `qwen_image_edit_2511_int8_convrot`-style DiT (diffusers' names, as the real file;
    ConvRot groups of 64) beside the Qwen2.5-VL encoder (vision tower included) and the VAE:
    recognised as Edit-Plus by its name, served with its linears int8, and the edit equals the
    same edit on its dequantized file within rounding."""
    tiny = build_preset("tiny-qwen-image-edit")
    folder = tmp_path / "models"
    folder.mkdir()
    dit_int8 = folder / "qwen_image_edit_2511_tiny_int8_convrot.safetensors"
    dit_float = folder / "qwen_image_edit_2511_tiny_dequantized.safetensors"
    encoder = folder / "qwen_2.5_vl_tiny_vl.safetensors"
    vae = folder / "qwen_image_vae_tiny.safetensors"
    held = write_int8(dit_int8, tiny.transformer.state_dict(), quantizable, group=64)
    save_file({k: v.contiguous() for k, v in held.items()}, str(dit_float))
    state = tiny.text_encoder.state_dict()
    save_file(
        {
            k.replace("model.language_model.", "model.").replace("model.visual.", "visual."): v
            for k, v in state.items()
        },
        str(encoder),
    )
    save_file(tiny.vae.state_dict(), str(vae))
    flags = ("--text-encoder", str(encoder), "--vae", str(vae), "--vae-tile", "128x128")
    resident = backends.get(str(dit_int8), 1, *flags, *REFERENCE_FLAGS)
    reference = backends.get(str(dit_float), 1, *flags, *REFERENCE_FLAGS)
    info = resident.info()
    assert info["ranks"][0]["weights"]["stored"] == {"int8": 28}
    assert info["task"] == "edit"
    body = {"prompt": "make the fox red", "seed": 5, "image": _png(64, 48, 1)}
    body |= {"num_inference_steps": 2}
    _within_rounding((reference, *run_job(reference, body)), (resident, *run_job(resident, body)))
