"""Real-architecture presets with seeded random weights: `random:<model>`, no download.

Each preset is a JSON file in `configs/` that holds the real model's component configs (as
its diffusers repo ships them: transformer(s), VAE, scheduler), the pipeline class and the
pipeline's own settings ("pipeline_config", e.g. Wan 2.2's `boundary_ratio`). They make memory
and speed figures meaningful where no weights can be downloaded.

    random:cogvideox-2b        THUDM/CogVideoX-2b architecture (1.7B DiT, sincos positions)
    random:cogvideox-5b        THUDM/CogVideoX-5b (5.6B DiT, rotary positions)
    random:cogvideox-5b-i2v    THUDM/CogVideoX-5b-I2V (learned positions: 720x480 only)
    random:cogvideox1.5-5b     THUDM/CogVideoX1.5-5B (temporal patches of 2 latent frames)
    random:wan2.1-t2v-1.3b     Wan-AI/Wan2.1-T2V-1.3B-Diffusers (1.42B DiT)
    random:wan2.1-t2v-14b      Wan-AI/Wan2.1-T2V-14B-Diffusers (14.3B DiT)
    random:wan2.2-t2v-a14b     Wan-AI/Wan2.2-T2V-A14B-Diffusers (two 14.3B experts: the
                               high-noise `transformer` above timestep 875, `transformer_2` below)
    random:wan2.2-ti2v-5b      Wan-AI/Wan2.2-TI2V-5B-Diffusers (5.0B DiT, the Wan 2.2 VAE: 48
                               latent channels, 16x spatial; `expand_timesteps`: text- and
                               image-to-video in one model)
    random:wan2.2-i2v-a14b     Wan-AI/Wan2.2-I2V-A14B-Diffusers (two 14.3B experts with 36 input
                               channels, switched at boundary_ratio 0.9; no CLIP encoder)
    random:flux.1-dev          black-forest-labs/FLUX.1-dev (11.9B DiT, guidance embedded)
    random:qwen-image          Qwen/Qwen-Image (20.4B DiT, true CFG; the Wan-style Qwen-Image
                               VAE; a reduced Qwen2.5-VL text encoder of the real width 3584)
    random:qwen-image-edit     Qwen/Qwen-Image-Edit-2509 (Edit-Plus: the same DiT, 1 to 3 input
                               images; the reduced Qwen2.5-VL reads them through its vision
                               tower and a `Qwen2VLProcessor` built offline, `qwen_vl.py`)
    random:hunyuanvideo1.5-t2v hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-480p_t2v (8.3B
                               DiT, patch 1 over the 16x VAE; reduced Qwen2.5-VL 3584 and ByT5
                               1472 text encoders; guidance 6 in its guider)
    random:hunyuanvideo1.5-i2v hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-480p_i2v (the
                               same 8.3B DiT as image-to-video; a reduced SigLIP vision encoder
                               of the real width 1152 and 729 tokens at 384x384)
    random:flux.2-dev          black-forest-labs/FLUX.2-dev (32.2B DiT, guidance embedded; the
                               Flux.2 VAE, 32 latent channels; a reduced Mistral 3 text encoder
                               of the real width 5120, 31 layers)
    random:z-image-turbo       Tongyi-MAI/Z-Image-Turbo (6.15B single-stream DiT, distilled: no
                               CFG; Flux's VAE; a reduced Qwen3 text encoder of the real width
                               2560)
    random:ltx-2               Lightricks/LTX-2 (the 19B audio-video model: a DiT of a video
                               and an audio stream; the video VAE, 32x spatial / 8x temporal;
                               the audio VAE and the 24 kHz stereo vocoder; the text connectors;
                               a reduced Gemma 3 text model of the real width 3840 and its 48
                               layers)
    random:ltx-2-i2v           Lightricks/LTX-2 as image-to-video (LTX2ImageToVideoPipeline:
                               random:ltx-2's components, the same checkpoint)
    random:ltx-2-distilled     Lightricks/LTX-2's distilled checkpoint (ltx-2-19b-distilled:
                               random:ltx-2's shapes; its scheduler takes the sigmas as given,
                               so it runs its own 8-step schedule without CFG, families/ltx2.py)
    random:flux.2-klein-4b     black-forest-labs/FLUX.2-klein-4B (3.9B DiT, step-distilled: 4
                               steps, no CFG, no guidance embedding; the Flux.2 VAE; a reduced
                               Qwen3 causal-LM text encoder of the real width 2560, 28 layers)
    random:flux.2-klein-base-4b  black-forest-labs/FLUX.2-klein-base-4B (the same, undistilled:
                               50 steps, true CFG)
    random:flux.2-klein-9b     black-forest-labs/FLUX.2-klein-9B (9.1B DiT, distilled; a reduced
                               Qwen3 of Qwen3-8B's width 4096)

How they stay usable on a CPU machine:
- The text encoders are *reduced*: a full UMT5-XXL (5.7B parameters) or T5-XXL (4.7B) is no
  use with random weights, so each preset carries an encoder of the real width (its embeddings
  fit the DiT's text projection: 4096 for UMT5/T5, 768 for Flux's pooled CLIP) with 2 layers
  and a byte-level vocabulary (`seeded.byte_tokenizer`): "UMT5 4096" (Wan, 22M parameters),
  "T5 4096" (CogVideoX, Flux, 22M), "CLIP-L 768" (Flux, 14M). Each is named in its entry's
  "reduced_from" in the JSON and in docs/models.md. Sequence lengths stay real (Wan and Flux's T5
  512 tokens, CLIP 77, CogVideoX 226), so the DiT sees real token counts.
- Models are constructed directly in the target dtype on the target device, and only then are
  the weights set from the seed, so a 14B model never exists in float32 first. On `meta` a
  preset builds without memory: `paradit plan` and the tests count parameters that way.
- `overrides` cut a build down for CPU runs while keeping the rest of the shipped configs, e.g.
  {"transformer": {"num_layers": 1}} (the tests' cheap generations do that).
- One host copy: the weights are drawn row block by row block (`seeded.SeededRows`), so a
  sharded backend builds each DiT empty and every rank draws only its own shard's rows, as it
  reads them from a file for folders and single files. A DiT built whole is made the same way
  (empty, then every row drawn; float32 where diffusers keeps a module in float32, as
  `from_pretrained` does), so every world size runs the same weights.
The VAEs and DiTs are full size otherwise: Wan's VAE is 127M parameters, Flux's 84M.

To add a model, add its JSON file and a row to `preset_names.RANDOM_PRESETS`. A component entry is
{"config": {...}} with the class in "_class_name" (diffusers first, then transformers), an
optional "seed" (weights drawn as `seeded.SeededRows` draws them) and free-text "reduced_from", or
{"byte_level_max_length": N} for a tokenizer ({"qwen_chat_byte_level_max_length": N}: the
byte-level one for Qwen2.5-VL's chat template, `seeded.qwen_chat_tokenizer`;
{"qwen3_chat_byte_level_max_length": N}: the same with Qwen3's chat template,
`seeded.qwen3_chat_tokenizer`; {"mistral_chat_byte_level_max_length": N}: bytes and Mistral's chat
markers with a chat template for Flux.2's conversations, `seeded.mistral_chat_tokenizer`;
{"qwen_vl_byte_level_max_length": N} and {"qwen_vl_processor_max_length": N}: Qwen2.5-VL's
tokenizer with its vision markers and its processor, `qwen_vl.py`). An image processor is a
component entry without weights whose "_class_name" ends in "ImageProcessor" (transformers' PIL
backend of it where there is one).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .preset_names import RANDOM_PRESET_NAMES, RANDOM_PRESETS
from .seeded import (
    SeededRows,
    byte_tokenizer,
    mistral_chat_tokenizer,
    qwen3_chat_tokenizer,
    qwen_chat_tokenizer,
    seed_rows,
)

if TYPE_CHECKING:
    from diffusers import DiffusionPipeline

CONFIG_DIR = Path(__file__).resolve().parent / "configs"


DIT_COMPONENTS = ("transformer", "transformer_2")


def random_preset_spec(name: str) -> dict[str, Any]:
    """The preset's JSON: {"pipeline", "architecture_of", ["pipeline_config",] "components"}."""
    if name not in RANDOM_PRESETS:
        raise ValueError(
            f"unknown random preset {name!r}: choose one of {', '.join(RANDOM_PRESET_NAMES)}"
        )
    return json.loads((CONFIG_DIR / RANDOM_PRESETS[name]).read_text())


def random_preset_components(name: str) -> frozenset[str]:
    return frozenset(random_preset_spec(name)["components"])


def random_preset_pipeline_class(name: str) -> str:
    return random_preset_spec(name)["pipeline"]


def wanted_components(
    name: str, available: Any, components: frozenset[str] | None
) -> frozenset[str]:
    """The components to build (all when None); ValueError naming any the preset lacks."""
    wanted = frozenset(available) if components is None else frozenset(components)
    unknown = wanted - frozenset(available)
    if unknown:
        raise ValueError(
            f"preset {name!r} has no component(s) {sorted(unknown)}; "
            f"its components are {sorted(available)}"
        )
    return wanted


def build_random_preset(
    name: str,
    *,
    components: frozenset[str] | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    overrides: dict[str, dict[str, Any]] | None = None,
) -> DiffusionPipeline:
    """Build preset `name` with only the named `components` (default: all; the rest None).

    `overrides` replace config entries per component, e.g. {"transformer": {"num_layers": 1}}
    for a cheap build of the same architecture in tests.
    """
    import diffusers

    spec = random_preset_spec(name)
    entries: dict[str, dict[str, Any]] = spec["components"]
    wanted = wanted_components(name, entries.keys(), components)
    overrides = overrides or {}
    parts = {
        component: (
            _build(component, entry, overrides.get(component, {}), dtype, torch.device(device))
            if component in wanted
            else None
        )
        for component, entry in entries.items()
    }
    return getattr(diffusers, spec["pipeline"])(**parts, **spec.get("pipeline_config", {}))


def random_dit_config(name: str, component: str) -> dict[str, Any]:
    """A DiT's config (with `_class_name`) as the preset ships it."""
    entries = random_preset_spec(name)["components"]
    if component not in DIT_COMPONENTS or component not in entries:
        raise ValueError(f"preset {name!r} has no DiT {component!r}")
    return dict(entries[component]["config"])


def random_dit_components(name: str) -> frozenset[str]:
    """The DiTs of a preset (built empty and drawn shard by shard when sharded)."""
    return frozenset(c for c in DIT_COMPONENTS if c in random_preset_spec(name)["components"])


def random_dit_weights(name: str, component: str, model: torch.nn.Module) -> SeededRows:
    """Where a (sharded) DiT of preset `name` draws its rows: `fill_shards` reads them."""
    seed = int(random_preset_spec(name)["components"][component]["seed"])
    return SeededRows.of(model, seed)


def _build(
    component: str,
    entry: dict[str, Any],
    override: dict[str, Any],
    dtype: torch.dtype,
    device: torch.device,
) -> Any:
    if "byte_level_max_length" in entry:
        return byte_tokenizer(int(entry["byte_level_max_length"]))
    if "qwen_chat_byte_level_max_length" in entry:
        return qwen_chat_tokenizer(int(entry["qwen_chat_byte_level_max_length"]))
    if "mistral_chat_byte_level_max_length" in entry:
        return mistral_chat_tokenizer(int(entry["mistral_chat_byte_level_max_length"]))
    if "qwen_vl_byte_level_max_length" in entry or "qwen_vl_processor_max_length" in entry:
        from .qwen_vl import qwen_vl_processor, qwen_vl_tokenizer

        if "qwen_vl_processor_max_length" in entry:
            return qwen_vl_processor(int(entry["qwen_vl_processor_max_length"]))
        return qwen_vl_tokenizer(int(entry["qwen_vl_byte_level_max_length"]))
    if "qwen3_chat_byte_level_max_length" in entry:
        return qwen3_chat_tokenizer(int(entry["qwen3_chat_byte_level_max_length"]))
    config = {**entry["config"], **override}
    class_name = config.pop("_class_name")
    config = {key: value for key, value in config.items() if not key.startswith("_")}
    if class_name.endswith(("Scheduler", "Guidance")):  # settings, no weights
        import diffusers

        return getattr(diffusers, class_name).from_config(config)
    if class_name.endswith("ImageProcessor"):  # settings, no weights
        import transformers

        # The PIL backend where transformers has a choice: torchvision must not change pixels.
        processor = getattr(transformers, f"{class_name}Pil", None)
        return (processor or getattr(transformers, class_name))(**config)
    if component in DIT_COMPONENTS and device.type != "meta" and "seed" in entry:
        from .sharded_load import empty_from_config, fill_shards

        module = empty_from_config({**config, "_class_name": class_name}, dtype)
        fill_shards(module, SeededRows.of(module, int(entry["seed"])), device)
        return module
    with torch.random.fork_rng(devices=[]), device, _default_dtype(dtype):
        torch.manual_seed(0)  # the library's own init; every weight is replaced below
        module = _construct(class_name, config)
    if device.type != "meta" and "seed" in entry:
        seed_rows(module, int(entry["seed"]))
    return module.eval()


def _construct(class_name: str, config: dict[str, Any]) -> torch.nn.Module:
    import diffusers

    model_class = getattr(diffusers, class_name, None)
    if model_class is None:  # components that live with their pipeline (LTX-2's connectors)
        from diffusers.pipelines import ltx2

        model_class = getattr(ltx2, class_name, None) or getattr(ltx2.vocoder, class_name, None)
    if model_class is not None:
        return model_class.from_config(config)
    import transformers

    model_class = getattr(transformers, class_name, None)
    if model_class is None:
        raise ValueError(f"no diffusers or transformers class named {class_name!r}")
    config_class = model_class.config_class
    return model_class(config_class(**config))


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)
