"""LTX-2.5's diffusion video decoder in ComfyUI's VAEDecodeTiled tiles (`decode_tiles`): the
node's widgets in latent units, the tile spans, and the decode of a tiny diffusion decoder
equal to a reference written here from ComfyUI's code as read (Comfy-Org/ComfyUI nodes.py
VAEDecodeTiled 5aabaf51, comfy/sd.py `VAE.decode_tiled` 35ead008, comfy/utils.py
`tiled_scale_multidim` b3be02d6, comfy/ldm/lightricks/vae/na_diffusion_decoder.py
`CausalDiffusionVAE.decode` (comfyanonymous/ComfyUI 8fd62980): a generator seeded 0 on
every tile's decode). Ranks: the family contract's `2.5 comfyui decode tiles` job
(families/ltx2/tiny_job.py) deals 8 tiles to 2 and 3 ranks against world size 1's float
frames; tests/workflow/test_templates_ltx.py runs a template's two tiles on 2 ranks.

Cost: about 3 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import itertools

import pytest
import torch

from paradit.backend.decode_tiles import DecodeTiles, spans


@pytest.mark.fast
def test_the_templates_tiles_in_latent_units():
    """The LTX-2.5 templates' VAEDecodeTiled 374 (512, 64, 64, 16) on the diffusion VAE
    (spatial 32, temporal 8: round((8 x 8192 - 7) / 8192)): tiles of 8 latent frames (64 / 8)
    x 16 x 16 sharing 2 frames (min(8 // 2, 16 // 8)) and 2 pixels (64 / 32); at the saved
    1280x704 x 121 frames (16 x 22 x 40 latents) the frames start at 0, 6, 12 (the last 4
    long), the rows at 0 and 14 (8 long: 22 - 14), the columns at 0, 14, 28 (12 long)."""
    tiles = DecodeTiles(512, 64, 64, 16)
    assert tiles.latent(8, 32) == ((8, 16, 16), (2, 2, 2))
    assert spans(16, 8, 2) == [(0, 8), (6, 8), (12, 4)]
    assert spans(22, 16, 2) == [(0, 16), (14, 8)]
    assert spans(40, 16, 2) == [(0, 16), (14, 16), (28, 12)]
    assert spans(4, 16, 2) == [(0, 4)]
    # the node's clamps: overlap above a quarter of the tile, temporal overlap above half
    assert DecodeTiles(128, 64, 16, 16).latent(8, 32) == ((2, 4, 4), (1, 1, 1))
    with pytest.raises(ValueError, match="tile_size at least 64"):
        DecodeTiles(32, 0, 64, 8)
    with pytest.raises(ValueError, match="exactly tile_size, overlap"):
        DecodeTiles.from_json({"tile_size": 512})


def comfyui_tiled_decode(decoder, z, tile, overlap):
    """ComfyUI's tiled decode, written from its formulas: the starts, the seed-0 noise of each
    tile's own decode, the ramps of 8 x overlap - 7 frames and 32 x overlap pixels at both ends
    of each axis, the masked sum over the summed masks."""
    _, _, f, h, w = z.shape
    out = torch.zeros(1, 3, 8 * f - 7, 32 * h, 32 * w)
    div = torch.zeros(1, 1, 8 * f - 7, 32 * h, 32 * w)
    starts = []
    for size, t, o in zip((f, h, w), tile, overlap, strict=True):
        starts.append(range(0, size - o, t - o) if size > t else [0])
    feathers = (8 * overlap[0] - 7, 32 * overlap[1], 32 * overlap[2])
    for corner in itertools.product(*starts):
        cut, at = z, []
        for d, (size, t, o) in enumerate(zip((f, h, w), tile, overlap, strict=True)):
            pos = max(0, min(size - o, corner[d]))
            cut = cut.narrow(d + 2, pos, min(t, size - pos))
            at.append(pos * (8 if d == 0 else 32))
        with torch.no_grad():
            pixels = decoder.decode(cut, generator=torch.Generator().manual_seed(0))[0]
        mask = torch.ones(1, 1, *pixels.shape[2:])
        for d in range(2, 5):
            feather = feathers[d - 2]
            if feather >= mask.shape[d]:
                continue
            for k in range(feather):
                mask.narrow(d, k, 1).mul_((k + 1) / feather)
                mask.narrow(d, mask.shape[d] - 1 - k, 1).mul_((k + 1) / feather)
        o, o_d, p, m = out, div, pixels, mask
        for d in range(3):
            n = min(p.shape[d + 2], o.shape[d + 2] - at[d])
            o, o_d = o.narrow(d + 2, at[d], n), o_d.narrow(d + 2, at[d], n)
            p, m = p.narrow(d + 2, 0, n), m.narrow(d + 2, 0, n)
        o.add_(p * m)
        o_d.add_(m)
    return out / div


def test_the_tiled_decode_equals_comfyuis_on_the_tiny_decoder():
    """A tiny diffusion decoder (tests/comfy_files' seeded diffusers model, as the tiny file
    holds it) on 5 x 5 x 5 latents in tiles of 4 x 4 x 4 sharing 2 x 1 x 1 (the widgets 128,
    32, 32, 16): 8 tiles, some shorter at the ends, each decoded alone by the family's
    `decode_tile` (as any rank does) and feathered by its `assemble`, equal to the reference;
    one whole decode differs; tiles of one shape draw the same noise (a tile's decode does not
    depend on where it sits, only on its latents)."""
    from comfy_files import ltx25_diffusion_decoder

    from paradit.backend.models.families.ltx2 import diffusion_tiles

    decoder = ltx25_diffusion_decoder(0).eval()
    z = torch.randn(1, 8, 5, 5, 5, generator=torch.Generator().manual_seed(5))
    tiles = DecodeTiles(128, 32, 32, 16)
    assert tiles.latent(8, 32) == ((4, 4, 4), (2, 1, 1))
    job = diffusion_tiles.tiled_decode(decoder, z, tiles, to_frames=lambda video: video)
    assert job.num_tiles == 8
    ours = job.assemble([job.decode_tile(i) for i in reversed(range(8))][::-1])
    theirs = comfyui_tiled_decode(decoder, z, (4, 4, 4), (2, 1, 1))
    assert ours.shape == (1, 3, 33, 160, 160)
    assert torch.equal(ours, theirs)
    with torch.no_grad():
        whole = decoder.decode(z, generator=torch.Generator().manual_seed(0))[0]
    assert (whole - theirs).abs().max() > 1e-3
    assert diffusion_tiles.window_problem(decoder, tuple(z.shape), tiles) is None
    one = DecodeTiles(512, 64, 64, 64)  # one tile: the whole decode
    single = diffusion_tiles.tiled_decode(decoder, z, one, to_frames=lambda video: video)
    assert single.num_tiles == 1
    assert torch.equal(single.assemble([single.decode_tile(0)]), whole)
