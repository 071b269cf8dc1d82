"""Tiny checkpoints in ComfyUI's own key layouts and formats, for the single-file tests.

The inverse of diffusers' converters, written out independently here (so a mistake in the
loader's key mapping cannot cancel against the same mistake in the files): diffusers names ->
the original Wan names ComfyUI's files use, and -> Black Forest Labs' Flux names. Each writer
returns the weights the file really holds, as diffusers' float32 state dict (fp8 and GGUF
values dequantized the way the formats define them): the reference a folder is saved with.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from paradit.backend.models.families.ltx2 import tiny as ltx2_tiny

WAN_PREFIX = "model.diffusion_model."
_WAN_INVERSE = (
    ("condition_embedder.time_embedder.linear_1", "time_embedding.0"),
    ("condition_embedder.time_embedder.linear_2", "time_embedding.2"),
    ("condition_embedder.text_embedder.linear_1", "text_embedding.0"),
    ("condition_embedder.text_embedder.linear_2", "text_embedding.2"),
    ("condition_embedder.time_proj", "time_projection.1"),
    ("condition_embedder.image_embedder.norm1", "img_emb.proj.0"),
    ("condition_embedder.image_embedder.ff.net.0.proj", "img_emb.proj.1"),
    ("condition_embedder.image_embedder.ff.net.2", "img_emb.proj.3"),
    ("condition_embedder.image_embedder.norm2", "img_emb.proj.4"),
    (".attn1.", ".self_attn."),
    (".attn2.", ".cross_attn."),
    (".to_out.0.", ".o."),
    (".to_q.", ".q."),
    (".to_k.", ".k."),
    (".to_v.", ".v."),
    (".add_k_proj.", ".k_img."),
    (".add_v_proj.", ".v_img."),
    (".norm_added_k.", ".norm_k_img."),
    (".ffn.net.0.proj.", ".ffn.0."),
    (".ffn.net.2.", ".ffn.2."),
    (".norm2.", ".norm3."),
)


def wan_original_name(name: str) -> str:
    """diffusers' WanTransformer3DModel name -> the original Wan / ComfyUI name."""
    if name == "scale_shift_table":
        return "head.modulation"
    if name.startswith("proj_out."):
        return "head.head." + name[len("proj_out.") :]
    name = re.sub(r"^(blocks\.\d+)\.scale_shift_table$", r"\1.modulation", name)
    for new, old in _WAN_INVERSE:
        name = name.replace(new, old)
    return name


def wan_original(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {wan_original_name(k): v for k, v in state.items()}


_VAE_RESNET_PARTS = (
    (".norm1.", ".residual.0."),
    (".conv1.", ".residual.2."),
    (".norm2.", ".residual.3."),
    (".conv2.", ".residual.6."),
    (".conv_shortcut.", ".shortcut."),
)


def wan22_vae_original(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' Wan 2.2 `AutoencoderKLWan` (is_residual) state dict -> the original Wan 2.2
    VAE names ComfyUI's `wan2.2_vae` keeps: each level's residual blocks and then its
    resample in one list (`encoder.downsamples.I.downsamples.J`)."""
    resnets: dict[str, int] = {}  # "encoder.down_blocks.I" -> its number of residual blocks
    for name in state:
        if m := re.match(r"^((?:en|de)coder\.(?:down|up)_blocks\.\d+)\.resnets\.(\d+)\.", name):
            resnets[m.group(1)] = max(resnets.get(m.group(1), 0), int(m.group(2)) + 1)
    out = {}
    for name, value in state.items():
        new = name
        if ".resnets." in name or "mid_block.resnets" in name:
            head, _, tail = name.rpartition(".resnets.")
            index, _, rest = tail.partition(".")
            rest = "." + rest
            for diffusers_part, original in _VAE_RESNET_PARTS:
                if rest.startswith(diffusers_part):
                    rest = original + rest[len(diffusers_part) :]
                    break
            new = f"{head}.resnets.{index}{rest}"
        m = re.match(
            r"^(encoder|decoder)\.(down|up)_blocks\.(\d+)\.(resnets\.(\d+)|(down|up)sampler)\.", new
        )
        if m:
            coder, way, level = m.group(1), m.group(2), m.group(3)
            block = m.group(5) or str(resnets[f"{coder}.{way}_blocks.{level}"])
            new = f"{coder}.{way}samples.{level}.{way}samples.{block}." + new[m.end() :]
        for diffusers_name, original in (
            ("quant_conv.", "conv1."),
            ("post_quant_conv.", "conv2."),
            ("encoder.conv_in.", "encoder.conv1."),
            ("decoder.conv_in.", "decoder.conv1."),
            ("encoder.norm_out.", "encoder.head.0."),
            ("decoder.norm_out.", "decoder.head.0."),
            ("encoder.conv_out.", "encoder.head.2."),
            ("decoder.conv_out.", "decoder.head.2."),
            ("encoder.mid_block.resnets.0.", "encoder.middle.0."),
            ("decoder.mid_block.resnets.0.", "decoder.middle.0."),
            ("encoder.mid_block.attentions.0.", "encoder.middle.1."),
            ("decoder.mid_block.attentions.0.", "decoder.middle.1."),
            ("encoder.mid_block.resnets.1.", "encoder.middle.2."),
            ("decoder.mid_block.resnets.1.", "decoder.middle.2."),
        ):
            if new.startswith(diffusers_name):
                new = original + new[len(diffusers_name) :]
                break
        assert new not in out, new
        out[new] = value
    return out


_QWEN21_2D_WEIGHTS = re.compile(r"\.resample\.1\.weight$|\.middle\.1\.(to_qkv|proj)\.weight$")


def qwen_image21_vae_comfy(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' `AutoencoderKLQwenImage21` state dict -> ComfyUI's `qwen_image_2.1_vae_bf16`:
    the Wan 2.2 VAE's original names, and each causal convolution's weight 3D of time 1
    (`[out, in, 1, k, k]`), as ComfyUI's `comfy/ldm/wan/vae2_2.py` `WanVAE(temporal_kernel=1)`
    holds it (Comfy-Org/ComfyUI 32671a67: `CausalConv3d` everywhere but the resamples' and the
    middle attention's `Conv2d`)."""
    return {
        name: value
        if value.dim() != 4 or not name.endswith(".weight") or _QWEN21_2D_WEIGHTS.search(name)
        else value.unsqueeze(2).contiguous()
        for name, value in wan22_vae_original(state).items()
    }


def flux_bfl(state: dict[str, torch.Tensor], width: int) -> dict[str, torch.Tensor]:
    """diffusers' FluxTransformer2DModel state dict -> Black Forest Labs' key layout."""
    out: dict[str, torch.Tensor] = {}
    s = dict(state)
    simple = {
        "time_text_embed.timestep_embedder.linear_1": "time_in.in_layer",
        "time_text_embed.timestep_embedder.linear_2": "time_in.out_layer",
        "time_text_embed.text_embedder.linear_1": "vector_in.in_layer",
        "time_text_embed.text_embedder.linear_2": "vector_in.out_layer",
        "time_text_embed.guidance_embedder.linear_1": "guidance_in.in_layer",
        "time_text_embed.guidance_embedder.linear_2": "guidance_in.out_layer",
        "context_embedder": "txt_in",
        "x_embedder": "img_in",
        "proj_out": "final_layer.linear",
    }
    for name in list(s):
        stem, _, suffix = name.rpartition(".")
        if stem in simple:
            out[f"{simple[stem]}.{suffix}"] = s.pop(name)
    for suffix in ("weight", "bias"):
        shift_last = s.pop(f"norm_out.linear.{suffix}")
        scale, shift = shift_last.chunk(2)
        out[f"final_layer.adaLN_modulation.1.{suffix}"] = torch.cat([shift, scale])
    blocks = {int(m.group(1)) for k in s if (m := re.match(r"transformer_blocks\.(\d+)\.", k))}
    for i in sorted(blocks):
        d, b = f"transformer_blocks.{i}.", f"double_blocks.{i}."
        for suffix in ("weight", "bias"):
            out[f"{b}img_attn.qkv.{suffix}"] = torch.cat(
                [s.pop(f"{d}attn.to_{x}.{suffix}") for x in "qkv"]
            )
            out[f"{b}txt_attn.qkv.{suffix}"] = torch.cat(
                [s.pop(f"{d}attn.add_{x}_proj.{suffix}") for x in "qkv"]
            )
            for src, dst in (
                ("norm1.linear", "img_mod.lin"),
                ("norm1_context.linear", "txt_mod.lin"),
                ("ff.net.0.proj", "img_mlp.0"),
                ("ff.net.2", "img_mlp.2"),
                ("ff_context.net.0.proj", "txt_mlp.0"),
                ("ff_context.net.2", "txt_mlp.2"),
                ("attn.to_out.0", "img_attn.proj"),
                ("attn.to_add_out", "txt_attn.proj"),
            ):
                out[f"{b}{dst}.{suffix}"] = s.pop(f"{d}{src}.{suffix}")
        for src, dst in (
            ("attn.norm_q", "img_attn.norm.query_norm"),
            ("attn.norm_k", "img_attn.norm.key_norm"),
            ("attn.norm_added_q", "txt_attn.norm.query_norm"),
            ("attn.norm_added_k", "txt_attn.norm.key_norm"),
        ):
            out[f"{b}{dst}.scale"] = s.pop(f"{d}{src}.weight")
    singles = {
        int(m.group(1)) for k in s if (m := re.match(r"single_transformer_blocks\.(\d+)\.", k))
    }
    for i in sorted(singles):
        d, b = f"single_transformer_blocks.{i}.", f"single_blocks.{i}."
        for suffix in ("weight", "bias"):
            out[f"{b}linear1.{suffix}"] = torch.cat(
                [s.pop(f"{d}attn.to_{x}.{suffix}") for x in "qkv"]
                + [s.pop(f"{d}proj_mlp.{suffix}")]
            )
            out[f"{b}modulation.lin.{suffix}"] = s.pop(f"{d}norm.linear.{suffix}")
            out[f"{b}linear2.{suffix}"] = s.pop(f"{d}proj_out.{suffix}")
        out[f"{b}norm.query_norm.scale"] = s.pop(f"{d}attn.norm_q.weight")
        out[f"{b}norm.key_norm.scale"] = s.pop(f"{d}attn.norm_k.weight")
    assert not s, f"unconverted: {sorted(s)}"
    return out


# -- formats: each returns the values the file holds (float32) under the file's keys ----------


_KREA2_INVERSE = (
    # diffusers' Krea2Transformer2DModel -> the original names ComfyUI's krea2 files keep
    (r"^img_in\.", "first."),
    (r"^time_embed\.linear_1\.", "tmlp.0."),
    (r"^time_embed\.linear_2\.", "tmlp.2."),
    (r"^time_mod_proj\.", "tproj.1."),
    (r"^txt_in\.norm\.weight$", "txtmlp.0.scale"),
    (r"^txt_in\.linear_1\.", "txtmlp.1."),
    (r"^txt_in\.linear_2\.", "txtmlp.3."),
    (r"^text_fusion\.", "txtfusion."),
    (r"^transformer_blocks\.", "blocks."),
    (r"^final_layer\.linear\.", "last.linear."),
    (r"^final_layer\.norm\.weight$", "last.norm.scale"),
    (r"^final_layer\.scale_shift_table$", "last.modulation.lin"),
    (r"\.attn\.to_q\.", ".attn.wq."),
    (r"\.attn\.to_k\.", ".attn.wk."),
    (r"\.attn\.to_v\.", ".attn.wv."),
    (r"\.attn\.to_out\.0\.", ".attn.wo."),
    (r"\.attn\.to_gate\.", ".attn.gate."),
    (r"\.attn\.norm_q\.weight$", ".attn.qknorm.qnorm.scale"),
    (r"\.attn\.norm_k\.weight$", ".attn.qknorm.knorm.scale"),
    (r"\.ff\.", ".mlp."),
    (r"\.norm1\.weight$", ".prenorm.scale"),
    (r"\.norm2\.weight$", ".postnorm.scale"),
    (r"\.scale_shift_table$", ".mod.lin"),
)


def krea2_original(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' Krea2Transformer2DModel state dict -> the original names ComfyUI's
    `krea2_turbo` file keeps, each block's six modulation vectors flattened into one (as
    diffusers' converter undoes)."""
    out = {}
    for name, value in state.items():
        block_modulation = name.startswith("transformer_blocks.") and name.endswith(
            ".scale_shift_table"
        )
        for pattern, new in _KREA2_INVERSE:
            name = re.sub(pattern, new, name)
        out[name] = value.reshape(-1) if block_modulation else value
    return out


def quantizable(name: str, tensor: torch.Tensor) -> bool:
    """The blocks' linear weights (Wan's and Flux's `blocks.N`, Z-Image's `layers.N` and
    refiners): what ComfyUI's fp8 files store in fp8."""
    return (
        tensor.dim() == 2
        and name.endswith(".weight")
        and any(part in name for part in ("blocks.", "layers.", "refiner."))
    )


FP8_COMFY_QUANT = json.dumps({"format": "float8_e4m3fn"})
"""ComfyUI's per-layer description of an fp8 layer (the `comfy_quant` tensor's bytes)."""


def write_safetensors(
    path: Path,
    original: dict[str, torch.Tensor],
    fmt: str,
    prefix: str = "",
    *,
    per_row: bool = False,
) -> dict[str, torch.Tensor]:
    """fmt: fp32, bf16, fp16, fp8_e4m3fn, fp8_scaled (ComfyUI's older layout: fp8 block weights
    with a float32 `scale_weight` each, a `scale_input`, and the `scaled_fp8` marker) or
    fp8_comfy_quant (its current one, which it converts the older to and saves: a float32
    `weight_scale` and `input_scale` and a `comfy_quant` JSON per fp8 layer, the layers listed
    in the `_quantization_metadata` metadata). `per_row`: the fp8 formats' weight scales are
    one per row (per output channel, shape `(rows,)`) instead of one per tensor, so a reader
    that takes the wrong rows' scales reads wrong values."""
    held: dict[str, torch.Tensor] = {}
    tensors: dict[str, torch.Tensor] = {}
    layers: dict[str, dict] = {}
    plain = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    for name, value in original.items():
        value = value.detach().float()
        layer = prefix + name[: -len("weight")]
        if fmt in plain or not quantizable(name, value):
            stored = value.to(plain.get(fmt, torch.bfloat16))
            held[name] = stored.float()
        elif fmt == "fp8_e4m3fn":
            stored = value.to(torch.float8_e4m3fn)
            held[name] = stored.float()
        else:
            if per_row:  # each row's own largest value maps to fp8's largest, 448
                scale = (value.abs().amax(dim=1, keepdim=True) / 448.0).clamp_min(1e-12)
            else:
                scale = value.abs().max() / 448.0
            stored = (value / scale).to(torch.float8_e4m3fn)
            held[name] = stored.float() * scale
            scale = scale.reshape(-1) if per_row else scale.reshape(())
            if fmt == "fp8_scaled":
                tensors[layer + "scale_weight"] = scale
                tensors[layer + "scale_input"] = torch.ones(())
            else:
                tensors[layer + "weight_scale"] = scale
                tensors[layer + "input_scale"] = torch.ones(())
                raw = torch.frombuffer(bytearray(FP8_COMFY_QUANT.encode()), dtype=torch.uint8)
                tensors[layer + "comfy_quant"] = raw.clone()
                layers[layer.removesuffix(".")] = json.loads(FP8_COMFY_QUANT)
        tensors[prefix + name] = stored.contiguous()
    if fmt == "fp8_scaled":
        tensors["scaled_fp8"] = torch.empty(0, dtype=torch.float8_e4m3fn)
    metadata = None
    if layers:
        quantization = {"format_version": "1.0", "layers": layers}
        metadata = {"_quantization_metadata": json.dumps(quantization)}
    save_file(tensors, str(path), metadata=metadata)
    return held


def write_gguf(
    path: Path, original: dict[str, torch.Tensor], qtype_name: str
) -> dict[str, torch.Tensor]:
    """A GGUF file as the GGUF node pack's converter writes one: block weights quantized
    (`qtype_name`: Q8_0, or a K-quant such as Q4_K: blocks of random valid bytes, as gguf-py
    cannot quantize K-quants; F32: none), the rest F32, 5-dim tensors flattened with their shape in
    `comfy.gguf.orig_shape.<name>`."""
    import gguf
    from gguf import quants

    qtype = gguf.GGMLQuantizationType[qtype_name]
    block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    writer = gguf.GGUFWriter(str(path), "wan")
    held: dict[str, torch.Tensor] = {}
    rng = np.random.default_rng(7)
    for name, value in original.items():
        array = value.detach().float().numpy()
        quantized = qtype_name != "F32" and value.dim() == 2 and name.endswith(".weight")
        if quantized and array.shape[-1] % block == 0:
            if qtype_name == "Q8_0":
                raw = quants.quantize(array, qtype)
            else:
                raw = _random_k_blocks(rng, array.shape, block, block_bytes)
            writer.add_tensor(name, raw, raw_dtype=qtype)
            held[name] = torch.from_numpy(quants.dequantize(raw, qtype).copy())
            continue
        if array.ndim > 4:
            writer.add_array(f"comfy.gguf.orig_shape.{name}", list(array.shape))
            array = array.reshape(array.shape[0], -1)
        writer.add_tensor(name, np.ascontiguousarray(array))
        held[name] = value.detach().float().clone()
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return held


def _random_k_blocks(rng, shape, block: int, block_bytes: int) -> np.ndarray:
    """Valid K-quant blocks: small finite fp16 super-block scales first, random bytes after."""
    rows, n = shape[0], shape[-1] // block
    raw = rng.integers(0, 256, size=(rows, n, block_bytes), dtype=np.uint8)
    scales = np.array([0.002, 0.0005], dtype=np.float16).view(np.uint8)
    raw[:, :, :4] = scales  # Q4_K/Q5_K: d, dmin; Q6_K's d is last (set below)
    if block_bytes == 210:  # Q6_K: ql 128, qh 64, scales 16 int8, d fp16
        raw[:, :, 208:] = np.array([0.0005], dtype=np.float16).view(np.uint8)
        raw[:, :, 192:208] = rng.integers(-8, 8, size=(rows, n, 16)).astype(np.int8).view(np.uint8)
    return raw.reshape(rows, n * block_bytes)


# -- headers of real architectures (no weights) -----------------------------------------------

_ST_DTYPES = {
    torch.float32: "F32",
    torch.bfloat16: "BF16",
    torch.float16: "F16",
    torch.float8_e4m3fn: "F8_E4M3",
}


def write_header_only(
    path: Path,
    shapes: dict[str, tuple[int, ...]],
    dtype: str = "BF16",
    dtypes: dict[str, str] | None = None,
) -> None:
    """A safetensors file with a real header and no data: the file is extended to the size the
    header names as a sparse file (no disk or memory used), so it reads as complete. `dtypes`
    gives some tensors another dtype than `dtype`."""
    import json

    items = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "U8": 1}
    header, offset = {}, 0
    for name, shape in shapes.items():
        kind = (dtypes or {}).get(name, dtype)
        size = items[kind]
        for s in shape:
            size *= s
        header[name] = {
            "dtype": kind,
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        f.truncate(8 + len(raw) + offset)


def meta_shapes(model: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def meta_model(class_name: str, config: dict) -> torch.nn.Module:
    """A diffusers or transformers model on the meta device from a config dict."""
    import diffusers
    import transformers
    from accelerate import init_empty_weights

    config = {k: v for k, v in config.items() if not k.startswith("_")}
    with init_empty_weights(include_buffers=True):
        if hasattr(diffusers, class_name):
            return getattr(diffusers, class_name).from_config(config)
        model_class = getattr(transformers, class_name)
        return model_class(model_class.config_class(**config))


# -- reading files back and comparing what they load as ----------------------------------------


def plain_config(config) -> dict:
    """A config as its JSON holds it: no private (`_`) keys, tuples as lists."""
    return {
        k: list(v) if isinstance(v, tuple) else v
        for k, v in config.items()
        if not k.startswith("_")
    }


def read_whole_dit(path: Path) -> tuple:
    """(the file's `Part`, a float32 model of its detected config filled from it whole)."""
    from paradit.backend.models.single_file.build import DitWeights, empty_model, fill_whole
    from paradit.backend.models.single_file.detect import recognise

    part = recognise(str(path))
    model = empty_model(part.detection.config, torch.float32)
    with DitWeights(part) as weights:
        fill_whole(model, weights)
    return part, model


def assert_same_weights(pipe, tiny, names) -> None:
    """Each component of `names` in `pipe` holds exactly `tiny`'s: the same keys, equal values."""
    for name in names:
        ours, theirs = getattr(pipe, name).state_dict(), getattr(tiny, name).state_dict()
        assert set(ours) == set(theirs), name
        assert all(torch.equal(ours[k], v) for k, v in theirs.items()), name


# -- all-in-one checkpoints (ComfyUI's models/checkpoints) ------------------------------------

ALL_IN_ONE_PREFIXES = {
    "clip_l": "text_encoders.clip_l.transformer.",
    "t5xxl": "text_encoders.t5xxl.transformer.",
    "vae": "vae.",
}
"""Where ComfyUI's checkpoint save puts a Flux model's parts besides the DiT (under
`model.diffusion_model.`): its supported_models' text encoder and VAE key prefixes."""

_LDM_ATTENTION = {
    "group_norm": "norm",
    "to_q": "q",
    "to_k": "k",
    "to_v": "v",
    "to_out.0": "proj_out",
}


def vae_ldm(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' AutoencoderKL state dict -> the original (ldm) names Flux's `ae` uses: levels
    as `down.I.block.J`, the decoder's levels numbered from the smallest up, and the mid
    attention's projections as 1x1 convolutions."""
    ups = {int(m.group(1)) for k in state if (m := re.match(r"decoder\.up_blocks\.(\d+)\.", k))}
    out = {}
    for name, value in state.items():
        new = name.replace(".conv_norm_out.", ".norm_out.")
        new = re.sub(r"\.mid_block\.resnets\.(\d)\.", lambda m: f".mid.block_{int(m[1]) + 1}.", new)
        if m := re.match(r"^(\w+)\.mid_block\.attentions\.0\.(.+)\.(weight|bias)$", name):
            new = f"{m[1]}.mid.attn_1.{_LDM_ATTENTION[m[2]]}.{m[3]}"
            if m[2] != "group_norm" and m[3] == "weight":
                value = value.reshape(*value.shape, 1, 1)
        new = re.sub(r"^encoder\.down_blocks\.(\d+)\.resnets\.", r"encoder.down.\1.block.", new)
        new = re.sub(
            r"^encoder\.down_blocks\.(\d+)\.downsamplers\.0\.", r"encoder.down.\1.downsample.", new
        )
        if m := re.match(r"^decoder\.up_blocks\.(\d+)\.(resnets|upsamplers\.0)\.", new):
            level = len(ups) - 1 - int(m[1])
            part = "block." if m[2] == "resnets" else "upsample."
            new = f"decoder.up.{level}.{part}" + new[m.end() :]
        new = new.replace(".conv_shortcut.", ".nin_shortcut.")
        assert new not in out, new
        out[new] = value
    return out


def write_all_in_one(path: Path, pipe) -> None:
    """A Flux all-in-one checkpoint of `pipe`'s weights (float32) as ComfyUI saves one: the DiT
    in Black Forest Labs' names under `model.diffusion_model.`, CLIP-L and T5 in Hugging Face's
    names (T5 with `shared` only) and the VAE in ldm names under `ALL_IN_ONE_PREFIXES`."""
    config = pipe.transformer.config
    dit = flux_bfl(
        pipe.transformer.state_dict(), config.num_attention_heads * config.attention_head_dim
    )
    clip = {"text_model." + k: v for k, v in pipe.text_encoder.state_dict().items()}
    t5 = {k: v for k, v in pipe.text_encoder_2.state_dict().items() if "embed_tokens" not in k}
    tensors = {WAN_PREFIX + k: v for k, v in dit.items()}
    for name, part in (("clip_l", clip), ("t5xxl", t5), ("vae", vae_ldm(pipe.vae.state_dict()))):
        tensors |= {ALL_IN_ONE_PREFIXES[name] + k: v for k, v in part.items()}
    save_file({k: v.detach().contiguous() for k, v in tensors.items()}, str(path))


# -- HunyuanVideo 1.5 (Tencent's original names, which ComfyUI's files keep) -------------------

_HY15_INVERSE = (
    # whole-name prefixes: diffusers -> original
    ("time_embed.timestep_embedder.linear_1.", "time_in.mlp.0."),
    ("time_embed.timestep_embedder.linear_2.", "time_in.mlp.2."),
    ("context_embedder.time_text_embed.timestep_embedder.linear_1.", "txt_in.t_embedder.mlp.0."),
    ("context_embedder.time_text_embed.timestep_embedder.linear_2.", "txt_in.t_embedder.mlp.2."),
    ("context_embedder.time_text_embed.text_embedder.", "txt_in.c_embedder."),
    ("context_embedder.proj_in.", "txt_in.input_embedder."),
    ("context_embedder.token_refiner.refiner_blocks.", "txt_in.individual_token_refiner.blocks."),
    ("context_embedder_2.norm.", "byt5_in.layernorm."),
    ("context_embedder_2.linear_", "byt5_in.fc"),
    ("image_embedder.norm_in.", "vision_in.proj.0."),
    ("image_embedder.linear_1.", "vision_in.proj.1."),
    ("image_embedder.linear_2.", "vision_in.proj.3."),
    ("image_embedder.norm_out.", "vision_in.proj.4."),
    ("x_embedder.", "img_in."),
    ("cond_type_embed.", "cond_type_embedding."),
    ("proj_out.", "final_layer.linear."),
    ("norm_out.linear.", "final_layer.adaLN_modulation.1."),
    ("transformer_blocks.", "double_blocks."),
)
_HY15_BLOCK_INVERSE = {
    "norm1.linear": "img_mod.linear",
    "norm1_context.linear": "txt_mod.linear",
    "attn.to_q": "img_attn_q",
    "attn.to_k": "img_attn_k",
    "attn.to_v": "img_attn_v",
    "attn.norm_q": "img_attn_q_norm",
    "attn.norm_k": "img_attn_k_norm",
    "attn.to_out.0": "img_attn_proj",
    "attn.add_q_proj": "txt_attn_q",
    "attn.add_k_proj": "txt_attn_k",
    "attn.add_v_proj": "txt_attn_v",
    "attn.norm_added_q": "txt_attn_q_norm",
    "attn.norm_added_k": "txt_attn_k_norm",
    "attn.to_add_out": "txt_attn_proj",
    "ff.net.0.proj": "img_mlp.fc1",
    "ff.net.2": "img_mlp.fc2",
    "ff_context.net.0.proj": "txt_mlp.fc1",
    "ff_context.net.2": "txt_mlp.fc2",
}
_HY15_REFINER_INVERSE = {
    "attn.to_out.0": "self_attn_proj",
    "ff.net.0.proj": "mlp.fc1",
    "ff.net.2": "mlp.fc2",
    "norm_out.linear": "adaLN_modulation.1",
}


def hunyuan15_original(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' `HunyuanVideo15Transformer3DModel` state dict -> Tencent's original names
    (ComfyUI's hunyuanvideo1.5_*.safetensors): the token refiner's q/k/v fused into
    `self_attn_qkv`, the final modulation's halves as (shift, scale)."""
    s = dict(state)
    out: dict[str, torch.Tensor] = {}
    refiner = "context_embedder.token_refiner.refiner_blocks."
    blocks = {int(k.split(".")[3]) for k in s if k.startswith(refiner)}
    for i in blocks:
        d = f"{refiner}{i}.attn."
        for suffix in ("weight", "bias"):
            out[f"txt_in.individual_token_refiner.blocks.{i}.self_attn_qkv.{suffix}"] = torch.cat(
                [s.pop(f"{d}{n}.{suffix}") for n in ("to_q", "to_k", "to_v")]
            )
    for name, value in s.items():
        if name.startswith("norm_out.linear."):
            scale, shift = value.chunk(2)
            value = torch.cat([shift, scale])
        new = name
        if m := re.match(r"^transformer_blocks\.(\d+)\.(.+)\.(weight|bias)$", name):
            new = f"double_blocks.{m[1]}.{_HY15_BLOCK_INVERSE[m[2]]}.{m[3]}"
        elif m := re.match(rf"^{re.escape(refiner)}(\d+)\.(.+)\.(weight|bias)$", name):
            part = _HY15_REFINER_INVERSE.get(m[2], m[2])
            new = f"txt_in.individual_token_refiner.blocks.{m[1]}.{part}.{m[3]}"
        else:
            for old, original in _HY15_INVERSE:
                if new.startswith(old):
                    new = original + new[len(old) :]
                    break
        assert new not in out, new
        out[new] = value
    return out


def hunyuan15_vae_original(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' `AutoencoderKLHunyuanVideo15` state dict -> the original names
    (`encoder.down.I.block.J`, `mid.block_1`, `mid.attn_1.q`; levels keep their numbers)."""
    out = {}
    for name, value in state.items():
        new = re.sub(r"^encoder\.down_blocks\.(\d+)\.resnets\.", r"encoder.down.\1.block.", name)
        new = re.sub(
            r"^encoder\.down_blocks\.(\d+)\.downsamplers\.0\.", r"encoder.down.\1.downsample.", new
        )
        new = re.sub(r"^decoder\.up_blocks\.(\d+)\.resnets\.", r"decoder.up.\1.block.", new)
        new = re.sub(
            r"^decoder\.up_blocks\.(\d+)\.upsamplers\.0\.", r"decoder.up.\1.upsample.", new
        )
        new = re.sub(r"\.mid_block\.resnets\.(\d)\.", lambda m: f".mid.block_{int(m[1]) + 1}.", new)
        new = re.sub(r"\.mid_block\.attentions\.0\.to_(q|k|v)\.", r".mid.attn_1.\1.", new)
        new = new.replace(".mid_block.attentions.0.", ".mid.attn_1.")
        assert new not in out, new
        out[new] = value
    return out


# -- Z-Image (z_image_turbo_bf16 and its Qwen3 text encoder, qwen_3_4b) -----------------------

_Z_IMAGE_INVERSE = (
    ("all_x_embedder.2-1.", "x_embedder."),
    ("all_final_layer.2-1.", "final_layer."),
    (".attention.to_out.0.", ".attention.out."),
    (".attention.norm_q.", ".attention.q_norm."),
    (".attention.norm_k.", ".attention.k_norm."),
)


def z_image_original(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' ZImageTransformer2DModel state dict -> the original names ComfyUI's
    `z_image_turbo` file uses: q, k and v fused as `attention.qkv` (in that order), the output
    projection `attention.out`, `x_embedder` and `final_layer` without diffusers' `2-1`."""
    out = {}
    for name, value in state.items():
        if re.search(r"\.attention\.to_[kv]\.weight$", name):
            continue
        if m := re.match(r"^(.+\.attention)\.to_q\.weight$", name):
            parts = [state[f"{m[1]}.to_{x}.weight"] for x in "qkv"]
            out[f"{m[1]}.qkv.weight"] = torch.cat(parts)
            continue
        for new, old in _Z_IMAGE_INVERSE:
            name = name.replace(new, old)
        out[name] = value
    return out


def qwen3_comfy(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A Qwen3Model state dict as ComfyUI's Qwen3 file holds it: Hugging Face's causal-LM
    names (under `model.`), the output head tied (left out)."""
    return {"model." + k: v for k, v in state.items()}


def mistral3_comfy(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A Mistral3ForConditionalGeneration state dict as ComfyUI's mistral_3_small_flux2 holds
    it: the language model under `model.`, no vision tower, projector or output head."""
    prefix = "model.language_model."
    return {"model." + k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}


# -- Flux.2 (Black Forest Labs' names, as ComfyUI's diffusion_models hold FLUX.2 and Klein) ---

_FLUX2_WHOLE = {
    "x_embedder": "img_in",
    "context_embedder": "txt_in",
    "time_guidance_embed.timestep_embedder.linear_1": "time_in.in_layer",
    "time_guidance_embed.timestep_embedder.linear_2": "time_in.out_layer",
    "time_guidance_embed.guidance_embedder.linear_1": "guidance_in.in_layer",
    "time_guidance_embed.guidance_embedder.linear_2": "guidance_in.out_layer",
    "double_stream_modulation_img.linear": "double_stream_modulation_img.lin",
    "double_stream_modulation_txt.linear": "double_stream_modulation_txt.lin",
    "single_stream_modulation.linear": "single_stream_modulation.lin",
    "proj_out": "final_layer.linear",
}
_FLUX2_DOUBLE = {
    "attn.norm_q.weight": "img_attn.norm.query_norm.scale",
    "attn.norm_k.weight": "img_attn.norm.key_norm.scale",
    "attn.norm_added_q.weight": "txt_attn.norm.query_norm.scale",
    "attn.norm_added_k.weight": "txt_attn.norm.key_norm.scale",
    "attn.to_out.0.weight": "img_attn.proj.weight",
    "attn.to_add_out.weight": "txt_attn.proj.weight",
    "ff.linear_in.weight": "img_mlp.0.weight",
    "ff.linear_out.weight": "img_mlp.2.weight",
    "ff_context.linear_in.weight": "txt_mlp.0.weight",
    "ff_context.linear_out.weight": "txt_mlp.2.weight",
}
_FLUX2_SINGLE = {
    "attn.to_qkv_mlp_proj.weight": "linear1.weight",
    "attn.to_out.weight": "linear2.weight",
    "attn.norm_q.weight": "norm.query_norm.scale",
    "attn.norm_k.weight": "norm.key_norm.scale",
}


def flux2_bfl(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' Flux2Transformer2DModel state dict -> Black Forest Labs' Flux.2 names: q/k/v
    fused per stream (`img_attn.qkv`, `txt_attn.qkv`), norms as `.scale`, the final
    modulation as (shift, scale) where diffusers holds (scale, shift)."""
    out = {}
    for name, value in state.items():
        if m := re.match(r"^transformer_blocks\.(\d+)\.(.+)$", name):
            block, rest = f"double_blocks.{m[1]}.", m[2]
            if rest in ("attn.to_q.weight", "attn.add_q_proj.weight"):
                stream, parts = ("img", "to_{}") if "to_q" in rest else ("txt", "add_{}_proj")
                qkv = [
                    state[f"transformer_blocks.{m[1]}.attn.{parts.format(x)}.weight"] for x in "qkv"
                ]
                out[f"{block}{stream}_attn.qkv.weight"] = torch.cat(qkv)
            elif rest in _FLUX2_DOUBLE:
                out[block + _FLUX2_DOUBLE[rest]] = value
            continue
        if m := re.match(r"^single_transformer_blocks\.(\d+)\.(.+)$", name):
            out[f"single_blocks.{m[1]}.{_FLUX2_SINGLE[m[2]]}"] = value
            continue
        if name == "norm_out.linear.weight":
            scale, shift = value.chunk(2)
            out["final_layer.adaLN_modulation.1.weight"] = torch.cat([shift, scale])
            continue
        module, _, kind = name.rpartition(".")
        out[f"{_FLUX2_WHOLE[module]}.{kind}"] = value
    return out


def assert_files_make_the_presets_image(
    pipe, tiny, dit_state, text: str, call: dict, *, whole_text_encoder: bool = False
) -> None:
    """A pipeline loaded from single files holds the tiny preset's weights (its DiT as the
    file held them, `dit_state`; its text encoder's language model, or with
    `whole_text_encoder` all of it: Qwen-Image-Edit's vision tower and head too; its VAE),
    tokenizes `text` as the preset does, and makes the preset's image byte for byte (and not a
    blank one)."""
    from paradit.backend.models.loading import align_cpu_weights

    reference = copy.copy(tiny)
    module = copy.deepcopy(tiny.transformer)
    module.load_state_dict(dit_state, strict=True)
    reference.register_modules(transformer=module)
    language = {  # the file's language model: the text encoder paradit builds
        k.removeprefix("model.language_model."): v
        for k, v in tiny.text_encoder.state_dict().items()
        if k.startswith("model.language_model.")
    }
    for component, theirs in (
        ("transformer", module.state_dict()),
        ("text_encoder", tiny.text_encoder.state_dict() if whole_text_encoder else language),
        ("vae", tiny.vae.state_dict()),
    ):
        ours = getattr(pipe, component).state_dict()
        assert set(ours) == set(theirs), component
        assert all(torch.equal(ours[k], theirs[k]) for k in theirs), component
    assert pipe.tokenizer(text).input_ids == tiny.tokenizer(text).input_ids
    images = []
    for each in (pipe, reference):
        align_cpu_weights(each)
        out = each(prompt="a single file", generator=torch.Generator().manual_seed(5), **call)
        images.append(np.asarray(out.images[0]))
    assert np.array_equal(*images) and images[0].std() > 0


# -- LTX-2 (Lightricks' names: ltx-2-19b-dev.safetensors, as ComfyUI's checkpoints hold it) ---

LTX2_DIT_PREFIX = "model.diffusion_model."
_LTX2_DIT_INVERSE = (
    # diffusers' LTX2VideoTransformer3DModel -> Lightricks' LTXAVModel, whole name parts
    (r"^proj_in\.", "patchify_proj."),
    (r"^audio_proj_in\.", "audio_patchify_proj."),
    (r"^time_embed\.", "adaln_single."),
    (r"^audio_time_embed\.", "audio_adaln_single."),
    (r"^av_cross_attn_video_scale_shift\.", "av_ca_video_scale_shift_adaln_single."),
    (r"^av_cross_attn_video_a2v_gate\.", "av_ca_a2v_gate_adaln_single."),
    (r"^av_cross_attn_audio_scale_shift\.", "av_ca_audio_scale_shift_adaln_single."),
    (r"^av_cross_attn_audio_v2a_gate\.", "av_ca_v2a_gate_adaln_single."),
    (r"\.video_a2v_cross_attn_scale_shift_table$", ".scale_shift_table_a2v_ca_video"),
    (r"\.audio_a2v_cross_attn_scale_shift_table$", ".scale_shift_table_a2v_ca_audio"),
    (r"\.norm_q\.", ".q_norm."),
    (r"\.norm_k\.", ".k_norm."),
    # LTX-2.3's prompt AdaLN
    (r"^prompt_adaln\.", "prompt_adaln_single."),
    (r"^audio_prompt_adaln\.", "audio_prompt_adaln_single."),
)
_LTX2_VOCODER_INVERSE = (
    # diffusers' LTX2Vocoder (and the two of LTX2VocoderWithBWE: `vocoder.`, `bwe_generator.`)
    # -> Lightricks' Vocoder, whole name parts
    (r"^((?:vocoder|bwe_generator)\.)?conv_in\.", r"\1conv_pre."),
    (r"^((?:vocoder|bwe_generator)\.)?conv_out\.", r"\1conv_post."),
    (r"^((?:vocoder|bwe_generator)\.)?upsamplers\.", r"\1ups."),
    (r"^((?:vocoder|bwe_generator)\.)?resnets\.", r"\1resblocks."),
    (r"^((?:vocoder|bwe_generator)\.)?act_out\.", r"\1act_post."),
    (r"\.downsample\.filter$", ".downsample.lowpass.filter"),
)
LTX2_UNREAD_STATISTICS = ("channel", "mean-of-stds", "mean-of-stds_over_std-of-means")
"""The video VAE's latent statistics diffusers keeps no buffer for (the real file has them)."""


def ltx2_dit_original(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for name, value in state.items():
        for pattern, original in _LTX2_DIT_INVERSE:
            name = re.sub(pattern, original, name)
        out[name] = value
    return out


def _ltx2_statistics(name: str) -> str:
    return {
        "latents_mean": "per_channel_statistics.mean-of-means",
        "latents_std": "per_channel_statistics.std-of-means",
    }.get(name, name)


def ltx2_video_vae_original(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' AutoencoderKLLTX2Video -> Lightricks' names: the encoder's levels and their
    downsamplers one list (`down_blocks.2I` the level's `res_blocks`, `2I+1` its
    downsampler), its mid block last; the decoder's mid block first (`up_blocks.0`), then
    each level's upsampler (`2I+1`) and `res_blocks` (`2I+2`)."""
    levels = {int(m[1]) for k in state if (m := re.match(r"encoder\.down_blocks\.(\d+)\.", k))}
    mid = 2 * len(levels)
    rules = (  # (pattern, original with {} for the list index, index = a * level + b)
        (r"^encoder\.down_blocks\.(\d+)\.resnets\.", "encoder.down_blocks.{}.res_blocks.", 2, 0),
        (r"^encoder\.down_blocks\.(\d+)\.downsamplers\.0\.", "encoder.down_blocks.{}.", 2, 1),
        (r"^encoder\.mid_block()\.resnets\.", "encoder.down_blocks.{}.res_blocks.", 0, mid),
        (r"^decoder\.mid_block()\.resnets\.", "decoder.up_blocks.{}.res_blocks.", 0, 0),
        (r"^decoder\.up_blocks\.(\d+)\.upsamplers\.0\.", "decoder.up_blocks.{}.", 2, 1),
        (r"^decoder\.up_blocks\.(\d+)\.resnets\.", "decoder.up_blocks.{}.res_blocks.", 2, 2),
    )
    out = {}
    for name, value in state.items():
        new = _ltx2_statistics(name)
        for pattern, original, a, b in rules:  # the first that matches applies
            if m := re.match(pattern, new):
                new = original.format(a * int(m[1] or 0) + b) + new[m.end() :]
                break
        assert new not in out, new
        out[new] = value
    for extra in LTX2_UNREAD_STATISTICS:
        out[f"per_channel_statistics.{extra}"] = torch.full_like(state["latents_mean"], 7.0)
    return out


def ltx2_checkpoint(pipe) -> dict[str, torch.Tensor]:
    """A tiny LTX-2 pipeline's weights as Lightricks' checkpoint holds them: the DiT and the
    connectors under `model.diffusion_model.`, the text projection at the top (LTX-2.3's: one
    per stream, `video_aggregate_embed`, `audio_aggregate_embed`), the video VAE under `vae.`,
    the audio VAE under `audio_vae.`, the vocoder under `vocoder.` (LTX-2.3's: its two
    generators under `vocoder.vocoder.` and `vocoder.bwe_generator.`, the mel bases under
    `vocoder.mel_stft.`)."""
    dit = ltx2_dit_original(pipe.transformer.state_dict())
    out = {LTX2_DIT_PREFIX + k: v for k, v in dit.items()}
    for name, value in pipe.connectors.state_dict().items():
        if m := re.match(r"^(video_|audio_|)text_proj_in\.", name):  # 2.3: one a stream
            projection = f"text_embedding_projection.{m[1]}aggregate_embed."
            out[projection + name[m.end() :]] = value
            continue
        new = re.sub(r"^(video|audio)_connector\.", r"\1_embeddings_connector.", name)
        new = new.replace(".transformer_blocks.", ".transformer_1d_blocks.")
        new = new.replace(".norm_q.", ".q_norm.").replace(".norm_k.", ".k_norm.")
        out[LTX2_DIT_PREFIX + new] = value
    vae = ltx2_video_vae_original(pipe.vae.state_dict())
    out |= {"vae." + k: v for k, v in vae.items()}
    audio = pipe.audio_vae.state_dict()
    out |= {"audio_vae." + _ltx2_statistics(k): v for k, v in audio.items()}
    for name, value in pipe.vocoder.state_dict().items():
        for pattern, original in _LTX2_VOCODER_INVERSE:
            name = re.sub(pattern, original, name)
        out["vocoder." + name] = value
    return {k: v.detach().contiguous() for k, v in out.items()}


def ltx2_upscaler_file(folder: Path, channels: int) -> str:
    """LTX-2's tiny x2 latent upscaler (`ltx2.upscaler.tiny`, seeded) as Lightricks ships one:
    `LTX2LatentUpsamplerModel`'s own keys in one safetensors file, named as theirs."""
    from paradit.backend.models.families.ltx2 import upscaler

    state = {k: v.contiguous() for k, v in upscaler.tiny(0, channels).state_dict().items()}
    path = Path(folder) / "ltx-2-spatial-upscaler-x2-1.0.safetensors"
    save_file(state, str(path))
    return str(path)


LTX25_DIFFUSION_DECODER = ltx2_tiny.DIFFUSION_DECODER
"""A tiny LTX-2.5 diffusion decoder's settings as the file's metadata (`config.vae.decoder`)
names them (families/ltx2/tiny.py: the family contract's tiny job uses the same decoder)."""
_DIFFUSION_DECODER_NAMES = (
    (r"\.attn\.to_out\.0\.", ".attn.proj."),
    (r"\.attn\.norm_q\.", ".attn.q_norm."),
    (r"\.attn\.norm_k\.", ".attn.k_norm."),
    (r"^t_embedder\.timestep_embedder\.linear_1\.", "t_embedder.mlp.0."),
    (r"^t_embedder\.timestep_embedder\.linear_2\.", "t_embedder.mlp.2."),
)
"""diffusers' `LTX2VideoDiffusionDecoder3d` names -> the shipped file's (ComfyUI's
`NADiffusionDecoder` keys, which need no renaming there); `to_q`, `to_k`, `to_v` are fused
into one `qkv` in that order."""


def ltx25_diffusion_vae(video_vae: dict[str, torch.Tensor], seed: int = 0) -> dict:
    """LTX-2.5's diffusion video VAE (`ltx-2.5-video-vae-bf16`) in miniature, as the shipped
    file holds it: a tiny conv VAE's encoder and latent statistics (`video_vae`, Lightricks'
    names) and, as `decoder.`, a seeded diffusers `LTX2VideoDiffusionDecoderModel` of
    LTX25_DIFFUSION_DECODER's settings in the file's names (`decoder.conv_in_x_t`...), plus the
    unused `decoder.type_emb` the shipped file carries. Returns (tensors, metadata)."""
    c = LTX25_DIFFUSION_DECODER
    model = ltx25_diffusion_decoder(seed)
    state = {
        k[len("decoder.") :]: v for k, v in model.state_dict().items() if k.startswith("decoder.")
    }
    out = {k: v for k, v in video_vae.items() if not k.startswith("decoder.")}
    for name in list(state):
        if m := re.match(r"^(.*\.attn\.)to_q\.(weight|bias)$", name):
            parts = [state[f"{m[1]}to_{x}.{m[2]}"] for x in "qkv"]
            out[f"decoder.{m[1]}qkv.{m[2]}"] = torch.cat(parts)
            continue
        if re.match(r"^.*\.attn\.to_[kv]\.", name):
            continue
        new = name
        for pattern, original in _DIFFUSION_DECODER_NAMES:
            new = re.sub(pattern, original, new)
        out["decoder." + new] = state[name]
    out["decoder.type_emb"] = torch.zeros(c["in_channels"])
    config = {"vae": {"_class_name": "CausalDiffusionVAE", "decoder": c, "model_output_type": "x0"}}
    tensors = {k: v.detach().contiguous() for k, v in out.items()}
    return tensors, {"config": json.dumps(config)}


def ltx25_diffusion_decoder(seed: int = 0) -> torch.nn.Module:
    """The seeded diffusers `LTX2VideoDiffusionDecoderModel` of LTX25_DIFFUSION_DECODER's
    settings that `ltx25_diffusion_vae` writes (its latent statistics the defaults, 0 and 1)."""
    return ltx2_tiny.diffusion_decoder(seed)
