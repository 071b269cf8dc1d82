"""LTX-2's checkpoint (Lightricks' names, as ComfyUI users hold `ltx-2-19b-dev.safetensors`)
to diffusers' components, and the parts of a job found in whichever files hold them.
`detect.py` says what the file holds and where.

- The DiT: diffusers' own converter (`convert_ltx2_transformer_to_diffusers`: renames only;
  LTX-2.3's prompt AdaLN, `prompt_adaln_single`, renamed after it), run on row traces like
  Wan's (convert.trace_converter), so each rank reads just its rows.
  The connectors under the DiT's prefix are another component's: left out of its keys.
- The video VAE and the audio VAE: diffusers' converters (`convert_ltx2_vae_to_diffusers`,
  `convert_ltx2_audio_vae_to_diffusers`: the encoder's and decoder's numbered blocks to
  diffusers' blocks, the latent statistics to `latents_mean`/`latents_std`); the statistics
  diffusers has no buffer for (`channel`, `mean-of-stds`...) are not read.
- The vocoder and the text connectors, which diffusers 0.42 has no single-file converter for,
  mapped here from the module names of the two sides (ComfyUI's `Vocoder` and
  `Embeddings1DConnector`, diffusers' `LTX2Vocoder` and `LTX2TextConnectors`): HiFi-GAN's
  `conv_pre`/`ups`/`resblocks`/`conv_post` are `conv_in`/`upsamplers`/`resnets`/`conv_out`;
  a connector's `transformer_1d_blocks.N.attn1.q_norm` is `transformer_blocks.N.attn1.norm_q`,
  its `learnable_registers` keep their name, and the text projection
  (`text_embedding_projection.aggregate_embed`) is the connectors' `text_proj_in`.
- LTX-2.3's parts in the same layout: its text projection is one per stream
  (`video_aggregate_embed`, `audio_aggregate_embed`: `video_text_proj_in`, ...), its vocoder
  with bandwidth extension holds two HiFi-GAN-style generators under `vocoder.` and
  `bwe_generator.` (BigVGAN's anti-aliased activations: `act_post` is `act_out`,
  `downsample.lowpass.filter` is `downsample.filter`) and the mel bases (`mel_stft.`), and
  its video VAE decodes in four levels (`up_blocks.7`, `8`: the fourth level's upsampler and
  resnets, which diffusers' converter leaves).

The settings no header holds (the VAEs' and vocoder's strides, the connectors' heads and
registers) come from the preset of the recognised model, as for the other families' VAEs
(`build_extra`); a file whose shapes differ from them is refused with the first
keys that do not fit.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ...casting import cast_model
from ...single_file.header import FileHeader
from ...single_file.vocabulary import FileTools, Part
from .detect import BUNDLE_PREFIXES, CONNECTORS, TEXT_PROJECTION

EXTRA_COMPONENTS = ("connectors", "audio_vae", "vocoder")
"""The checkpoint's components built here (the DiT is read row by row, the video VAE as the
other families' VAEs are)."""
_UNREAD_STATISTICS = re.compile(r"^per_channel_statistics\.(?!mean-of-means$|std-of-means$)")
"""Latent statistics diffusers keeps no buffer for (`channel`, `mean-of-stds`...)."""
_GENERATOR = r"^((?:vocoder|bwe_generator)\.)?"
"""LTX-2.3's vocoder holds two generators (`vocoder.`, `bwe_generator.`), LTX-2.0's is one."""
_VOCODER_RENAMES = (
    (re.compile(_GENERATOR + r"conv_pre\."), r"\1conv_in."),
    (re.compile(_GENERATOR + r"conv_post\."), r"\1conv_out."),
    (re.compile(_GENERATOR + r"ups\."), r"\1upsamplers."),
    (re.compile(_GENERATOR + r"resblocks\."), r"\1resnets."),
    (re.compile(_GENERATOR + r"act_post\."), r"\1act_out."),
    (re.compile(r"\.downsample\.lowpass\.filter$"), ".downsample.filter"),
)
_CONNECTOR_RENAMES = (
    (re.compile(r"^(video|audio)_embeddings_connector\."), r"\1_connector."),
    (re.compile(r"\.transformer_1d_blocks\."), ".transformer_blocks."),
    (re.compile(r"\.q_norm\."), ".norm_q."),
    (re.compile(r"\.k_norm\."), ".norm_k."),
)
_BWE_VOCODER = ("vocoder.", "mel_stft.", "bwe_generator.")
"""Keys of LTX-2.3's vocoder with bandwidth extension (`LTX2VocoderWithBWE`): not LTX-2.0's."""
_PROJECTIONS = (
    (re.compile(r"^aggregate_embed\."), "text_proj_in."),
    (re.compile(r"^(video|audio)_aggregate_embed\."), r"\1_text_proj_in."),
)
"""The text projection (LTX-2.0's one; LTX-2.3's one per stream) -> the connectors' names."""
_VAE_LEVEL_4 = ((re.compile(r"^decoder\.up_blocks\.7\."), "decoder.up_blocks.3.upsamplers.0."),
                (re.compile(r"^decoder\.up_blocks\.8\."), "decoder.up_blocks.3."))  # fmt: skip
"""LTX-2.3's video VAE decodes in four levels: Lightricks' `up_blocks.7` (the fourth level's
upsampler) and `8` (its resnets), which diffusers' converter (three levels) leaves as named."""


def dit_keys(keys: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The DiT's own keys of those under its prefix (not the connectors')."""
    return {k: v for k, v in keys.items() if not k.startswith(CONNECTORS)}


_PROMPT_ADALN = (
    (re.compile(r"^prompt_adaln_single\."), "prompt_adaln."),
    (re.compile(r"^audio_prompt_adaln_single\."), "audio_prompt_adaln."),
)
"""LTX-2.3's prompt AdaLN, which diffusers' converter (LTX-2.0's names) leaves as named."""


def dit_converter() -> Callable[[dict], dict]:
    """diffusers' LTX-2 DiT converter, then LTX-2.3's names it does not know."""
    from diffusers.loaders.single_file_utils import convert_ltx2_transformer_to_diffusers

    def convert(checkpoint: dict) -> dict:
        converted = convert_ltx2_transformer_to_diffusers(checkpoint)
        return {_renamed(k, _PROMPT_ADALN): v for k, v in converted.items()}

    return convert


def vae_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The video VAE's tensors (the checkpoint's `vae.` stripped) in diffusers' names."""
    from diffusers.loaders.single_file_utils import convert_ltx2_vae_to_diffusers

    kept = {k: v for k, v in state.items() if not _UNREAD_STATISTICS.match(k)}
    converted = convert_ltx2_vae_to_diffusers(kept)
    return {_renamed(k, _VAE_LEVEL_4): v for k, v in converted.items()}


def _renamed(key: str, rules: tuple) -> str:
    for pattern, replacement in rules:
        key = pattern.sub(replacement, key, count=1)
    return key


def audio_vae_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    from diffusers.loaders.single_file_utils import convert_ltx2_audio_vae_to_diffusers

    kept = {k: v for k, v in state.items() if not _UNREAD_STATISTICS.match(k)}
    return convert_ltx2_audio_vae_to_diffusers(kept)


def vocoder_name(key: str) -> str:
    """A vocoder key (`vocoder.` stripped) -> diffusers' `LTX2Vocoder` name (LTX-2.3's:
    `LTX2VocoderWithBWE`'s, its generators' names the same under their prefixes)."""
    return _renamed(key, _VOCODER_RENAMES)


def connector_name(key: str) -> str:
    """A connector key (the DiT's prefix stripped) -> diffusers' `LTX2TextConnectors` name."""
    for pattern, replacement in _CONNECTOR_RENAMES:
        key = pattern.sub(replacement, key)
    return key


def component_state(
    name: str, read: Callable[[str], dict[str, torch.Tensor]], file: str
) -> dict[str, torch.Tensor]:
    """Component `name` ("connectors", "audio_vae" or "vocoder") in diffusers' names;
    `read(part)` gives a part's tensors (one of PARTS) in its own names, without the
    checkpoint's prefix (find_parts); `file` names the vocoder's file in a refusal."""
    if name == "connectors":
        state = {connector_name(k): v for k, v in read("connectors").items()}
        projection = read("text_projection")
        state |= {_renamed(k, _PROJECTIONS): v for k, v in projection.items()}
        return state
    state = read(name)
    if name == "audio_vae":
        return audio_vae_names(state)
    if name == "vocoder":
        return {vocoder_name(k): v for k, v in state.items()}
    raise ValueError(f"no LTX-2 component {name!r}; known: {EXTRA_COMPONENTS}")


def text_projection_inputs(projection: FileHeader) -> int | None:
    """The width the text projection reads (Gemma's width x its hidden states), if present;
    `projection` holds the part in its own names (`aggregate_embed.weight`, LTX-2.3's
    `video_aggregate_embed.weight` and the audio one beside it)."""
    shape = projection.shape("aggregate_embed.weight") or projection.shape(
        "video_aggregate_embed.weight"
    )
    return shape[1] if shape else None


# -- the parts, from whichever file holds them ------------------------------------------------


@dataclass(frozen=True)
class PartRule:
    """How one LTX-2 part is found in a file by its key names: its keys' first names (fixed
    by the model code), the checkpoint's prefix for it, and a key only it has."""

    prefix: str
    roots: tuple[str, ...]
    tell: Callable[[Mapping[str, tuple[int, ...]]], bool]
    what: str
    """The part as a user knows it, and which files hold it (the refusal's words)."""


_STATISTICS = "per_channel_statistics.mean-of-means"
_VAE_ROOTS = ("encoder.", "decoder.", "per_channel_statistics.")
PARTS = {
    "connectors": PartRule(
        "model.diffusion_model.",
        CONNECTORS,
        lambda keys: all(any(k.startswith(c) for k in keys) for c in CONNECTORS),
        "the text connectors (video_embeddings_connector., audio_embeddings_connector.: "
        "--text-encoder with the embeddings connector file, e.g. "
        "ltx-2-19b-embeddings_connector_dev_bf16.safetensors, or the whole checkpoint)",
    ),
    "text_projection": PartRule(
        TEXT_PROJECTION,
        ("aggregate_embed.", "video_aggregate_embed.", "audio_aggregate_embed."),
        lambda keys: "aggregate_embed.weight" in keys or "video_aggregate_embed.weight" in keys,
        "the text projection (text_embedding_projection.aggregate_embed: --text-encoder "
        "with the embeddings connector file, or the whole checkpoint)",
    ),
    "vae": PartRule(
        BUNDLE_PREFIXES["vae"],
        _VAE_ROOTS,
        lambda keys: _STATISTICS in keys and any(".res_blocks." in k for k in keys),
        "the video VAE (vae.: --vae with the video VAE file, e.g. "
        "LTX2_video_vae_bf16.safetensors, or the whole checkpoint)",
    ),
    "audio_vae": PartRule(
        BUNDLE_PREFIXES["audio_vae"],
        _VAE_ROOTS,
        lambda keys: (
            _STATISTICS in keys
            and any(k.startswith(("encoder.down.", "decoder.up.")) for k in keys)
        ),
        "the audio VAE (audio_vae.: --vae with the audio VAE file, e.g. "
        "LTX2_audio_vae_bf16.safetensors, or the whole checkpoint)",
    ),
    "vocoder": PartRule(
        BUNDLE_PREFIXES["vocoder"],
        ("conv_pre.", "ups.", "resblocks.", "conv_post.", *_BWE_VOCODER),
        lambda keys: "conv_pre.weight" in keys or "vocoder.conv_pre.weight" in keys,
        "the vocoder (vocoder.: --vae with the audio VAE file that holds it beside the audio "
        "VAE, or the whole checkpoint)",
    ),
}
"""LTX-2's parts besides the DiT, each found by its own key names with or without the
checkpoint's prefix for it (ComfyUI's split files; the all-in-one checkpoint holds them all)."""


def find_parts(header: FileHeader) -> dict[str, FileHeader]:
    """The LTX-2 parts (PARTS) a file holds, each as a header of its keys in its own names
    (the same file and offsets): under the checkpoint's prefix for it, else without one."""
    found = {}
    for name, rule in PARTS.items():
        for prefix in (rule.prefix, ""):
            view = header.view(prefix) if prefix else header
            tensors = {k: v for k, v in view.tensors.items() if k.startswith(rule.roots)}
            if tensors and rule.tell({k: v.shape for k, v in tensors.items()}):
                found[name] = dataclasses.replace(view, tensors=tensors)
                break
    return found


def describe_missing(missing: list[str]) -> str:
    """The parts an LTX-2 job lacks, and which files would hold them."""
    return "; ".join(PARTS[name].what for name in missing)


def describe_parts(header: FileHeader) -> tuple[str, str] | None:
    """(variant, why) for a file that holds LTX-2 parts by their key names (ComfyUI's split
    files), else None."""
    parts = find_parts(header)
    if not parts:
        return None
    return "ltx-2 " + ", ".join(parts), (
        "LTX-2 parts by their key names (given with --vae or --text-encoder beside an LTX-2 DiT)"
    )


def file_parts(dit: Part, files: Any, tools: FileTools) -> tuple[Any, dict[str, Part]]:
    """LTX-2's parts besides the DiT (PARTS), found by their key names in the --vae and
    --text-encoder files that hold any (ComfyUI's split files, or the whole checkpoint beside
    a GGUF DiT), then in the DiT's own file; a file given wins over the DiT's file. Returns
    the files left for the text encoder and video VAE checks (the Gemma file; a --vae file
    holding no LTX-2 part, refused there by what it is) and the parts; ValueError naming the
    parts no file holds and which files would."""
    encoders, vaes, found = [], [], {}
    for flag, paths in (("--text-encoder", files.text_encoders), ("--vae", files.vaes)):
        for path in paths:
            part = tools.recognise(path)
            held = find_parts(part.header)
            if part.detection.role == "text_encoder":  # perhaps with the text projection
                held = {k: v for k, v in held.items() if k == "text_projection"}
            if not held or part.detection.role == "text_encoder":
                (encoders if flag == "--text-encoder" else vaes).append(path)
            for name, header in held.items():
                if name in found:
                    raise ValueError(
                        f"{flag} {part.header.name} and {found[name].header.name} both hold "
                        f"LTX-2's {name}: give one file for each part"
                    )
                found[name] = Part(header, tools.detect(header))
    for name, header in find_parts(dit.header).items():
        found.setdefault(name, Part(header, tools.detect(header)))
    if vaes:
        found.pop("vae", None)  # --vae FILE holding no LTX-2 part: refused by _vae as it is
    missing = [name for name in PARTS if name not in found and not (name == "vae" and vaes)]
    if missing:
        raise ValueError(
            f"{dit.header.name} holds LTX-2's DiT; no file given holds {', '.join(missing)}: "
            f"give {describe_missing(missing)}"
        )
    return dataclasses.replace(files, text_encoders=tuple(encoders), vaes=tuple(vaes)), found


def file_extras(parts: dict[str, Part], encoder: Part) -> dict[str, Part]:
    """LTX-2's parts for its connectors, audio VAE and vocoder (PARTS but the video
    VAE), after checking that the text projection reads the Gemma file's hidden states."""
    config = encoder.detection.config
    stacked = config["hidden_size"] * (config["num_hidden_layers"] + 1)
    projection = parts["text_projection"].header
    reads = text_projection_inputs(projection)
    if reads != stacked:
        raise ValueError(
            f"--text-encoder {encoder.header.name} gives {config['num_hidden_layers'] + 1} "
            f"hidden states of width {config['hidden_size']} ({stacked} values a token); the "
            f"text projection of {projection.name} reads {reads}"
        )
    return {name: part for name, part in parts.items() if name != "vae"}


_LTX2_PARTS_OF = {"connectors": ("connectors", "text_projection")}
"""The parts (PARTS) a component is read from, where they are not just the one."""


def build_extra(
    name: str,
    parts: Mapping[str, Part],
    preset_name: str,
    dtype: torch.dtype,
    tools: FileTools,
) -> torch.nn.Module:
    """LTX-2's component `name` ("connectors", "audio_vae", "vocoder") from its parts (each a
    view of the file that holds it: file_parts), as the diffusers model of the preset's
    config (component_state names it)."""
    from accelerate import init_empty_weights

    def read(part: str) -> dict[str, torch.Tensor]:
        return tools.read_whole(parts[part], torch.float32)

    header_name = ", ".join(
        sorted({parts[p].header.name for p in _LTX2_PARTS_OF.get(name, (name,))})
    )
    reference = getattr(tools.preset_parts(preset_name, {name}), name)
    with init_empty_weights(include_buffers=False):
        model = type(reference).from_config(dict(reference.config))
    state = component_state(name, read, header_name)
    expected = model.state_dict()
    problems = sorted(set(expected) ^ set(state))
    problems += [k for k in expected if k in state and state[k].shape != expected[k].shape]
    if problems:
        raise ValueError(
            f"{header_name}: its {name} does not fit LTX-2's ({preset_name}) "
            f"(mismatched keys {problems[:3]})"
        )
    model.load_state_dict(state, assign=True, strict=True)
    return cast_model(model, dtype).eval()
