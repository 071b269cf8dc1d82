"""MiniMax H3's pruned-AdaLN DiT file (ComfyUI's `minimax_h3_fl2va_pruned_int8_convrot`):
a tiny file in that layout (original key names, fused QKV rows `[q; k; v]`, `adaln_t_table`
in place of the timestep MLP, rank-reduced AdaLN projections, the blocks' linears int8 with
ConvRot) loads into `MiniMaxH3PrunedTransformer3DModel` and computes what diffusers' own
`MiniMaxH3Transformer3DModel` computes with the unpruned weights it was made from (on the
table's grid, where the curve is exact).

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest
import torch
from h3_files import CONVROT, GRID, original_names, write_pruned

from paradit.backend.models.families.minimax_h3 import pruned
from paradit.backend.models.families.minimax_h3.single_file import TABLE, detect_config
from paradit.backend.models.families.minimax_h3.tiny import h3_transformer
from paradit.backend.models.tiny_parts import seeded


@pytest.fixture(scope="module")
def unpruned():
    return seeded(704, h3_transformer).eval()


def dequantized_unpruned(model, path):
    """diffusers' unpruned model holding the file's int8 values (the same rounding), through
    diffusers' own converter: the reference the pruned model is compared with."""
    from diffusers.loaders.single_file_utils import (
        convert_minimax_h3_transformer_checkpoint_to_diffusers,
    )
    from safetensors.torch import load_file

    from paradit.backend.models.int8 import dequantize

    stored = load_file(str(path))
    original = original_names({k: t.clone() for k, t in model.state_dict().items()})
    for key in original:
        layer = key[: -len("weight")]
        if layer + "weight_scale" in stored:
            original[key] = dequantize(stored[key], stored[layer + "weight_scale"], CONVROT)
    reference = seeded(704, h3_transformer).eval()
    state = convert_minimax_h3_transformer_checkpoint_to_diffusers(
        original, dict(reference.config), qkv_layout="stacked"
    )
    reference.load_state_dict(state)
    return reference


def dit_inputs(config) -> dict[str, torch.Tensor]:
    """One packed sequence of 3 text, 4 video and 2 audio rows at two timesteps on the grid."""
    gen = torch.Generator().manual_seed(0)
    channels = config.in_channels * 4
    tags = torch.tensor([1, 1, 1, 0, 0, 0, 0, 2, 2])
    return {
        "hidden_states": torch.randn(1, 4, channels, generator=gen),
        "audio_hidden_states": torch.randn(1, 2, config.audio_in_channels, generator=gen),
        "encoder_hidden_states": torch.randn(1, 3, config.text_dim, generator=gen),
        "timestep": torch.tensor([7 / (GRID - 1), 20 / (GRID - 1)]),
        "timestep_indices": torch.tensor([0, 1, 0, 1, 1, 0, 1, 0, 1]),
        "token_tags": tags,
        "position_ids": torch.randint(0, 4, (9, 3), generator=gen),
        "video_indices": torch.tensor([3, 4, 5, 6]),
        "audio_indices": torch.tensor([7, 8]),
        "text_indices": torch.tensor([0, 1, 2]),
    }


def test_pruned_int8_convrot_file_computes_diffusers_unpruned(tmp_path, unpruned):
    """The file is recognised as a pruned H3 DiT (the tiny preset's: `paradit plan` builds it
    on the meta device), its config read off its shapes (28 heads of 8, 2 blocks, 1
    refiner block, the curve 33x32), and the pruned model on its weights equals diffusers'
    unpruned DiT on the same int8 values, on the grid; off the grid it interpolates (it
    differs)."""
    from paradit.backend.models.single_file.build import meta_pipeline_of_files
    from paradit.backend.models.single_file.components import FILE_TOOLS
    from paradit.backend.models.single_file.detect import recognise

    path = tmp_path / "minimax_h3_fl2va_pruned_int8_convrot.safetensors"
    write_pruned(path, unpruned)
    detection = recognise(str(path)).detection  # the generic recognition (`paradit models`)
    assert (detection.role, detection.variant) == ("transformer", "tiny-minimax-h3-pruned")
    planned = meta_pipeline_of_files(str(path)).transformer  # `paradit plan` on the file
    assert type(planned) is pruned.MiniMaxH3PrunedTransformer3DModel
    assert planned.time_embedder.table.shape == (GRID, 32)
    model = pruned.load_pruned_file(str(path), torch.float32, FILE_TOOLS)
    config = model.config
    assert (config.num_attention_heads, config.attention_head_dim) == (28, 8)
    assert (config.num_layers, config.num_refiner_layers, config.ffn_dim) == (2, 1, 64)
    assert (config.adaln_curve_grid, config.time_embed_dim) == (GRID, 32)
    reference = dequantized_unpruned(unpruned, path)
    inputs = dit_inputs(config)
    with torch.no_grad():
        ours = model(**inputs, return_dict=False)
        theirs = reference(**inputs, return_dict=False)
        for a, b in zip(ours, theirs, strict=True):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), (a - b).abs().max()
        off_grid = {**inputs, "timestep": torch.tensor([0.23, 0.61])}
        ours = model(**off_grid, return_dict=False)[0]
        theirs = reference(**off_grid, return_dict=False)[0]
    assert not torch.allclose(ours, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.fast
def test_curve_table_interpolates_as_comfyui_reads_it():
    """`c(t)`: the grid's rows at its points, linear between them, clamped to [0, 1]."""
    table = pruned.CurveTable(3, 2)
    table.table.data = torch.tensor([[0.0, 1.0], [2.0, 3.0], [6.0, 5.0]])
    t = torch.tensor([0.0, 0.25, 0.5, 1.0, 1.5, -1.0])
    expected = torch.tensor(
        [[0.0, 1.0], [1.0, 2.0], [2.0, 3.0], [6.0, 5.0], [6.0, 5.0], [0.0, 1.0]]
    )
    assert torch.equal(table(t), expected)


@pytest.mark.fast
def test_a_file_without_the_table_is_refused():
    with pytest.raises(ValueError, match=TABLE):
        detect_config({"video_patch_proj.weight": (64, 16)})


def test_prune_is_the_unpruned_dit_on_the_grid(unpruned):
    """`pruned.prune` (what the contract's "pruned AdaLN" job runs on 3 ranks) at the timestep
    MLP's full width equals diffusers' DiT at the grid's points; the published width (8)
    and a width past the MLP's are refused or approximate, as they say."""
    model = pruned.prune(unpruned, grid=GRID, width=32)
    inputs = dit_inputs(unpruned.config)
    with torch.no_grad():
        ours = model(**inputs, return_dict=False)
        theirs = unpruned(**inputs, return_dict=False)
    for a, b in zip(ours, theirs, strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), (a - b).abs().max()
    assert pruned.prune(unpruned, grid=GRID).config.time_embed_dim == 8
    with pytest.raises(ValueError, match="1 to 32"):
        pruned.prune(unpruned, width=33)
