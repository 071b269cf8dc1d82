"""The values a workflow's nodes produce as paradit reads them (a model with its LoRAs and
shift, a prompt, a latent size, a sampler's settings), and `WorkflowPlan`, what a workflow
maps to. Torch-free."""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from .graph import Node, WorkflowError

# -- the values nodes produce -----------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    files: tuple[Path, ...]
    """The DiT file (as a tuple: the serve setting joins Wan 2.2 A14B's two)."""
    loader: Node
    checkpoint: bool = False
    """An all-in-one checkpoint (its CLIP and VAE outputs come from the same file)."""
    loras: tuple[tuple[str, float], ...] = ()
    shift: float | None = None
    shift_node: Node | None = None
    flow_levels: int | None = None
    """The table the shift's model sampling holds: ModelSamplingFlux's 10000 levels (None:
    ModelSamplingDiscreteFlow's 1000, the request's default)."""
    cfg_norm: float | None = None
    """CFGNorm's strength (None: no CFGNorm on the model)."""
    cfg_norm_node: Node | None = None

    def shifted(self, shift: float, node: Node, flow_levels: int | None = None) -> Model:
        """The model sampled at `shift` by `node` (a ModelSampling node, or a family's node
        that sets the shift) on a table of `flow_levels`; WorkflowError at a second one on
        one model."""
        if self.shift_node is not None:
            raise WorkflowError(
                node, f"a second ModelSampling node on one model (after node {self.shift_node.id})"
            )
        return dataclasses.replace(self, shift=shift, shift_node=node, flow_levels=flow_levels)


@dataclass(frozen=True)
class Clip:
    files: tuple[Path, ...]
    """The text encoder files (empty: the checkpoint's own)."""
    loader: Node
    checkpoint: Path | None = None


@dataclass(frozen=True)
class Vae:
    file: Path | None
    """None: the checkpoint's own."""
    loader: Node
    checkpoint: Path | None = None


@dataclass(frozen=True)
class ClipVision:
    file: Path
    loader: Node


class Scale(NamedTuple):
    """The size a node scales a loaded image to, on its 8-bit pixels."""

    width: int
    height: int
    crop: bool = True
    """FluxKontextImageScale crops the image to the size's aspect first (centre);
    ImageScaleToTotalPixels does not (crop disabled)."""
    method: str = "lanczos"
    """PIL's Lanczos, or `nearest-exact` (torch's, which picks 8-bit pixels as they are:
    images.py)."""


@dataclass(frozen=True)
class Resize:
    """One resize of ComfyUI's `ResizeImageMaskNode` (its `common_upscale`), made when the job
    is sent (`resize.py`): to `width` x `height` by `method`, centre-cut first where `crop`."""

    width: int
    height: int
    method: str
    crop: bool
    node: Node


@dataclass(frozen=True)
class Image:
    file: Path
    loader: Node
    scale: Scale | None = None
    """FluxKontextImageScale's or ImageScaleToTotalPixels' size; None: the image as loaded."""
    resizes: tuple[Resize, ...] = ()
    """ResizeImageMaskNode's resizes, in order (the image is made so when the job is sent)."""
    crf: int | None = None
    """LTXVPreprocess's img_compression: the image then reaches the VAE through one H.264
    frame (LTX-2's `image_prep` comfyui, `image_crf`)."""
    crf_node: Node | None = None

    def size(self) -> tuple[int, int]:
        """(width, height) as the next node gets it: scaled, resized, or the file's own."""
        if self.scale is not None:
            return self.scale[0], self.scale[1]
        if self.resizes:
            return self.resizes[-1].width, self.resizes[-1].height
        from .images import file_size

        return file_size(self.file)


@dataclass(frozen=True)
class Edit:
    """TextEncodeQwenImageEditPlus's reference images (image1..3 in order), encoded by `vae`;
    `method` FluxKontextMultiReferenceLatentMethod's (None: the model's own); or
    TextEncodeQwenImage21's (images.image_1.. in order)."""

    images: tuple[Image, ...]
    vae: Vae
    method: str | None
    node: Node
    image_prep: str | None = "comfyui"
    """The job's `image_prep`: ComfyUI's own preparation (Qwen-Image-Edit's text encoders);
    None where the pipeline's own is ComfyUI's (ReferenceLatent of a VAEEncode'd image on a
    family with `reference_latents`; Qwen-Image 2.1's references)."""
    resolution: int | None = None
    """TextEncodeQwenImage21's resolution (None: another node)."""
    reference_latent: bool = False
    """A ReferenceLatent's image: the model must declare `Family.reference_latents`."""


@dataclass(frozen=True)
class ClipVisionOutput:
    vision: ClipVision
    image: Image


@dataclass(frozen=True)
class Conditioning:
    text: str
    clip: Clip | None
    """None for a zeroed conditioning (ConditioningZeroOut)."""
    text_2: str | None = None
    """CLIPTextEncodeFlux's t5xxl text (`text` is its clip_l): the second encoder's own."""
    guidance: float | None = None
    """FluxGuidance's value."""
    guidance_node: Node | None = None
    start: Latent | None = None
    """WanImageToVideo's latent: its start image rides in the conditioning."""
    frame_rate: float | None = None
    """LTXVConditioning's frame rate (LTX-2's video positions)."""
    edit: Edit | None = None
    """An edit's reference images (TextEncodeQwenImageEditPlus)."""


@dataclass(frozen=True)
class Latent:
    node: Node
    width: int
    height: int
    frames: int
    image: Image | None = None
    clip_vision: ClipVisionOutput | None = None
    vae: Vae | None = None
    in_conditioning: bool = False
    """WanImageToVideo: the start image is in the positive and negative conditioning."""
    image_prep: str | None = None
    """The job's `image_prep` where the node prepares the start image its own way
    (HunyuanVideo15ImageToVideo: comfyui)."""
    ltxv: bool = False
    """EmptyLTXVLatentVideo's: LTX-2's video latent (its tokens: 32x32 pixels, 8 frames)."""
    image_strength: float = 1.0
    """LTXVImgToVideoInplace's strength of `image` (LTX-2's `image_strength` below 1)."""
    audio: AudioLatent | None = None
    """LTXVConcatAVLatent: the audio latent sampled with the video's."""
    joint_audio: bool = False
    """MiniMax H3's AV latent (MiniMaxH3ImageToVideo, EmptyMiniMaxH3LatentAV): it holds its
    audio stream too; VAEDecode takes its video, VAEDecodeAudio its audio."""

    def ltxv_tokens(self) -> int:
        """The video latent's token count as ComfyUI's LTX nodes count it: latent frames
        (length - 1) // 8 + 1, rows height // 32, columns width // 32."""
        return ((self.frames - 1) // 8 + 1) * (self.height // 32) * (self.width // 32)


@dataclass(frozen=True)
class AudioVae:
    """LTXVAudioVAELoader: LTX-2's audio VAE and vocoder, from `file` (or VAEDecodeAudio's
    VAELoader: MiniMax H3's audio VAE)."""

    file: Path
    loader: Node


@dataclass(frozen=True)
class AudioLatent:
    """LTXVEmptyLatentAudio: the audio of `frames` video frames at `frame_rate`."""

    node: Node
    frames: int
    frame_rate: float
    vae: AudioVae


@dataclass(frozen=True)
class Stage:
    """One sampler node's settings (KSampler, or one KSamplerAdvanced of a chain)."""

    node: Node
    model: Model
    positive: Conditioning
    negative: Conditioning
    seed: int
    steps: int
    cfg: float
    sampler: str
    scheduler: str
    start: int
    end: int
    add_noise: bool
    leftover: bool
    sigmas: tuple[float, ...] | None = None
    """Explicit noise levels (LTXVScheduler's), in place of the scheduler's."""
    audio_cfg: float | None = None
    """LTX-2's audio stream's own CFG scale (LTXVDualCFGGuider's audio_cfg), where it differs."""
    own_levels: Node | None = None
    """The scheduler node (Flux2Scheduler) whose levels are the model's own scheduler's: the
    job names no sampler, scheduler or shift."""
    steps_node: Node | None = None
    """The node whose widget gives the step count where it is not the sampler node (a
    SamplerCustomAdvanced's scheduler or levels node: BasicScheduler, ManualSigmas...)."""


@dataclass(frozen=True)
class Noise:
    """RandomNoise: the seed of the initial noise (SamplerCustomAdvanced's noise input)."""

    seed: int
    node: Node


@dataclass(frozen=True)
class Guider:
    """CFGGuider (cfg with a negative prompt) or BasicGuider (cfg 1, no negative)."""

    model: Model
    positive: Conditioning
    negative: Conditioning
    cfg: float
    node: Node
    audio_cfg: float | None = None
    """LTXVDualCFGGuider's audio scale where it differs from `cfg` (the video's)."""


@dataclass(frozen=True)
class SamplerName:
    """KSamplerSelect: the sampler (SamplerCustomAdvanced's sampler input)."""

    name: str
    node: Node


@dataclass(frozen=True)
class Sigmas:
    """BasicScheduler: the noise levels of `scheduler` for `steps` steps on `model`'s
    ModelSampling (its shift); LTXVScheduler: the levels themselves (`levels`, no model)."""

    model: Model | None
    scheduler: str
    steps: int
    node: Node
    levels: tuple[float, ...] | None = None
    own_size: tuple[int, int] | None = None
    """Flux2Scheduler: the width and height whose tokens set its levels, which are those of
    the model's own scheduler at that size (no model, no levels here)."""


@dataclass(frozen=True)
class SizedImage:
    """EmptyImage (and ImageScaleBy of one): an image paradit reads only the size of, where
    GetImageSize gives it to widgets."""

    width: int
    height: int
    node: Node


@dataclass(frozen=True)
class Upscaler:
    """LatentUpscaleModelLoader: a latent upscaler's file and the factor its config gives."""

    file: Path
    loader: Node
    factor: int


@dataclass(frozen=True)
class Upscale:
    """A second, upscaled stage (LTX-2's templates): the upscaler between the stages
    (LTXVLatentUpsampler's node) and the sampler pass at the upscaled size."""

    upscaler: Upscaler
    node: Node
    stage: Stage
    vae: Vae | None = None
    """The upsampler's VAE where it is a VAELoader's file (separate files): the decode's."""


@dataclass(frozen=True)
class Sampled:
    latent: Latent
    """The empty latent the first stage starts from."""
    stages: tuple[Stage, ...]
    separated: bool = False
    """LTXVSeparateAVLatent's video output (an audio-video latent split after sampling)."""
    upscale: Upscale | None = None
    """The second, upscaled stage that ran on the first's output."""


@dataclass(frozen=True)
class Upscaled:
    """LTXVLatentUpsampler: the first stage's sampled video latent through the upscaler."""

    sampled: Sampled
    upscaler: Upscaler
    node: Node
    vae: Vae | None = None
    """The VAE whose statistics ComfyUI normalises with, where it is a VAELoader's file."""
    image: Image | None = None
    """LTXVImgToVideoInplace's image written into the upscaled latent."""


@dataclass(frozen=True)
class UpscaledAV:
    """LTXVConcatAVLatent of an upscaled video latent and the first stage's audio latent:
    the latent a second stage samples."""

    upscaled: Upscaled
    node: Node


@dataclass(frozen=True)
class Refusal:
    """An output paradit cannot give as ComfyUI does (a sampler's denoised_output after a
    sampler whose last step does not return it): refused by the node that reads it."""

    node: Node
    reason: str


@dataclass(frozen=True)
class SampledAudio:
    """LTXVSeparateAVLatent's audio output (or the AV latent VAEDecodeAudio reads)."""

    sampled: Sampled
    node: Node


@dataclass(frozen=True)
class DecodedAudio:
    """LTXVAudioVAEDecode (VAEDecodeAudio): the sampled audio through the audio VAE."""

    audio: SampledAudio
    vae: AudioVae
    node: Node


@dataclass(frozen=True)
class Decoded:
    sampled: Sampled
    vae: Vae
    node: Node
    audio: DecodedAudio | None = None
    """The audio track the saved video carries (CreateVideo's audio input)."""
    decode_tiles: dict[str, int] | None = None
    """VAEDecodeTiled's widgets where its tiles change the pixels (the request's
    `decode_tiles`: LTX-2.5's diffusion video decoder)."""


@dataclass(frozen=True)
class Video:
    decoded: Decoded
    fps: float
    audio: DecodedAudio | None = None


# -- the plan ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkflowPlan:
    """What a workflow maps to."""

    request: dict[str, Any]
    """The job's fields; `image` is the file's path here (`body` sends its bytes)."""
    serve: dict[str, Any]
    """ServeConfig fields: model, text_encoders, vaes, image_encoders, lora_dirs (and upscaler
    for a two-stage job)."""
    lines: tuple[tuple[str, str, str], ...]
    """(node id, node type, how it was mapped), in the order the graph was evaluated."""
    workflow: dict[str, Any] = field(default_factory=dict)
    """The file, its sha256 and format; the ComfyUI folders used."""
    loaders: dict[str, Node] = field(default_factory=dict)
    """A file of the serve settings -> the loader node that names it."""
    sampler: Node | None = None
    """The (first) sampler node."""
    upscale_sampler: Node | None = None
    """The second, upscaled stage's sampler node (its sampler is `upscale.sampler`)."""
    own_levels: Node | None = None
    """The scheduler node whose levels the job leaves to the model's own scheduler
    (Flux2Scheduler): `check_files` checks the model's family runs them
    (`Family.own_levels`)."""
    text_guidance: tuple[Node, float] | None = None
    """The CLIPTextEncodeFlux node of the positive prompt and its guidance: the job's
    `guidance_scale` where the DiT embeds guidance (Flux.1 dev), nothing where it does not
    (schnell: ComfyUI's Flux ignores it there); `check_files` decides, reading the DiT."""
    images: dict[str, Scale | None] = field(default_factory=dict)
    """An edit's input files (`image`, `images`) as LoadImage gives them: file -> the size
    FluxKontextImageScale or ImageScaleToTotalPixels scales it to (None: as loaded), made when
    sent (`body`)."""
    reference: Node | None = None
    """The (first) ReferenceLatent node: `check_files` checks the model's family prepares
    references as ComfyUI's VAEEncode (`Family.reference_latents`)."""
    resized: dict[str, tuple[Resize, ...]] = field(default_factory=dict)
    """A start image LTXVPreprocess reads: file -> ResizeImageMaskNode's resizes, made when
    sent (`body`: LoadImage's image through them, in 8 bits as LTXVPreprocess truncates it)."""
    steps_node: Node | None = None
    """The node that gives the (first) stage's step count: its scheduler or levels node
    (ManualSigmas...), or the sampler node itself."""

    def body(self) -> dict[str, Any]:
        """The request as POST /v1/jobs takes it (the image files as base64)."""
        body = dict(self.request)
        if body.get("image"):
            body["image"] = self._encoded(body["image"])
        if body.get("images"):
            body["images"] = [self._encoded(path) for path in body["images"]]
        return body

    def _encoded(self, path: str) -> str:
        if path in self.resized:
            from .resized_pixels import resized_png

            data = resized_png(Path(path), self.resized[path])
        elif path in self.images:
            from .images import loaded_png

            scale = self.images[path]
            size = None if scale is None else (scale.width, scale.height)
            crop = scale is None or scale.crop
            method = "lanczos" if scale is None else scale.method
            data = loaded_png(Path(path), size, crop=crop, method=method)
        else:
            data = Path(path).read_bytes()
        return base64.b64encode(data).decode("ascii")

    def serve_argv(self) -> list[str]:
        """The `paradit serve` flags of the serve settings."""
        argv = ["--model", self.serve["model"]]
        for key, flag in (
            ("text_encoders", "--text-encoder"),
            ("vaes", "--vae"),
            ("image_encoders", "--image-encoder"),
            ("lora_dirs", "--lora-dir"),
        ):
            for value in self.serve.get(key, ()):
                argv += [flag, value]
        if self.serve.get("upscaler"):
            argv += ["--upscaler", self.serve["upscaler"]]
        return argv

    def to_dict(self) -> dict[str, Any]:
        sent = {p: [s.width, s.height] for p, s in self.images.items() if s is not None and s.crop}
        total = {p: [s.width, s.height] for p, s in self.images.items() if s and not s.crop}
        resized = {
            path: [[r.width, r.height, r.method, "center" if r.crop else "disabled"] for r in rs]
            for path, rs in self.resized.items()
            if rs
        }
        return {
            "workflow": self.workflow,
            "request": self.request,
            "serve": self.serve,
            "nodes": [{"id": i, "type": t, "mapped": m} for i, t, m in self.lines],
            **({"kontext_scaled": sent} if sent else {}),
            **({"scaled_to_total_pixels": total} if total else {}),
            **({"resized": resized} if resized else {}),
        }
