"""MiniMax H3's pruned-AdaLN DiT (ComfyUI's `minimax_h3_*_pruned_*` files), which diffusers
0.42.1's single-file converter refuses (`adaln_t_table`).

A released H3 DiT modulates every block with `linear(silu(e(t)))`, `e` the timestep MLP
(`time_embedder`). The pruned files replace the MLP and the activation with a table of the
curve `t -> c(t)` sampled on a grid of `adaln_t_table.shape[0]` points over [0, 1] (width 8 in
the published files: a truncated SVD `G V` of the sampled `silu(e(t))`), read by linear
interpolation, and every AdaLN projection (the blocks' and the output norm's) takes `c(t)`
directly, its weight reduced to `W V` (the bias unchanged, no activation):

    pos  = clamp(t, 0, 1) * (grid - 1);  i = min(floor(pos), grid - 2)
    c(t) = lerp(table[i], table[i + 1], pos - i)
    m(t) = adaln_proj.linear(c(t))

`MiniMaxH3PrunedTransformer3DModel` is diffusers' `MiniMaxH3Transformer3DModel` with that
time path: `time_proj` passes `t` through, `time_embedder` is the table (`CurveTable`), and the
AdaLN modules skip the activation. Everything else (blocks, attention, the `_cp_plan`,
LoRA's module names) is diffusers' own, so Ulysses, FSDP and the family's blocks run on it
unchanged. The file's other keys are diffusers' converter's (fused `qkv_proj` rows QKV-major,
`[q; k; v]`, the "stacked" layout of every published single file).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from diffusers import MiniMaxH3Transformer3DModel
from diffusers.configuration_utils import register_to_config
from diffusers.models.transformers.transformer_minimax_h3 import (
    MiniMaxH3AdaLayerNormModulation,
    MiniMaxH3AdaLayerNormOut,
)
from torch import nn

TABLE = "adaln_t_table"
"""The pruned files' curve table, (grid points, curve width), float32."""
TABLE_PARAMETER = "time_embedder.table"
"""Where `MiniMaxH3PrunedTransformer3DModel` holds it."""
_CURVE_DIM = "time_embed_dim"


class CurveTable(nn.Module):
    """`t` (distinct timesteps in [0, 1]) -> the table's rows linearly interpolated at
    `clamp(t, 0, 1) * (grid - 1)`, as ComfyUI's curve mode reads them."""

    def __init__(self, grid: int, width: int):
        super().__init__()
        if grid < 2 or width < 1:
            raise ValueError(
                f"a curve table has at least 2 points of width >= 1, got {grid}x{width}"
            )
        self.table = nn.Parameter(torch.zeros(grid, width), requires_grad=False)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        table = self.table.float()
        position = t.float().clamp(0.0, 1.0) * (table.shape[0] - 1)
        lower = position.floor().long().clamp(max=table.shape[0] - 2)
        weight = (position - lower).unsqueeze(-1)
        return torch.lerp(table[lower], table[lower + 1], weight)


class _PassThrough(nn.Module):
    """`time_proj` of the pruned model: the table reads `t` itself."""

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return t


class CurveModulation(MiniMaxH3AdaLayerNormModulation):
    """A block's six modulation vectors from `c(t)`: the projection alone, no activation."""

    def forward(self, temb: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.linear(temb.to(self.linear.weight.dtype))
        return out.view(-1, 6 * self.hidden_size).chunk(6, dim=-1)


class CurveNormOut(MiniMaxH3AdaLayerNormOut):
    """The output norm's shift and scale from `c(t)`: the projection alone, no activation."""

    def forward(
        self, hidden_states: torch.Tensor, temb: torch.Tensor, timestep_indices: torch.Tensor
    ) -> torch.Tensor:
        shift, scale = self.linear(temb.to(self.linear.weight.dtype)).chunk(2, dim=-1)
        hidden_states = self.norm(hidden_states)
        return hidden_states * (1.0 + scale.index_select(0, timestep_indices)) + shift.index_select(
            0, timestep_indices
        )


class MiniMaxH3PrunedTransformer3DModel(MiniMaxH3Transformer3DModel):
    """diffusers' H3 DiT with the pruned files' time path (the module's docstring):
    `time_embed_dim` is the curve's width, `adaln_curve_grid` its grid points."""

    @register_to_config
    def __init__(self, adaln_curve_grid: int = 1025, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        config = self.config
        width = config[_CURVE_DIM]
        self.time_proj = _PassThrough()
        self.time_embedder = CurveTable(adaln_curve_grid, width)
        for block in self.transformer_blocks:
            block.adaln_proj = CurveModulation(width, config.hidden_size)
        self.norm_out = CurveNormOut(config.hidden_size, width, config.final_norm_eps)


def is_pruned(keys: Mapping[str, Any]) -> bool:
    """A pruned-AdaLN H3 DiT's keys (its curve table in place of the timestep MLP)."""
    return TABLE in keys


def pruned_config(shapes: Mapping[str, tuple[int, ...]], base: Mapping[str, Any]) -> dict:
    """The pruned model's config: `base` (an H3 DiT config) with the curve's grid and width
    read off the table's shape."""
    grid, width = shapes[TABLE]
    return {**base, "adaln_curve_grid": int(grid), _CURVE_DIM: int(width)}


def convert_pruned(checkpoint: dict[str, torch.Tensor], config: Mapping[str, Any]) -> dict:
    """A pruned file's tensors (original key names, prefix stripped) -> the pruned model's
    state dict: the table to `time_embedder.table`, the rest by diffusers' converter (fused
    QKV rows stacked `[q; k; v]`)."""
    from diffusers.loaders.single_file_utils import (
        convert_minimax_h3_transformer_checkpoint_to_diffusers,
    )

    if TABLE not in checkpoint:
        raise ValueError(f"a pruned H3 DiT holds `{TABLE}`; this file has none")
    rest = dict(checkpoint)
    table = rest.pop(TABLE)
    state = convert_minimax_h3_transformer_checkpoint_to_diffusers(
        rest, dict(config), qkv_layout="stacked"
    )
    state[TABLE_PARAMETER] = table.float()
    return state


def pruned_from_state(
    checkpoint: dict[str, torch.Tensor], config: Mapping[str, Any], dtype: torch.dtype
) -> MiniMaxH3PrunedTransformer3DModel:
    """The pruned DiT of `config` (`pruned_config`) holding `checkpoint`'s weights (original
    key names); every weight must be there, and nothing more. The curve table, the patch
    projections and the heads stay float32 (`_keep_in_fp32_modules`, as diffusers holds
    them)."""
    model = MiniMaxH3PrunedTransformer3DModel(**config)
    state = convert_pruned(checkpoint, config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(
            f"the pruned H3 DiT's weights do not fit its config: missing {sorted(missing)[:6]}, "
            f"unexpected {sorted(unexpected)[:6]}"
        )
    keep = tuple(model._keep_in_fp32_modules)
    for name, module in model.named_children():
        if not any(k in name for k in keep):
            module.to(dtype)
    return model.eval()


# -- the file ---------------------------------------------------------------------------------

DIT_PREFIX = "model.diffusion_model."
"""ComfyUI's prefix, when a file carries it (the published H3 files do not)."""
REAL_ROPE_FREQ_DIM = 16


def detect_config(shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Any]:
    """The pruned DiT's config read off its file's shapes (original key names, prefix
    stripped): widths and counts from the weights, the head width from the q norm's gain,
    the curve from the table; epsilons and rotary theta are diffusers' defaults (what no
    weight shows, and what every released H3 uses)."""
    if not is_pruned(shapes):
        raise ValueError(f"a pruned H3 DiT holds `{TABLE}`; this file has none")
    hidden, video_patch = shapes["video_patch_proj.weight"]
    head_dim = shapes["blocks.0.attn.q_norm.weight"][0]
    fused = shapes["blocks.0.attn.qkv_proj.weight"][0]
    patch = (1, 2, 2)  # H3's (t, h, w) patch: the patch projection's width is channels x 4
    rope = shapes.get("rope.inv_freq")
    config = {
        "num_attention_heads": fused // 3 // head_dim,
        "attention_head_dim": head_dim,
        "hidden_size": hidden,
        "num_layers": _count(shapes, "blocks.", ".attn.qkv_proj.weight"),
        "num_refiner_layers": _count(shapes, "token_refiner.blocks.", ".attn.qkv_proj.weight"),
        "ffn_dim": shapes["blocks.0.mlp.fc1.weight"][0] // 2,
        "in_channels": video_patch // (patch[0] * patch[1] * patch[2]),
        "audio_in_channels": shapes["audio_patch_proj.weight"][1],
        "patch_size": patch,
        "text_dim": shapes["condition_proj.weight"][1],
        "rope_freq_dim": rope[0] if rope else REAL_ROPE_FREQ_DIM,
    }
    return pruned_config(shapes, config)


def _count(shapes: Mapping[str, Any], prefix: str, suffix: str) -> int:
    found = {
        int(key[len(prefix) :].split(".", 1)[0])
        for key in shapes
        if key.startswith(prefix) and key.endswith(suffix)
    }
    return max(found) + 1 if found else 0


def load_pruned_file(path: str, dtype: torch.dtype) -> MiniMaxH3PrunedTransformer3DModel:
    """A pruned H3 DiT file (bf16, or ComfyUI's int8_convrot: dequantized on load by the
    single-file reader) as `MiniMaxH3PrunedTransformer3DModel`."""
    from ...single_file.components import read_whole
    from ...single_file.detection import Detection
    from ...single_file.header import read_header
    from ...single_file.quant import is_scale_key
    from ...single_file.vocabulary import Part

    header = read_header(path)
    prefix = DIT_PREFIX if any(k.startswith(DIT_PREFIX) for k in header.tensors) else ""
    if prefix:
        header = header.view(prefix)
    shapes = {k: v.shape for k, v in header.tensors.items() if not is_scale_key(k)}
    config = detect_config(shapes)
    detection = Detection(
        "transformer", "minimax_h3", "minimax-h3-pruned", "comfy", prefix, config,
        (f"{TABLE} {list(shapes[TABLE])}",),
    )  # fmt: skip
    weights = read_whole(Part(header, detection), torch.float32)
    weights.pop("rope.inv_freq", None)
    return pruned_from_state(weights, config, dtype)
