"""An exact split VAE decode: the latent cut into row bands, one per rank, decoded as one.

Each rank decodes its own contiguous band of latent rows with the VAE's own (untiled) decode,
while the decoder's layers are wrapped for the duration so that the bands together compute
exactly what the whole decode computes (up to float rounding), as patch parallelism does:

- every convolution whose kernel reaches over rows (stride 1, "same" height) exchanges its
  halo rows with the neighbouring ranks and runs unpadded along the height; at the picture's
  top and bottom edges it keeps the layer's own padding (zeros, replicate, reflect). The
  layer's input arrives as the caller padded it (a causal video conv pads inside its
  `forward`, after joining its temporal cache), so the halo is put in where the padding rows
  were: the cache stays per rank, each rank caching its own band, and the causal video VAEs
  keep their temporal semantics;
- `GroupNorm` reduces its statistics (mean, then the centred sum of squares) over all ranks;
- the modules the family names as whole-frame (the mid-block's spatial attention) gather the
  whole frame, compute, and keep their band (their own layers run unwrapped on the whole);
- everything else is row-local (nearest 2x upsampling doubles a band, channel norms, pixel
  shuffles), so it needs nothing.

Rank 0 gathers the decoded bands (padded to the tallest: gloo takes only equal sizes). The
collectives run on the given group; a gloo group on a CUDA device goes through host memory.
A family's VAE splits only where the family says so (`FamilySpec.vae_split`) and a test shows
the split equals the whole decode; other VAEs decode whole on rank 0.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

log = logging.getLogger(__name__)


def band_rows(height: int, num_ranks: int) -> list[int]:
    """Latent rows of each rank's band: as even as they go, the first ranks one more."""
    if num_ranks < 1:
        raise ValueError(f"num_ranks must be >= 1, got {num_ranks}")
    if height < num_ranks:
        raise ValueError(f"a split decode needs a latent row per rank: {height} < {num_ranks}")
    base, extra = divmod(height, num_ranks)
    return [base + (1 if rank < extra else 0) for rank in range(num_ranks)]


@dataclass(frozen=True)
class Bands:
    """This rank's place in a split decode: every rank's latent rows, and the group."""

    rows: tuple[int, ...]
    rank: int
    group: dist.ProcessGroup | None

    def __post_init__(self) -> None:
        if not 0 <= self.rank < len(self.rows) or min(self.rows) < 1:
            raise ValueError(f"rank {self.rank} has no band among rows {self.rows}")

    @property
    def first(self) -> bool:
        return self.rank == 0

    @property
    def last(self) -> bool:
        return self.rank == len(self.rows) - 1

    def heights(self, height: int) -> list[int]:
        """Every rank's band height at the resolution where this rank's is `height`."""
        scale, rest = divmod(height, self.rows[self.rank])
        if rest:
            raise ValueError(f"band of {height} rows is no multiple of {self.rows[self.rank]}")
        return [rows * scale for rows in self.rows]

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's `tensor` (all the same shape), on this tensor's device."""
        moved = _for_group(tensor, self.group)
        out = [torch.empty_like(moved) for _ in self.rows]
        dist.all_gather(out, moved, group=self.group)
        return [part.to(tensor.device) for part in out]

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """The sum of `tensor` over the ranks."""
        moved = _for_group(tensor, self.group).clone()
        dist.all_reduce(moved, group=self.group)
        return moved.to(tensor.device)

    def whole(self, band: torch.Tensor) -> torch.Tensor:
        """Every rank's band of the same layer, stacked along the height: the whole frame."""
        heights = self.heights(band.shape[-2])
        tallest = max(heights)
        padded = F.pad(band, (0, 0, 0, tallest - band.shape[-2]))
        parts = self.all_gather(padded.contiguous())
        return torch.cat([part[..., :h, :] for part, h in zip(parts, heights, strict=True)], -2)

    def mine(self, whole: torch.Tensor) -> torch.Tensor:
        """This rank's band of a whole frame."""
        heights = self.heights_of_whole(whole.shape[-2])
        top = sum(heights[: self.rank])
        return whole[..., top : top + heights[self.rank], :]

    def heights_of_whole(self, height: int) -> list[int]:
        """Every rank's band height in a whole frame of `height` rows."""
        scale, rest = divmod(height, sum(self.rows))
        if rest:
            raise ValueError(f"a frame of {height} rows is no multiple of {sum(self.rows)}")
        return [rows * scale for rows in self.rows]

    def halo(self, band: torch.Tensor, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The `rows` rows above and below this rank's band (zeros past the picture's edges)."""
        if band.shape[-2] < rows:
            raise ValueError(f"a band of {band.shape[-2]} rows cannot lend a halo of {rows}")
        edges = torch.cat([band[..., :rows, :], band[..., -rows:, :]], -2).contiguous()
        parts = self.all_gather(edges)
        zeros = torch.zeros_like(edges[..., :rows, :])
        above = zeros if self.first else parts[self.rank - 1][..., rows:, :]
        below = zeros if self.last else parts[self.rank + 1][..., :rows, :]
        return above, below


def _for_group(tensor: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    """`tensor` where the group's backend takes it: host memory for gloo."""
    if tensor.device.type != "cpu" and dist.get_backend(group) == "gloo":
        return tensor.to("cpu")
    return tensor


# -- the wrapped layers ------------------------------------------------------------------------


def _conv_height(module: nn.Module) -> int:
    """Halo rows each side of a stride-1 convolution that keeps the height."""
    kernel, dilation = module.kernel_size[-2], module.dilation[-2]
    if module.stride[-2] != 1 or isinstance(module.padding, str):
        raise ValueError(f"{type(module).__name__}: a split decode takes stride-1 convs only")
    reach = (kernel - 1) * dilation
    if reach % 2:
        raise ValueError(f"{type(module).__name__}: an even-sized kernel has no centred halo")
    return reach // 2


def _wrap_conv(module: nn.Module, bands: Bands) -> Callable[[], None]:
    """Halo exchange in `module`'s convolution; returns the undo.

    A decoder's convolutions keep the height: the rows its caller padded the band with (a
    causal conv pads in its `forward`, after joining its cache) and the conv's own padding
    make the kernel's reach. They are replaced by the neighbours' rows; at the picture's
    edges they stay as the layer padded them (zeros, or the caller's mode)."""
    halo = _conv_height(module)
    if halo == 0:
        return lambda: None
    zeros_mode = module.padding_mode == "zeros"

    def halo_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None):
        padding = list(module.padding) if zeros_mode else [0] * len(module.padding)
        if not zeros_mode:  # as the conv's own `_conv_forward` pads
            x = F.pad(x, module._reversed_padding_repeated_twice, mode=module.padding_mode)
        own = padding[-2]
        padded = halo - own  # the rows the caller padded the band with, each side
        if padded < 0:
            raise ValueError(f"{type(module).__name__} pads more rows than its kernel reaches")
        rows = x.shape[-2]
        band = x[..., padded : rows - padded, :]
        above, below = bands.halo(band, halo)
        if bands.first:
            above = torch.cat([above[..., :own, :], x[..., :padded, :]], -2)
        if bands.last:
            below = torch.cat([x[..., rows - padded :, :], below[..., :own, :]], -2)
        x = torch.cat([above.to(band.dtype), band, below.to(band.dtype)], -2)
        padding[-2] = 0
        conv = F.conv3d if x.dim() == 5 else F.conv2d
        return conv(x, weight, bias, module.stride, padding, module.dilation, module.groups)

    module._conv_forward = halo_conv
    return lambda: delattr(module, "_conv_forward")


def _wrap_group_norm(module: nn.GroupNorm, bands: Bands) -> Callable[[], None]:
    """Statistics over all ranks' bands in `module`; returns the undo."""

    def forward(x: torch.Tensor) -> torch.Tensor:
        groups = module.num_groups
        grouped = x.reshape(x.shape[0], groups, -1).to(torch.float64)
        count = bands.all_reduce(torch.tensor([grouped.shape[-1]], dtype=torch.float64))
        mean = bands.all_reduce(grouped.sum(-1)) / count
        centred = grouped - mean[..., None]
        var = bands.all_reduce(centred.square().sum(-1)) / count
        normed = (centred * torch.rsqrt(var + module.eps)[..., None]).reshape(x.shape)
        normed = normed.to(x.dtype)
        if module.affine:
            shape = (1, -1) + (1,) * (x.dim() - 2)
            normed = normed * module.weight.view(shape) + module.bias.view(shape)
        return normed

    module.forward = forward
    return lambda: delattr(module, "forward")


def _wrap_whole_frame(module: nn.Module, bands: Bands) -> Callable[[], None]:
    """`module` computes on the whole frame and keeps this rank's band; returns the undo."""
    original = module.forward

    def forward(x: torch.Tensor, *args, **kwargs):
        return bands.mine(original(bands.whole(x), *args, **kwargs))

    module.forward = forward
    return lambda: delattr(module, "forward")


@contextlib.contextmanager
def split_layers(decoder: nn.Module, bands: Bands, whole_frame: tuple[str, ...]) -> Iterator[None]:
    """`decoder`'s layers wrapped for a band decode (see the module's docstring), restored
    after. `whole_frame`: class names of the modules that must see the whole frame."""
    undo: list[Callable[[], None]] = []
    skip: list[str] = []  # the whole-frame modules' own layers run on the whole frame
    try:
        for name, module in decoder.named_modules():
            if any(name.startswith(prefix + ".") for prefix in skip):
                continue
            if type(module).__name__ in whole_frame:
                undo.append(_wrap_whole_frame(module, bands))
                skip.append(name)
            elif isinstance(module, (nn.Conv2d, nn.Conv3d)):
                undo.append(_wrap_conv(module, bands))
            elif isinstance(module, nn.GroupNorm):
                undo.append(_wrap_group_norm(module, bands))
        yield
    finally:
        for step in reversed(undo):
            step()


def decode_bands(
    decode: Callable[[torch.Tensor], torch.Tensor],
    vae: nn.Module,
    z: torch.Tensor,
    whole_frame: tuple[str, ...],
    group: dist.ProcessGroup | None = None,
    *,
    layers: str = "decoder",
) -> torch.Tensor | None:
    """`decode(z)` split over the group's ranks in row bands; the whole sample on rank 0,
    None elsewhere. `decode` is `vae`'s untiled decode of a latent (its tiling is switched
    off for the duration); `vae.<layers>` holds the layers that are wrapped (the VAE's other
    layers on the decode's path must be row-local: 1x1 convs)."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    bands = Bands(tuple(band_rows(z.shape[-2], world)), rank, group)
    top = sum(bands.rows[:rank])
    mine = z[..., top : top + bands.rows[rank], :]
    log.debug("rank %d decodes latent rows %d..%d", rank, top, top + bands.rows[rank])
    tiling = getattr(vae, "use_tiling", None)
    if tiling:
        vae.use_tiling = False
    try:
        with split_layers(getattr(vae, layers), bands, whole_frame):
            sample = decode(mine)
    finally:
        if tiling:
            vae.use_tiling = tiling
    return _gather(sample, bands)


def _gather(sample: torch.Tensor, bands: Bands) -> torch.Tensor | None:
    """Every rank's decoded band stacked on rank 0 (padded to the tallest for gloo)."""
    heights = bands.heights(sample.shape[-2])
    tallest = max(heights)
    padded = _for_group(F.pad(sample, (0, 0, 0, tallest - sample.shape[-2])), bands.group)
    padded = padded.contiguous()
    buffers = [torch.empty_like(padded) for _ in heights] if bands.rank == 0 else None
    dist.gather(padded, buffers, group=bands.group, group_dst=0)
    if buffers is None:
        return None
    parts = [part[..., :h, :] for part, h in zip(buffers, heights, strict=True)]
    return torch.cat(parts, -2).to(sample.device)
