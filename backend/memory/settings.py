"""What a user asks of the memory plan, and a job's size: torch-free (frontends import it)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..decode_tiles import DecodeTiles

OFFLOAD_MODES = ("auto", "none", "model", "experts", "group", "sequential")
TILING_MODES = ("auto", "on", "off")
WEIGHTS_MODES = ("auto", "bf16", "fp8", "int8", "file")
ENCODER_PLACEMENTS = ("auto", "device", "sharded", "cpu")
"""`--encoder-placement`: the plan's choice, whole on rank 0's device, sharded over the
replica's ranks (FSDP2), or in rank 0's host memory."""


@dataclass(frozen=True)
class MemorySettings:
    """What the user asked for (`--gpu-memory`, `--offload`, `--vae-tiling`, `--plan-for`,
    `--vae-tile`, `--lora-cache-gib` with `--lora-dir`)."""

    gpu_memory_gib: float | None = None
    offload: str = "auto"
    vae_tiling: str = "auto"
    plan_for: str | None = None
    """"WxHxF": the job the group's layout is chosen for (default: the model's default size)."""
    vae_tile: str | None = None
    """"HxW": the VAE's tile size in pixels when it tiles (default: the VAE's own)."""
    lora_cache_gib: float | None = None
    """LoRAs are on (`--lora-dir`): the bound of the parsed-LoRA cache (`--lora-cache-gib`),
    which the plan counts with the rows a job's LoRAs save; None: no LoRAs."""
    weights: str = "auto"
    """`--weights`: the DiT's stored dtype (auto, bf16, fp8, int8, file)."""
    encoder_placement: str = "auto"
    """`--encoder-placement`: where the text/image encoders live (`ENCODER_PLACEMENTS`)."""

    def __post_init__(self) -> None:
        if self.gpu_memory_gib is not None and not self.gpu_memory_gib > 0:
            raise ValueError(f"--gpu-memory must be > 0 GiB, got {self.gpu_memory_gib}")
        if self.offload not in OFFLOAD_MODES:
            raise ValueError(f"--offload must be one of {', '.join(OFFLOAD_MODES)}")
        if self.weights not in WEIGHTS_MODES:
            raise ValueError(f"--weights must be one of {', '.join(WEIGHTS_MODES)}")
        if self.encoder_placement not in ENCODER_PLACEMENTS:
            raise ValueError(
                f"--encoder-placement must be one of {', '.join(ENCODER_PLACEMENTS)}, got "
                f"{self.encoder_placement!r}"
            )
        if self.vae_tiling not in TILING_MODES:
            raise ValueError(f"--vae-tiling must be one of {', '.join(TILING_MODES)}")
        if self.plan_for is not None:
            JobShape.parse(self.plan_for)
        if self.vae_tile is not None:
            parse_tile(self.vae_tile, "--vae-tile")
        if self.lora_cache_gib is not None and not 0 <= self.lora_cache_gib <= 1024:
            raise ValueError(
                f"--lora-cache-gib must be between 0 and 1024, got {self.lora_cache_gib}"
            )


def parse_tile(text: str, where: str) -> tuple[int, int]:
    """A tile size "HxW" in pixels (e.g. "256x256") as (height, width)."""
    height, sep, width = text.strip().lower().partition("x")
    if not (sep and height.isdigit() and width.isdigit() and int(height) and int(width)):
        raise ValueError(f"{where} must be HxW in pixels (e.g. 256x256), got {text!r}")
    return int(height), int(width)


@dataclass(frozen=True)
class JobShape:
    """The size of one job, in the units the planner needs."""

    width: int
    height: int
    frames: int
    batch: int = 1
    """Rows in one DiT forward: 2 when the family batches CFG's branches on one rank."""
    references: tuple[tuple[int, int], ...] = ()
    """An edit's input images, (width, height) in pixels as the pipeline VAE-encodes them:
    their tokens follow the output's in the sequence the DiT sees."""
    fps: float = 0.0
    """The job's frame rate (a request's `fps`): a model with an audio track (LTX-2, MiniMax
    H3) counts the audio's rows for the video's seconds at it; 0: the model's own rate."""
    audio_latent_frames: int = 0
    """The audio track's latent frames the job asks for (a request's `audio_latent_frames`);
    0: as the model's pipeline counts them for the video's frames at `fps`."""
    decode_tiles: DecodeTiles | None = None
    """ComfyUI's `VAEDecodeTiled` tiles the job decodes in (a request's `decode_tiles`: LTX-2.5's
    diffusion video decoder); None: the plan's own decode."""

    def __post_init__(self) -> None:
        if min(self.width, self.height, self.frames, self.batch) < 1:
            raise ValueError(f"width, height, frames and batch must be >= 1, got {self}")
        if not (math.isfinite(self.fps) and self.fps >= 0) or self.audio_latent_frames < 0:
            raise ValueError(
                f"fps must be a number >= 0 (0: the model's own) and audio_latent_frames >= 0 "
                f"(0: the model's count), got {self.fps} and {self.audio_latent_frames}"
            )
        if any(len(ref) != 2 or min(ref) < 1 for ref in self.references):
            raise ValueError(
                f"each reference image must be (width, height) >= 1 pixels, got {self.references}"
            )

    @property
    def described(self) -> str:
        """'WxHxF', with the frame rate and audio length the job asks for and the edit's
        reference images when it has some."""
        text = str(self)
        if self.fps:
            text += f" at {self.fps:g} fps"
        if self.audio_latent_frames:
            text += f" with {self.audio_latent_frames} audio latent frames"
        if self.decode_tiles is not None:
            tiles = self.decode_tiles
            text += (
                f" in decode_tiles {tiles.tile_size}/{tiles.overlap}/{tiles.temporal_size}/"
                f"{tiles.temporal_overlap}"
            )
        if not self.references:
            return text
        sizes = ", ".join(f"{w}x{h}" for w, h in self.references)
        return f"{text} with {len(self.references)} reference image(s) ({sizes})"

    @classmethod
    def parse(cls, text: str) -> JobShape:
        """'WxHxF' (or 'WxH' for one frame)."""
        try:
            numbers = [int(part) for part in text.lower().split("x")]
            if len(numbers) == 2:
                numbers.append(1)
            width, height, frames = numbers
            return cls(width, height, frames)
        except ValueError:
            raise ValueError(f"--plan-for must be WxHxF (e.g. 1280x720x81), got {text!r}") from None

    def scaled(self, factor: float, multiple: int) -> JobShape:
        """The same aspect ratio with sides times `factor`, rounded down to `multiple` (an
        edit's reference images keep their size: it is the inputs', not the output's; the
        frames, frame rate and audio too)."""
        width = max(multiple, int(self.width * factor) // multiple * multiple)
        height = max(multiple, int(self.height * factor) // multiple * multiple)
        return replace(self, width=width, height=height)

    def __str__(self) -> str:
        return f"{self.width}x{self.height}x{self.frames}"
