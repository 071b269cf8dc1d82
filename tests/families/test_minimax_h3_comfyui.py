"""MiniMax H3's first frame with `image_prep` comfyui (families/minimax_h3/comfyui_prep.py), the
`video_minimax_h3_i2v` template's job, against values worked here from ComfyUI's behaviour
(read 2026: Comfy-Org/ComfyUI comfy_extras/nodes_minimax_h3.py 542de101 `MiniMaxH3ImageToVideo`;
comfyanonymous/ComfyUI comfy/text_encoders/minimax.py dd0eeb17 `MiniMaxH3Tokenizer`,
`token_tags_from_embeds_info`, `MiniMaxH3ClipModel` (layer "last", no mask, no final norm:
comfy/text_encoders/llama.py `Qwen3VL_32BConfig`, 50 layers, `final_norm` False);
Comfy-Org/ComfyUI comfy/text_encoders/qwen3vl.py 1ad32705 and qwen_vl.py 0f5aa305
`process_qwen2vl_images`, `qwen2vl_mrope_position_ids`; comfy/ldm/minimax/vae.py 3bd3ca17
`encode`; comfy/model_base.py 26adb81a `MiniMaxH3.extra_conds` (the payload's `seed` is the
sampler's); comfy/ldm/minimax/model.py `_cond_video_rows`).

- the presentation: tokens, tags, rotary positions and the hidden state after layer 50 are
  diffusers' fl2va step's; the vision tower's input is ComfyUI's (worked element by element
  here); the prompt's embeddings of the job equal the tiny Qwen3-VL run on that reference;
- the keyframe latents: the posterior's mean of ComfyUI's pixels (not diffusers' sample);
- the keyframe noise: a CPU generator restarted at the job's seed per keyframe, in the rows'
  shape; the job's own video and audio noise stay the job's without `image_prep`.
(2 ranks against 1: the family contract's "comfyui first frame" job.)

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch
from image_jobs import encoded, preset_pipeline, run_here
from PIL import Image
from qwen3_vl_patches import patches_by_hand

from paradit.backend.models.families.minimax_h3 import comfyui_prep as prep
from paradit.backend.models.families.minimax_h3.tiny_job import COMFYUI_FIRST

SEED = 6


@pytest.fixture(scope="module")
def pipe():
    return preset_pipeline("tiny-minimax-h3", 256)[0]


def _canvas(body: dict) -> Image.Image:
    """ComfyUI's first frame on the canvas: the 8-bit image stretched with Lanczos (its
    common_upscale goes through the 8-bit PIL image, which `k / 255` round-trips)."""
    with Image.open(io.BytesIO(base64.b64decode(body["image"]))) as image:
        return image.convert("RGB").resize((body["width"], body["height"]), Image.LANCZOS)


@pytest.mark.fast
def test_vision_sizes_worked_by_hand():
    """Sides rounded to 32, kept inside 3136..12845056 pixels: 32x32 (1024) scales by
    sqrt(3136 / 1024) = 1.75 to 56, then up to 64x64; 768x1344 stays; 4096x3232 (13238272)
    scales by 1 / 1.0152 to 4034.7 x 3183.6, down to 4032x3168; 100x70 rounds to 96x64."""
    assert prep.vision_size(32, 32) == (64, 64)
    assert prep.vision_size(768, 1344) == (768, 1344)
    assert prep.vision_size(4096, 3232) == (4032, 3168)
    assert prep.vision_size(100, 70) == (96, 64)


def _comfy_vision(canvas: Image.Image) -> tuple[torch.Tensor, tuple[int, int]]:
    """ComfyUI's vision input for a canvas: the float image `k / 255` bilinearly resized
    (align_corners False) to its vision size, (x - 0.5) / 0.5; patch k of the (rows / 2) x
    (columns / 2) blocks of 2x2 16-pixel patches, in block order and within a block row by
    row, holds channel, frame (the image twice), row and column in that order."""
    pixels = np.asarray(canvas, dtype=np.float32) / 255.0
    image = torch.from_numpy(pixels).permute(2, 0, 1)[None]
    h, w = prep.vision_size(canvas.height, canvas.width)
    image = torch.nn.functional.interpolate(image, size=(h, w), mode="bilinear")[0]
    return patches_by_hand((image - 0.5) / 0.5), (h // 16, w // 16)


def _comfy_presentation(pipe, body: dict):
    """ComfyUI's tokens for one first frame and the prompt: `"<Picture 1>: "` and the prompt
    tokenized alone, no special tokens, the vision block (start, one pad per merged patch,
    end) between; the tags (1 text, 0 the vision block with its two markers); the rotary
    positions (text on all three axes in order; the image's tokens at (s, s + row, s +
    column) from its first pad's position s; the text after it from s + the larger merged
    side)."""
    tok = pipe.tokenizer
    markers = ("<|vision_start|>", "<|image_pad|>", "<|vision_end|>")
    start, pad, end = (tok.convert_tokens_to_ids(t) for t in markers)
    values, (gh, gw) = _comfy_vision(_canvas(body))
    rows, cols = gh // 2, gw // 2
    label = tok("<Picture 1>: ", add_special_tokens=False)["input_ids"]
    prompt = tok(body["prompt"], add_special_tokens=False)["input_ids"]
    ids = label + [start] + [pad] * (rows * cols) + [end] + prompt
    s = len(label) + 1
    tags = torch.ones(len(ids), dtype=torch.long)
    tags[s - 1 : s + rows * cols + 1] = 0
    positions = torch.zeros(3, len(ids), dtype=torch.long)
    positions[:, :s] = torch.arange(s)
    for k in range(rows * cols):
        positions[:, s + k] = torch.tensor([s, s + k // cols, s + k % cols])
    after = torch.arange(s + max(rows, cols), s + max(rows, cols) + len(ids) - s - rows * cols)
    positions[:, s + rows * cols :] = after
    return ids, tags, positions, values, torch.tensor([[1, gh, gw]])


def test_presentation_is_comfyuis(pipe):
    """The job's prompt embeddings (rank 0's encode) equal the tiny Qwen3-VL's hidden state
    after layer 50 on ComfyUI's tokens, positions and vision input worked here (no mask),
    bit for bit, and its tags ComfyUI's; without `image_prep` (the tiny processor's CLIP
    statistics and bicubic resize) the embeddings differ."""
    ids, tags, positions, values, grid = _comfy_presentation(pipe, COMFYUI_FIRST)
    with torch.no_grad():
        out = pipe.text_encoder.model(
            input_ids=torch.tensor([ids]),
            position_ids=positions[:, None],
            pixel_values=values,
            image_grid_thw=grid,
            output_hidden_states=True,
            use_cache=False,
        )
    reference = out.hidden_states[50]
    tensors = encoded(pipe, COMFYUI_FIRST)
    assert torch.equal(tensors["text_token_tags"], tags)
    assert torch.equal(tensors["prompt_embeds"], reference)
    plain = encoded(pipe, {k: v for k, v in COMFYUI_FIRST.items() if k != "image_prep"})
    assert plain["prompt_embeds"].shape == reference.shape
    assert not torch.equal(plain["prompt_embeds"], reference)


def test_text_alone_is_presented_as_comfyui_does(pipe):
    """Without a frame (the t2v template) ComfyUI's tokens are the prompt's alone, no special
    tokens, all tagged text, read after layer 50 without a mask: the job's encode, bit for
    bit (no `image_prep` needed)."""
    body = {k: v for k, v in COMFYUI_FIRST.items() if k not in ("image", "image_prep")}
    ids = pipe.tokenizer(body["prompt"], add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        out = pipe.text_encoder.model(
            input_ids=torch.tensor([ids]), output_hidden_states=True, use_cache=False
        )
    tensors = encoded(pipe, body)
    assert torch.equal(tensors["text_token_tags"], torch.ones(len(ids), dtype=torch.long))
    assert torch.equal(tensors["prompt_embeds"], out.hidden_states[50])


def test_keyframe_latents_are_the_posteriors_mean(pipe):
    """ComfyUI's keyframe latent: the canvas `k / 255`, to [-1, 1] and back ((x * 2 - 1 + 1)
    * 0.5: 63 of the 256 8-bit values move), ImageNet-normalised, the encoder's moments'
    first half (the mean, not a sample, not rounded to float16) normalised with the VAE's
    statistics; the job's `condition_latents_0` is it, bit for bit."""
    levels = torch.arange(256, dtype=torch.float32) / 255.0
    assert int(((levels * 2.0 - 1.0 + 1.0) * 0.5 != levels).sum()) == 63
    vae = pipe.vae
    pixels = torch.from_numpy(np.asarray(_canvas(COMFYUI_FIRST), dtype=np.float32) / 255.0)
    x = pixels.permute(2, 0, 1)[None, :, None] * 2.0 - 1.0
    mean = torch.tensor(pipe.pixel_mean, dtype=torch.float32).view(1, 3, 1, 1, 1)
    std = torch.tensor(pipe.pixel_std, dtype=torch.float32).view(1, 3, 1, 1, 1)
    x = ((x + 1.0) * 0.5 - mean) / std
    with torch.no_grad():
        moments = vae._encode(x)
    channels = vae.config.latent_channels
    z = moments[:, :channels]
    z_mean = torch.tensor(vae.config.latents_mean).view(1, -1, 1, 1, 1)
    z_std = torch.tensor(vae.config.latents_std).view(1, -1, 1, 1, 1)
    reference = (z - z_mean) / z_std
    latents = encoded(pipe, COMFYUI_FIRST)["condition_latents_0"]
    assert torch.equal(latents, reference)
    plain = encoded(pipe, {k: v for k, v in COMFYUI_FIRST.items() if k != "image_prep"})
    assert not torch.equal(plain["condition_latents_0"], reference)  # diffusers samples


def _comfy_rows(z: torch.Tensor, seed: int) -> torch.Tensor:
    """ComfyUI's noised rows of one keyframe: (t, h/2, w/2) rows of (channel, 2, 2) values,
    mixed 0.999 / (1.0 - 0.999) (Python floats) with `torch.randn` of the rows' shape from a
    fresh CPU generator seeded with `seed`."""
    b, c, t, h, w = z.shape
    rows = torch.einsum("nctrhpwq->nthwcrpq", z.reshape(b, c, t, 1, h // 2, 2, w // 2, 2))
    rows = rows.reshape(-1, c * 4)
    noise = torch.randn(rows.shape, generator=torch.Generator().manual_seed(seed))
    return 0.999 * rows + (1.0 - 0.999) * noise


@pytest.mark.fast
def test_condition_rows_restart_comfyuis_generator():
    """Two keyframes: each one's rows noised from the generator restarted at the seed (the
    same noise twice), as worked here; the seed changes them."""
    z = [torch.randn(1, 4, 1, 4, 6, generator=torch.Generator().manual_seed(i)) for i in (1, 2)]
    rows = prep.condition_rows(z, SEED, (1, 2, 2))
    assert torch.equal(rows, torch.cat([_comfy_rows(x, SEED) for x in z]))
    assert not torch.equal(prep.condition_rows(z, SEED + 1, (1, 2, 2)), rows)


def _first_call(pipe, body: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The video and audio rows the DiT's first call of the job (world size 1) reads."""
    seen = []

    def hook(module, args, kwargs):
        if not seen:
            video, audio = kwargs["hidden_states"][0], kwargs["audio_hidden_states"][0]
            seen.append((video.clone(), audio.clone()))

    handle = pipe.transformer.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        run_here(pipe, body)
    finally:
        handle.remove()
    return seen[0]


def test_job_noises_the_keyframe_comfyuis_way(pipe):
    """The job's first DiT call: its condition rows are ComfyUI's (the job's keyframe latent,
    seed 6, worked here), its generated video rows and audio rows the job's without
    `image_prep` (paradit's noise, drawn after diffusers' draw for the keyframe)."""
    video, audio = _first_call(pipe, COMFYUI_FIRST)
    latents = encoded(pipe, COMFYUI_FIRST)["condition_latents_0"]
    cond = _comfy_rows(latents, COMFYUI_FIRST["seed"])
    assert torch.equal(video[: len(cond)], cond)
    plain_video, plain_audio = _first_call(
        pipe, {k: v for k, v in COMFYUI_FIRST.items() if k != "image_prep"}
    )
    assert torch.equal(video[len(cond) :], plain_video[len(cond) :])
    assert torch.equal(audio, plain_audio)


def test_last_image_is_refused(pipe):
    """ComfyUI crops a last frame before scaling it, diffusers' resize step after."""
    body = {**COMFYUI_FIRST, "last_image": COMFYUI_FIRST["image"]}
    with pytest.raises(ValueError, match="centre-crops the last frame"):
        encoded(pipe, body)
