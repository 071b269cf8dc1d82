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
AdaLN modules skip the activation. Everything else (attention, feed-forward, the `_cp_plan`,
LoRA's module names) is diffusers' own, so Ulysses, FSDP and the family's blocks run on it
unchanged.

Precision, as ComfyUI runs a pruned file (Comfy-Org/ComfyUI comfy/ldm/minimax/model.py at
2c64d4aa, `adaln_dtype`, `_mod_row`, `FinalLayer.forward`, read 2026): the table, `c(t)` and
every AdaLN projection stay float32 whatever the run's dtype (`_keep_in_fp32_modules` names
`adaln_proj` and `norm_out.linear`; `models.casting` keeps them), so the modulation vectors
are computed in float32. A block casts them to its hidden states' dtype before it applies
them (`CurveBlock`: `1 + scale`, the shift and the gates in that dtype, as ComfyUI's blocks
cast each vector's row); the output norm applies its float32 shift and scale uncast, so the
modulated rows come out float32 for the float32 heads (ComfyUI's `FinalLayer`).

The file's other keys are diffusers' converter's (fused `qkv_proj` rows QKV-major, `[q; k; v]`,
the "stacked" layout of every published single file).
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
    MiniMaxH3TransformerBlock,
)
from torch import nn

from ...casting import cast_model
from ...single_file.header import read_header
from ...single_file.vocabulary import FileTools, Part
from .single_file import CURVE_DIM, DIT_PREFIX, TABLE, detect_dit

TABLE_PARAMETER = "time_embedder.table"
"""Where `MiniMaxH3PrunedTransformer3DModel` holds it."""


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


class CurveBlock(MiniMaxH3TransformerBlock):
    """A block of the pruned DiT: diffusers' block, its six modulation vectors (float32 from
    the float32 projection) cast to the hidden states' dtype before they are applied."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        temb: torch.Tensor,
        adaln_indices: torch.Tensor,
        rotary_emb: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        dtype = hidden_states.dtype
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = (
            vector.to(dtype).index_select(0, adaln_indices) for vector in self.adaln_proj(temb)
        )
        normed = self.norm1(hidden_states) * (1.0 + scale_msa) + shift_msa
        hidden_states = hidden_states + gate_msa * self.attn(normed, rotary_emb, attention_mask)
        normed = self.norm2(hidden_states) * (1.0 + scale_mlp) + shift_mlp
        return hidden_states + gate_mlp * self.ff(normed)


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
    `time_embed_dim` is the curve's width, `adaln_curve_grid` its grid points; the AdaLN
    projections are float32 in every run (the module's docstring)."""

    _keep_in_fp32_modules = [
        *MiniMaxH3Transformer3DModel._keep_in_fp32_modules,
        "adaln_proj",
        "norm_out.linear",
    ]
    _repeated_blocks = ["CurveBlock", "MiniMaxH3TokenRefinerBlock"]
    _no_split_modules = ["CurveBlock", "MiniMaxH3TokenRefinerBlock", "CurveNormOut"]

    @register_to_config
    def __init__(self, adaln_curve_grid: int = 1025, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        config = self.config
        width = config.time_embed_dim
        self.time_proj = _PassThrough()
        self.time_embedder = CurveTable(adaln_curve_grid, width)
        blocks = []
        for _ in self.transformer_blocks:
            block = CurveBlock(
                hidden_size=config.hidden_size,
                num_attention_heads=config.num_attention_heads,
                attention_head_dim=config.attention_head_dim,
                ffn_dim=config.ffn_dim,
                time_embed_dim=width,
                norm_eps=config.norm_eps,
                qk_norm_eps=config.qk_norm_eps,
            )
            block.adaln_proj = CurveModulation(width, config.hidden_size)
            blocks.append(block)
        self.transformer_blocks = nn.ModuleList(blocks)
        self.norm_out = CurveNormOut(config.hidden_size, width, config.final_norm_eps)

    @classmethod
    def from_config(cls, config: Any = None, **kwargs: Any) -> MiniMaxH3PrunedTransformer3DModel:
        """The model of `config` (and `kwargs` over it): every entry, the base class's
        included (diffusers' `from_config` passes only those `__init__` names, and this
        `__init__` names the curve's alone), so the memory plan's meta copy is this one."""
        settings = {**dict(config or {}), **kwargs}
        settings.pop("return_unused_kwargs", None)
        return cls(**{k: v for k, v in settings.items() if not k.startswith("_")})


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
    """The pruned DiT of `config` (`single_file.pruned_config`) holding `checkpoint`'s
    weights (original key names); every weight must be there, and nothing more. The curve
    table, the AdaLN projections, the patch projections and the heads stay float32
    (`_keep_in_fp32_modules`, `models.casting`)."""
    config = {k: v for k, v in config.items() if not k.startswith("_")}
    model = MiniMaxH3PrunedTransformer3DModel(**config)
    state = convert_pruned(checkpoint, config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(
            f"the pruned H3 DiT's weights do not fit its config: missing {sorted(missing)[:6]}, "
            f"unexpected {sorted(unexpected)[:6]}"
        )
    return cast_model(model, dtype).eval()


def load_pruned_file(
    path: str, dtype: torch.dtype, tools: FileTools
) -> MiniMaxH3PrunedTransformer3DModel:
    """A pruned H3 DiT file (bf16, or ComfyUI's int8_convrot: dequantized on load by the
    single-file reader, `tools.read_whole`) as `MiniMaxH3PrunedTransformer3DModel`."""
    header = read_header(path)
    prefix = DIT_PREFIX if any(k.startswith(DIT_PREFIX) for k in header.tensors) else ""
    detection = detect_dit(header, prefix)
    if detection is None or "adaln_curve_grid" not in detection.config:
        raise ValueError(f"{header.name} holds no pruned MiniMax H3 DiT (`{TABLE}`)")
    weights = tools.read_whole(Part(header, detection), torch.float32, prefix)
    weights.pop("rope.inv_freq", None)
    return pruned_from_state(weights, detection.config, dtype)


def prune(
    dit: MiniMaxH3Transformer3DModel, grid: int = 1025, width: int = 8
) -> MiniMaxH3PrunedTransformer3DModel:
    """`dit` made into its pruned-AdaLN form as the pruned files are made: `silu(e(t))`
    sampled on `grid` points over [0, 1] (G), its `width` leading right singular vectors V,
    the table `G V` and every AdaLN projection's weight `W V` (biases unchanged). Exact at the
    grid's points when `width` is the timestep MLP's full width; the published files keep 8."""
    config = {k: v for k, v in dit.config.items() if not k.startswith("_")}
    full = config[CURVE_DIM]
    if not 1 <= width <= full or grid < 2:
        raise ValueError(
            f"a pruned curve has 2 or more points and 1 to {full} (the timestep MLP's width) "
            f"columns, got {grid} points of {width}"
        )
    with torch.no_grad():
        t = torch.linspace(0, 1, grid, dtype=torch.float32)
        sampled = nn.functional.silu(dit.time_embedder(dit.time_proj(t).to(torch.float32)))
        basis = torch.linalg.svd(sampled.double(), full_matrices=True)[2].T[:, :width].float()
        pruned = MiniMaxH3PrunedTransformer3DModel(
            **{**config, "adaln_curve_grid": grid, CURVE_DIM: width}
        )
        state = {k: v for k, v in dit.state_dict().items() if not k.startswith("time_embedder.")}
        for key in state:
            if key.endswith(("adaln_proj.linear.weight", "norm_out.linear.weight")):
                state[key] = (state[key].float() @ basis).to(state[key].dtype)
        state[TABLE_PARAMETER] = sampled @ basis
        pruned.load_state_dict(state)
    return cast_model(pruned, dit.dtype).eval()
