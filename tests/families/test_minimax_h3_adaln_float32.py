"""MiniMax H3's pruned DiT in bfloat16 keeps its AdaLN projections float32, as ComfyUI runs a
pruned file (Comfy-Org/ComfyUI comfy/ldm/minimax/model.py at 2c64d4aa: `adaln_dtype` float32
for curve checkpoints; a block casts each modulation vector's row to the hidden states' dtype,
`_mod_row`, before `h * (1 + scale) + shift` and `x + other * gate`; `FinalLayer` applies its
float32 shift and scale uncast and hands float32 rows to the float32 heads).

- Loaded in bf16 (from a pruned single file, and `prune` of a bf16 DiT as the contract's
  "pruned AdaLN" job does), the AdaLN projections and the curve table are float32, the output
  norm's weight and the blocks' other layers bf16.
- A bf16 forward's modulation (the first block's attention input, the output norm's rows)
  equals a reference worked here in ComfyUI's order (float32 table row, float32 projection,
  then the cast), byte for byte, and differs from the all-bf16 projection's.
- FSDP2 over 2 ranks (a block of two dtypes is one unit) equals the unsharded model exactly.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest
import torch
from h3_files import GRID, write_pruned

from paradit.backend.models.families.minimax_h3 import pruned
from paradit.backend.models.families.minimax_h3.tiny import h3_transformer
from paradit.backend.models.tiny_parts import seeded

BF16 = torch.bfloat16
F32 = torch.float32


def _inputs(config) -> dict[str, torch.Tensor]:
    """One packed sequence of 3 text, 4 video and 2 audio rows at two timesteps (off the
    curve's grid points: interpolated rows), the activations bf16 (a bf16 run's)."""
    gen = torch.Generator().manual_seed(5)
    return {
        "hidden_states": torch.randn(1, 4, config.in_channels * 4, generator=gen),
        "audio_hidden_states": torch.randn(1, 2, config.audio_in_channels, generator=gen),
        "encoder_hidden_states": torch.randn(1, 3, config.text_dim, generator=gen).to(BF16),
        "timestep": torch.tensor([0.231, 0.617]),
        "timestep_indices": torch.tensor([0, 1, 0, 1, 1, 0, 1, 0, 1]),
        "token_tags": torch.tensor([1, 1, 1, 0, 0, 0, 0, 2, 2]),
        "position_ids": torch.randint(0, 4, (9, 3), generator=gen),
        "video_indices": torch.tensor([3, 4, 5, 6]),
        "audio_indices": torch.tensor([7, 8]),
        "text_indices": torch.tensor([0, 1, 2]),
    }


@pytest.fixture(scope="module")
def bf16_model(tmp_path_factory):
    """The tiny pruned DiT from a pruned single file (bf16 weights), loaded in bf16."""
    from paradit.backend.models.single_file.components import FILE_TOOLS

    path = tmp_path_factory.mktemp("h3") / "minimax_h3_pruned_bf16.safetensors"
    write_pruned(path, seeded(704, h3_transformer).eval(), int8=False)
    return pruned.load_pruned_file(str(path), BF16, FILE_TOOLS)


def _adaln(name: str) -> bool:
    return ".adaln_proj." in f".{name}" or name.startswith("norm_out.linear.")


def _dtypes(model) -> tuple[set, set]:
    kept = set(model._keep_in_fp32_modules) - {"adaln_proj", "norm_out.linear"}
    adaln = {p.dtype for n, p in model.named_parameters() if _adaln(n)}
    rest = {
        p.dtype
        for n, p in model.named_parameters()
        if not _adaln(n) and not any(part in kept for part in n.split("."))
    }
    return adaln, rest


def test_bf16_loads_keep_the_adaln_projections_float32(bf16_model):
    """From the file and from `prune` (the contract job's variant) alike."""
    adaln, rest = _dtypes(bf16_model)
    assert (adaln, rest) == ({F32}, {BF16})
    assert bf16_model.time_embedder.table.dtype == F32
    assert bf16_model.norm_out.norm.weight.dtype == BF16  # the norm beside it is not kept
    from paradit.backend.models.casting import cast_model

    made = pruned.prune(cast_model(seeded(704, h3_transformer), BF16), grid=GRID, width=8)
    assert _dtypes(made) == ({F32}, {BF16})


def _captured(model, inputs):
    """The first block's input and its attention's input, the output norm's output, and the
    curve's rows `c(t)` the forward used."""
    seen: dict[str, torch.Tensor] = {}

    def keep(name: str, output: bool = False):
        def hook(_module, args, *out):
            seen.setdefault(name, out[0] if output else args[0])  # returns None: changes nothing

        return hook

    block = model.transformer_blocks[0]
    hooks = [
        block.register_forward_pre_hook(keep("block_in")),
        block.attn.register_forward_pre_hook(keep("attn_in")),
        model.norm_out.register_forward_pre_hook(keep("out_in")),
        model.norm_out.register_forward_hook(keep("out", output=True)),
        model.time_embedder.register_forward_hook(keep("c", output=True)),
    ]
    try:
        with torch.no_grad():
            model(**inputs, return_dict=False)
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def _comfyui_order(model, seen, inputs, projection_dtype):
    """The first block's attention input and the output norm's rows worked as ComfyUI orders
    them: `c(t)` (float32) through the projection in `projection_dtype` (float32 as ComfyUI
    keeps a pruned file's; bf16 for the all-bf16 run), the block's vectors cast to bf16 per
    row before `norm1(x) * (1 + scale) + shift`; the output norm's float32 uncast."""
    c = seen["c"]
    assert c.dtype == F32
    rows = inputs["timestep_indices"] * 3 + inputs["token_tags"]
    block = model.transformer_blocks[0]
    w, b = block.adaln_proj.linear.weight, block.adaln_proj.linear.bias
    vectors = torch.nn.functional.linear(
        c.to(projection_dtype), w.to(projection_dtype), b.to(projection_dtype)
    )
    hidden = model.config.hidden_size
    shift, scale = (v[rows].to(BF16) for v in vectors.reshape(-1, 6 * hidden).chunk(6, dim=-1)[:2])
    with torch.no_grad():
        attn_in = block.norm1(seen["block_in"]) * (1.0 + scale) + shift
        lin = model.norm_out.linear
        out_vectors = torch.nn.functional.linear(
            c.to(projection_dtype), lin.weight.to(projection_dtype), lin.bias.to(projection_dtype)
        )
        out_shift, out_scale = out_vectors.chunk(2, dim=-1)
        t_rows = inputs["timestep_indices"]
        out = model.norm_out.norm(seen["out_in"]) * (1.0 + out_scale[t_rows]) + out_shift[t_rows]
    return attn_in, out


def test_bf16_modulation_is_comfyuis_float32_projection_then_the_cast(bf16_model):
    inputs = _inputs(bf16_model.config)
    seen = _captured(bf16_model, inputs)
    assert seen["attn_in"].dtype == BF16 and seen["out"].dtype == F32
    attn_in, out = _comfyui_order(bf16_model, seen, inputs, F32)
    assert torch.equal(seen["attn_in"], attn_in)
    assert torch.equal(seen["out"], out)
    all_bf16 = _comfyui_order(bf16_model, seen, inputs, BF16)
    assert not torch.equal(seen["attn_in"], all_bf16[0])
    assert not torch.equal(seen["out"], all_bf16[1])


def _two_ranks(rank: int, world_size: int, state: dict, config: dict) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    from paradit.backend.models.casting import cast_model
    from paradit.backend.parallel.fsdp import shard_weights

    model = pruned.MiniMaxH3PrunedTransformer3DModel(**config)
    model.load_state_dict(state)
    model = cast_model(model, BF16).eval()
    assert model.transformer_blocks[0].adaln_proj.linear.weight.dtype == F32
    inputs = _inputs(model.config)
    with torch.no_grad():
        whole = model(**inputs, return_dict=False)
    shard_weights(model, init_device_mesh("cpu", (world_size,)))
    with torch.no_grad():
        sharded = model(**inputs, return_dict=False)
    for a, b in zip(whole, sharded, strict=True):
        assert torch.equal(a, b)


def test_fsdp2_two_ranks_equal_one(bf16_model):
    from conftest import spawn_gloo

    state = {k: v.float() for k, v in bf16_model.state_dict().items()}
    config = {k: v for k, v in bf16_model.config.items() if not k.startswith("_")}
    spawn_gloo(2, _two_ranks, state, config)
