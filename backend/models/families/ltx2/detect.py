"""LTX-2's single files, recognised from their headers: the checkpoint as Lightricks ships it
and ComfyUI users hold it (`ltx-2-19b-dev.safetensors`, `-fp8`, `-distilled`, GGUFs of its
DiT), its video VAE (inside the checkpoint, under `vae.`) and the Gemma 3 text encoder file
(`gemma_3_12B_it.safetensors`, Hugging Face's names under `model.`).

The checkpoint holds every part of the model but the text encoder: the DiT under
`model.diffusion_model.` (in Lightricks' names: `patchify_proj`, `adaln_single`,
`av_ca_*_adaln_single`, `transformer_blocks.N.attn1.q_norm`...) with the two text connectors
beside it (`model.diffusion_model.video_embeddings_connector.`, `audio_...`), the text
projection at the top (`text_embedding_projection.aggregate_embed.weight`: the stacked Gemma
hidden states to one width), the video VAE under `vae.`, the audio VAE under `audio_vae.` and
the vocoder under `vocoder.` (`files.py` maps each to diffusers' component).

What a header cannot show: the head widths (128 for the video stream and 64 for the audio
stream of the real model, 16 and 8 for the tiny preset's, read off the widths) and dev or
distilled (the same shapes: the file name tells; a distilled file's variant is
`ltx-2-distilled`, which runs on its own 8-step schedule, `adapter.py`).

LTX-2.3 (`ltx-2.3-22b-dev.safetensors`, `-fp8`; variant `ltx-2.3`, the tiny one's
`tiny-ltx2.3`): a DiT without a caption projection, its gates (`to_gate_logits`), its nine
modulations a block and its prompt AdaLN (`prompt_adaln_single`) read off the keys; its
per-head rotary tables and perturbable attention, and the Gemma width its config names, are
2.3's (no weight shows them). A 2.3 (or 2.5) file named distilled is `ltx-2.3-distilled`
(`ltx-2.5-distilled`): the dev model's shapes on LTX-2's distilled schedule, 8 steps without
CFG (`adapter.distilled_sigmas`: what Lightricks' distilled pipelines and ComfyUI's 2.3 and
2.5 templates' ManualSigmas run).

LTX-2.5 (`ltx-2.5-22b-dev-transformer`; variant `ltx-2.5`, the tiny one's `tiny-ltx2.5`): 2.3's
DiT with the keyframe embedding (`keyframes_abs_pos_embedding`) and a video feed-forward without
biases, read off the keys; its text encoder is Gemma 4 (`encoders/gemma4.py`). Its diffusion
video VAE (`ltx-2.5-video-vae-bf16`: `decoder.conv_in_x_t`, ComfyUI's `CausalDiffusionVAE`) is
told by that key and runs (`diffusion_vae.py`), as its conv VAE does.
"""

from __future__ import annotations

from typing import Any

from ...single_file.detection import TINY_WIDTH, Detection, count_indices
from ...single_file.header import FileHeader

LTX2 = "ltx2"
DISTILLED = "-distilled"
"""The suffix of a distilled file's variant (`ltx-2-distilled`): it runs only its own schedule."""
MARKER = "av_ca_a2v_gate_adaln_single.emb.timestep_embedder.linear_1.weight"
"""The key that tells an LTX-2 DiT in Lightricks' names (diffusers' converter looks for it)."""
DIFFUSERS_MARKER = "av_cross_attn_video_a2v_gate.emb.timestep_embedder.linear_1.weight"
CONNECTORS = ("video_embeddings_connector.", "audio_embeddings_connector.")
"""The text connectors' keys under the DiT's prefix: diffusers' `LTX2TextConnectors`, not
part of its DiT."""
TEXT_PROJECTION = "text_embedding_projection."
BUNDLE_PREFIXES = {"vae": "vae.", "audio_vae": "audio_vae.", "vocoder": "vocoder."}
"""The checkpoint's parts besides the DiT and the connectors, by diffusers component."""
HEAD_DIMS = {TINY_WIDTH: (16, 8)}
"""Video width -> (video head width, audio head width): the tiny preset's; the real model's
are 128 and 64 (4096 = 32 x 128, 2048 = 32 x 64)."""
REAL_HEAD_DIMS = (128, 64)
_KEYFRAMES = "keyframes_abs_pos_embedding"
"""LTX-2.5's keyframe marker embedding (1 x the video width)."""
_CAPTION_PROJECTION = "caption_projection.linear_1.weight"
"""LTX-2.0's DiT projects the text itself; LTX-2.3's has no caption projection."""
GEMMA3_12B_WIDTH, TINY_TEXT_WIDTH = 3840, 32
"""The text encoder's width an LTX-2.3 DiT's config names (`caption_channels`, no weight of
the DiT shows it): Gemma 3 12B's; the tiny presets' Gemma's."""


def ltx2_dit(header: FileHeader, prefix: str, layout: str) -> Detection:
    """The Detection of an LTX-2 DiT in Lightricks' names ("original", ComfyUI's) or
    diffusers' (role "unknown" with the reasons when it does not fit)."""
    keys = {k[len(prefix) :]: v.shape for k, v in header.tensors.items() if k.startswith(prefix)}
    original = layout == "original"
    names = {
        "patch": "patchify_proj.weight" if original else "proj_in.weight",
        "audio_patch": "audio_patchify_proj.weight" if original else "audio_proj_in.weight",
    }
    reasons = [
        "LTX-2 DiT keys "
        + (
            "in Lightricks' names (av_ca_a2v_gate_adaln_single)"
            if original
            else "in diffusers' names"
        )
        + (f" under {prefix!r}" if prefix else "")
    ]
    version = _version(keys)
    try:
        config = _dit_config(keys, names) | (_ltx23_config(keys, original) if version else {})
    except KeyError as exc:
        return Detection("unknown", LTX2, reasons=(*reasons, f"no {exc}"))
    width, audio_width = config.pop("width"), config.pop("audio_width")
    heads = HEAD_DIMS.get(width)
    if heads is None and width % REAL_HEAD_DIMS[0] == 0 and audio_width % REAL_HEAD_DIMS[1] == 0:
        heads = REAL_HEAD_DIMS
    if heads is None:
        return Detection(
            "unknown",
            LTX2,
            reasons=(*reasons, f"widths {width} and {audio_width} are no known LTX-2 model's"),
        )
    config.update(
        num_attention_heads=width // heads[0],
        attention_head_dim=heads[0],
        audio_num_attention_heads=audio_width // heads[1],
        audio_attention_head_dim=heads[1],
    )
    tiny = width == TINY_WIDTH
    if version:
        config["caption_channels"] = TINY_TEXT_WIDTH if tiny else GEMMA3_12B_WIDTH
        reasons.append(
            f"LTX-{version}: no caption projection (the connectors project the text per "
            "stream), gated attention, the prompt AdaLN"
            + (", no video feed-forward biases, the keyframe embedding" if version == "2.5" else "")
            + "; its per-head rotary tables and perturbable attention, which no weight shows, "
            "are 2.3's"
        )
    reasons.append(
        f"video width {width} ({width // heads[0]} heads of {heads[0]}), audio width "
        f"{audio_width} ({audio_width // heads[1]} heads of {heads[1]}), "
        f"{config['num_layers']} layers, {config['in_channels']} latent channels, text width "
        f"{config['caption_channels']}"
    )
    distilled = "distilled" in header.name.lower()
    if distilled:
        reasons.append(
            "distilled (the file name says so; the header cannot): runs its own schedule, "
            "8 steps at diffusers' DISTILLED_SIGMA_VALUES without CFG (guidance 1)"
        )
    found = bundle(header, prefix) if original else ()
    if found:
        reasons.append("checkpoint: also holds " + ", ".join(found))
    base = ("tiny-ltx2" if tiny else "ltx-2") + (f".{version[-1]}" if version else "")
    variant = base + (DISTILLED if distilled else "")
    return Detection(
        "transformer", LTX2, variant, layout, prefix, config, tuple(reasons), bundled=found
    )


def _dit_config(keys: dict[str, tuple[int, ...]], names: dict[str, str]) -> dict[str, Any]:
    """diffusers' `LTX2VideoTransformer3DModel` config from the shapes (its other settings,
    the defaults, are LTX-2.0's), with the two streams' widths to split into heads."""
    width, in_channels = keys[names["patch"]]
    audio_width, audio_in = keys[names["audio_patch"]]
    config = {
        "_class_name": "LTX2VideoTransformer3DModel",
        "in_channels": in_channels,
        "out_channels": keys["proj_out.weight"][0],
        "audio_in_channels": audio_in,
        "audio_out_channels": keys["audio_proj_out.weight"][0],
        "cross_attention_dim": keys["transformer_blocks.0.attn2.to_k.weight"][1],
        "audio_cross_attention_dim": keys["transformer_blocks.0.audio_attn2.to_k.weight"][1],
        "num_layers": count_indices(keys, r"transformer_blocks\.(\d+)\.attn1\.to_q\.weight$"),
        "width": width,
        "audio_width": audio_width,
    }
    if _CAPTION_PROJECTION in keys:
        config["caption_channels"] = keys[_CAPTION_PROJECTION][1]
    return config


def _version(keys: dict[str, tuple[int, ...]]) -> str:
    """ "" for LTX-2.0 (its DiT projects the text), "2.5" for a DiT with the keyframe
    embedding or a video feed-forward without biases, else "2.3"."""
    if _CAPTION_PROJECTION in keys:
        return ""
    if _KEYFRAMES in keys or "transformer_blocks.0.ff.net.0.proj.bias" not in keys:
        return "2.5"
    return "2.3"


def _ltx23_config(keys: dict[str, tuple[int, ...]], original: bool) -> dict[str, Any]:
    """LTX-2.3's settings (a DiT without a caption projection): the gates and the prompt
    modulation from their weights (9 modulations a block with it, 6 without), the prompt
    AdaLN's own timestep embedding where the file has one; the rotary layout and the
    perturbable attention, which no weight shows, 2.3's."""
    block = "transformer_blocks.0."
    prompt = "prompt_adaln_single." if original else "prompt_adaln."
    return {
        "gated_attn": f"{block}attn1.to_gate_logits.weight" in keys,
        "audio_gated_attn": f"{block}audio_attn1.to_gate_logits.weight" in keys,
        "cross_attn_mod": keys[f"{block}scale_shift_table"][0] == 9,
        "audio_cross_attn_mod": keys[f"{block}audio_scale_shift_table"][0] == 9,
        "use_prompt_adaln_single": f"{prompt}linear.weight" in keys,
        "use_prompt_embeddings": False,
        "rope_type": "split",
        "perturbed_attn": True,
        # LTX-2.5's
        "ff_bias": f"{block}ff.net.0.proj.bias" in keys,
        "audio_ff_bias": f"{block}audio_ff.net.0.proj.bias" in keys,
        "use_keyframes_abs_pos_embedding": _KEYFRAMES in keys,
    }


def bundle(header: FileHeader, prefix: str) -> tuple[str, ...]:
    """The diffusers components a checkpoint holds besides its DiT: "connectors" (both
    connectors and the text projection), "vae", "audio_vae", "vocoder"."""
    keys = header.tensors
    found = []
    if all(any(k.startswith(prefix + c) for k in keys) for c in CONNECTORS) and any(
        k.startswith(TEXT_PROJECTION) for k in keys
    ):
        found.append("connectors")
    for name, part_prefix in BUNDLE_PREFIXES.items():
        if any(k.startswith(part_prefix) for k in keys):
            found.append(name)
    return tuple(found)


# -- the video VAE (under `vae.` in the checkpoint) -------------------------------------------

VAE_STATISTICS = "per_channel_statistics.mean-of-means"
DIFFUSION_DECODER = "decoder.conv_in_x_t.weight"
"""The key of LTX-2.5's diffusion video decoder (its stage-5 input projection of the noised
pixels): ComfyUI's VAELoader tells `CausalDiffusionVAE` by it (comfy/sd.py)."""


def ltx2_vae(header: FileHeader) -> Detection | None:
    """LTX-2's video VAE in Lightricks' names (`encoder.down_blocks.N.res_blocks.M`, causal
    3D convolutions `conv.conv`, its latent statistics), or None for other files."""
    keys = {k: v.shape for k, v in header.tensors.items()}
    first = keys.get("encoder.conv_in.conv.weight")
    if first is None or len(first) != 5 or VAE_STATISTICS not in keys:
        return None
    if not any(".res_blocks." in k for k in keys):
        return None
    latent = keys[VAE_STATISTICS][0]
    reasons = (
        "LTX-2 video VAE keys in Lightricks' names (down_blocks.N.res_blocks, "
        "per_channel_statistics)",
        f"{latent} latent channels, base width {first[0]}",
    )
    config = {"latent_channels": latent, "base_width": first[0]}
    return Detection("vae", LTX2, "ltx-2 video vae", "original", "", config, reasons)
