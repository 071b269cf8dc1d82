"""Single-file models: check the files a user gave and what they hold.

`SingleFiles` (given.py) is what the user gave (`--model FILE[,FILE]`, `--text-encoder FILE`...,
`--vae FILE`, `--image-encoder FILE`); `resolve` reads their headers, recognises each file and
checks that they fit together (the DiT's text width against the encoder's, the VAE's latent
channels against the DiT's, the image encoder's width against the DiT's image embedding, two
experts of one architecture), refusing with the file's name and what was expected. What a
header cannot say comes from the recognised architecture's preset (file_presets.py); the
pipeline is built from a `Resolved` in build.py.

An all-in-one Flux checkpoint (ComfyUI's `models/checkpoints`: DiT, CLIP-L, T5-XXL and VAE in
one file) needs no --text-encoder or --vae: its parts fill every slot the command leaves
empty, and a file given for a slot wins over the bundled part (to swap an fp8 T5 for an fp16
one, say). Each part is read as a file of its own: the DiT row block by row block, the rest
whole. All-in-one Wan files are refused (rare; ComfyUI ships Wan as separate files).

An LTX-2 checkpoint (Lightricks' `ltx-2-19b-dev.safetensors`) holds every part but the text
encoder: its video VAE is taken as a Flux checkpoint's (`vae.`, unless --vae gives one), its
connectors, audio VAE and vocoder are `Resolved.extras`, built by its spec's `build_extra`;
only the Gemma 3 file is given besides (`FileSpec.parts`: `families/ltx2/files.py`). A
DiT alone (a GGUF, a transformer-only file) takes those parts from more --vae and --text-
encoder files, each part found by its key names with or without the checkpoint's prefix
(`families/ltx2/files.py` find_parts: ComfyUI's split files, or the whole checkpoint beside a
GGUF).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..encoders import encoder_kind
from .components import FILE_TOOLS
from .detect import Detection, Part, bundled_parts, recognise
from .file_presets import ENCODER_SLOTS, PRESETS, Preset
from .given import SingleFiles
from .quant import check_readable
from .spec import file_spec, spec_for_file


@dataclass(frozen=True)
class Resolved:
    """The checked files of one pipeline."""

    preset: Preset
    dits: dict[str, Part]
    """"transformer" (and "transformer_2": Wan 2.2 A14B's low-noise expert)."""
    encoders: dict[str, Part]
    """Pipeline component -> its text encoder file."""
    vae: Part
    variant: str
    image_encoder: Part | None = None
    """Wan 2.1 image-to-video's CLIP vision encoder."""
    extras: dict[str, Part] = dataclasses.field(default_factory=dict)
    """A family's parts besides the DiT and VAE (`FileSpec.extras`; LTX-2's "connectors",
    "text_projection", "audio_vae", "vocoder"), each a view of the file that holds it, keys in
    the part's own names; its spec's `build_extra` builds the connectors, audio VAE and
    vocoder from them."""

    @property
    def pipeline_class(self) -> str:
        return self.preset.pipeline

    def summary(self) -> dict[str, Any]:
        parts = {**self.dits, **self.encoders, "vae": self.vae, **self.extras}
        if self.image_encoder is not None:
            parts["image_encoder"] = self.image_encoder
        return {"variant": self.variant, "files": {k: p.summary() for k, p in parts.items()}}


def resolve(files: SingleFiles) -> Resolved:
    """Read and check every file; ValueError naming the file and what was expected."""
    dits = [recognise(p) for p in files.models]
    for part in dits:
        expect_role(part, "transformer", "--model")
        check_readable(part.header)
    first = dits[0].detection
    spec = file_spec(first.family or "")
    runs_bundle = spec is not None and spec.runs_all_in_one
    if any(d.detection.bundled for d in dits) and not runs_bundle:
        raise ValueError(
            f"{dits[0].header.name} is an {first.label} checkpoint: paradit runs all-in-one "
            "checkpoints of Flux.1 and LTX-2 only (Flux.1's DiT, clip_l, t5xxl and vae in one "
            "file; LTX-2's as Lightricks ships it); give the DiT as its own file "
            "(models/diffusion_models) with --text-encoder and --vae"
        )
    if len(dits) == 2 and any(d.detection.bundled for d in dits):
        raise ValueError(
            f"{dits[0].header.name}, {dits[1].header.name}: two files are a Wan 2.2 A14B "
            "pair, never all-in-one checkpoints"
        )
    if len(dits) == 2 and first.config != dits[1].detection.config:
        raise ValueError(
            f"{dits[0].header.name} and {dits[1].header.name} are not two experts of one "
            f"model: {first.variant} vs {dits[1].detection.variant}"
        )
    preset = PRESETS.get(first.variant)
    if preset is None or (len(dits) == 2 and not preset.pair_preset):
        supported = ", ".join(PRESETS)
        raise ValueError(
            f"{dits[0].header.name} is {first.variant} ({'; '.join(first.reasons)}): "
            f"{'a pair of it' if preset else 'it'} is recognised but cannot be run from single "
            f"files yet (runs: {supported}; two files: the Wan 2.2 A14B T2V and I2V pairs)"
        )
    if len(dits) == 1 and not preset.name:
        raise ValueError(
            f"{dits[0].header.name} is one expert of {first.variant}, which takes its two "
            "experts as two files: give --model HIGH,LOW (the high-noise expert first)"
        )
    if len(dits) == 2:
        names = [d.header.name.lower() for d in dits]
        if "low_noise" in names[0] and "high_noise" in names[1]:
            raise ValueError(
                f"--model takes the high-noise expert first: got {dits[0].header.name} first "
                f"(give {dits[1].header.name},{dits[0].header.name})"
            )
        preset = dataclasses.replace(preset, name=preset.pair_preset)
    variant = first.label
    if len(dits) == 2:
        variant += " pair" if first.variant.endswith("a14b") else " A14B pair"
    family_parts: dict[str, Part] = {}
    if spec is not None and spec.parts is not None:  # from whichever files hold them
        files, family_parts = spec.parts(dits[0], files, FILE_TOOLS)
        bundle = {"vae": family_parts["vae"]} if "vae" in family_parts else {}
    else:
        bundle = bundled_parts(dits[0]) if first.bundled else {}
    if len(files.vaes) > 1:
        raise ValueError(f"--vae takes one file, got {len(files.vaes)}")
    encoders = _encoders(files, preset, first, bundle)
    if preset.check_text_encoder is not None:  # Qwen-Image-Edit's reads the images too
        preset.check_text_encoder(encoders["text_encoder"], first)
    vae = _vae(files, first, preset, bundle)
    image_encoder = _image_encoder(files, first, preset)
    extras: dict[str, Part] = {}
    if family_parts and spec.extras is not None:
        extras = spec.extras(family_parts, encoders["text_encoder"])
    components = dict(zip(("transformer", "transformer_2"), dits, strict=False))
    return Resolved(preset, components, encoders, vae, variant, image_encoder, extras)


def _where(part: Part, flag: str) -> str:
    """How a message names a file: "--vae ae.safetensors", or for a part of an all-in-one
    checkpoint "flux1-dev-fp8.safetensors (its vae.)"."""
    if part.header.prefix:
        return f"{part.header.name} (its {part.header.prefix})"
    return f"{flag} {part.header.name}"


def expect_role(part: Part, role: str, flag: str) -> None:
    """ValueError naming the file unless it holds a `role`; a file of an encoder kind paradit
    recognises only to refuse (`EncoderKind.refused`) is refused with the kind's reason."""
    found = part.detection
    kind = encoder_kind(found.family or "")
    if kind is not None and kind.refused:
        raise ValueError(
            f"{_where(part, flag)} is {kind.title} ({'; '.join(found.reasons)}): {kind.refused}"
        )
    if found.role == role:
        return
    what = found.label or f"{found.family or ''} {found.role}".strip()
    raise ValueError(
        f"{_where(part, flag)}: expected a {role.replace('_', ' ')} checkpoint, but it is "
        f"a {what} ({'; '.join(found.reasons)})"
    )


def _encoders(
    files: SingleFiles, preset: Preset, dit: Detection, bundle: dict[str, Part]
) -> dict[str, Part]:
    need = " and ".join(preset.encoders)
    given = [recognise(path) for path in files.text_encoders]
    for part in given:  # what a file is, before how many there are
        expect_role(part, "text_encoder", "--text-encoder")
    if not bundle and len(files.text_encoders) != len(preset.encoders):
        raise ValueError(
            f"{dit.variant} needs {len(preset.encoders)} text encoder file(s) ({need}): give "
            f"--text-encoder FILE for each (got {len(files.text_encoders)})"
        )
    parts: dict[str, Part] = {}
    # a file given for a slot wins over the bundled part; bundled parts no slot takes (the
    # bundle's VAE, an encoder already given) are not read
    inside = [p for p in bundle.values() if p.detection.role != "vae"]
    for part, bundled in [(p, False) for p in given] + [(p, True) for p in inside]:
        slot = ENCODER_SLOTS.get(part.detection.family or "")
        if bundled and slot in parts:
            continue
        expect_role(part, "text_encoder", "--text-encoder")
        check_readable(part.header)
        kind = part.detection.family or ""
        if kind not in preset.encoders:
            raise ValueError(
                f"{_where(part, '--text-encoder')} is a {kind} encoder; {dit.variant} needs {need}"
            )
        if slot in parts:
            raise ValueError(
                f"--text-encoder {part.header.name} and {parts[slot].header.name} are both "
                f"{kind} encoders; {dit.variant} needs {need}, one file each"
            )
        parts[slot] = part
    missing = [k for k in preset.encoders if ENCODER_SLOTS[k] not in parts]
    if missing:
        raise ValueError(
            f"{dit.label} needs {need} text encoders; {', '.join(missing)} is in none of the "
            f"files: give --text-encoder FILE for it"
        )
    spec = spec_for_file(dit.family or "")
    for slot, expected, what in spec.text_widths(dit.config):
        config = parts[slot].detection.config
        width = config.get("d_model") or config["hidden_size"]
        if width != expected:
            raise ValueError(
                f"{_where(parts[slot], '--text-encoder')} has width {width}; {dit.variant} "
                f"takes {what} of width {expected}"
            )
    return parts


def _vae(files: SingleFiles, dit: Detection, preset: Preset, bundle: dict[str, Part]) -> Part:
    needs = f"{dit.variant} needs {preset.vae or 'a VAE'}"
    if files.vaes:  # a file given wins over the bundled VAE
        part = recognise(files.vaes[0])
    elif "vae" in bundle:
        part = bundle["vae"]
    else:
        raise ValueError(f"{needs}: give --vae FILE")
    expect_role(part, "vae", "--vae")
    check_readable(part.header)
    latent = part.detection.config.get("z_dim") or part.detection.config.get("latent_channels")
    spec = spec_for_file(dit.family or "")
    expected = spec.vae_latent_channels(dit.config)
    family = spec.vae_family or spec.family
    if part.detection.family != family or latent != expected:
        raise ValueError(
            f"{_where(part, '--vae')} is a {part.detection.variant} with {latent} latent "
            f"channels; {needs}: a {family} VAE with {expected}"
        )
    return part


def _image_encoder(files: SingleFiles, dit: Detection, preset: Preset) -> Part | None:
    if not preset.image_encoder:
        if files.image_encoders:
            raise ValueError(
                "--image-encoder goes with Wan 2.1 image-to-video and HunyuanVideo 1.5's; "
                f"{dit.variant} takes none"
            )
        return None
    needs = f"{dit.variant} needs {preset.image_encoder}"
    if not files.image_encoders:
        raise ValueError(f"{needs}: give --image-encoder FILE")
    part = recognise(files.image_encoders[0])
    expect_role(part, "clip_vision", "--image-encoder")
    if not part.detection.config:  # e.g. open_clip's `visual.transformer.resblocks.N`
        raise ValueError(
            f"--image-encoder {part.header.name}: {'; '.join(part.detection.reasons)}; paradit "
            "reads CLIP vision files with Hugging Face's names (vision_model.encoder.layers.N), "
            "as ComfyUI's clip_vision_h has them"
        )
    check_readable(part.header)
    kind = spec_for_file(dit.family or "").image_encoder_kind
    width = part.detection.config["hidden_size"]
    expected = dit.config.get("image_dim") or dit.config["image_embed_dim"]
    if width != expected or part.detection.family != kind:
        raise ValueError(
            f"--image-encoder {part.header.name} is a {part.detection.variant}; {needs}: a "
            f"{_title(kind)} vision tower of width {expected}"
        )
    return part


def _title(kind: str) -> str:
    """An encoder kind as the messages name it ("CLIP", "SigLIP")."""
    found = encoder_kind(kind)
    return kind if found is None else found.title
