"""Real-architecture presets with seeded random weights: `random:<model>`, no download.

Each preset is a JSON file in its family's folder (`families/<family>/configs/`) that holds the
real model's component configs (as its diffusers repo ships them: transformer(s), VAE,
scheduler), the pipeline class and the pipeline's own settings ("pipeline_config", e.g. Wan
2.2's `boundary_ratio`). They make memory and speed figures meaningful where no weights can be
downloaded.

Each family's NOTES.md lists its `random:` presets and the model each is the architecture of.

How they stay usable on a CPU machine:
- The text encoders are *reduced*: a full UMT5-XXL (5.7B parameters) or T5-XXL (4.7B) is no
  use with random weights, so each preset carries an encoder of the real width (its embeddings
  fit the DiT's text projection: 4096 for UMT5/T5, 768 for Flux's pooled CLIP) with 2 layers
  and a byte-level vocabulary (`seeded.byte_tokenizer`): "UMT5 4096" (Wan, 22M parameters),
  "T5 4096" (CogVideoX, Flux, 22M), "CLIP-L 768" (Flux, 14M). Each is named in its entry's
  "reduced_from" in the JSON and in docs/models.md. MiniMax H3's Qwen3-VL 32B is at its real
  shapes (its entry's "architecture_of"): it decides where the encoder can live, so the
  memory plan counts it. Sequence lengths stay real (Wan and Flux's T5
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

To add a model, add its JSON file to its family's `configs/` (`preset_names.RANDOM_PRESETS`
finds it). A component entry is {"config": {...}} with the class in "_class_name" (diffusers
first, then transformers), an optional "seed" (weights drawn as `seeded.SeededRows` draws them)
and free-text "reduced_from", or {"byte_level_max_length": N} for a tokenizer, or an encoder
kind's own tiny tokenizer (`EncoderKind.tiny_tokenizers` in `encoders/`:
{"qwen_chat_byte_level_max_length": N}: the byte-level one for Qwen2.5-VL's chat template;
{"qwen3_chat_byte_level_max_length": N}: the same with Qwen3's chat template;
{"mistral_chat_byte_level_max_length": N}: bytes and Mistral's chat markers with a chat
template for Flux.2's conversations; {"qwen_vl_byte_level_max_length": N} and
{"qwen_vl_processor_max_length": N}: Qwen2.5-VL's tokenizer with its vision markers and its
processor, `qwen_vl.py`). An image processor is a component entry without weights whose
"_class_name" ends in "ImageProcessor" (transformers' PIL backend of it where there is one).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from .encoders import KINDS
from .preset_names import RANDOM_PRESET_NAMES, RANDOM_PRESETS
from .seeded import SeededRows, byte_tokenizer, seed_rows

if TYPE_CHECKING:
    from diffusers import DiffusionPipeline

DIT_COMPONENTS = ("transformer", "transformer_2")


def random_preset_spec(name: str) -> dict[str, Any]:
    """The preset's JSON: {"pipeline", "architecture_of", ["pipeline_config",] "components"}."""
    if name not in RANDOM_PRESETS:
        raise ValueError(
            f"unknown random preset {name!r}: choose one of {', '.join(RANDOM_PRESET_NAMES)}"
        )
    return json.loads(RANDOM_PRESETS[name].read_text())


def shipped_scheduler(name: str) -> Any:
    """The scheduler random preset `name` ships, with the settings its model's folder has (a
    tiny preset of that model takes it as it is)."""
    import diffusers

    config = dict(random_preset_spec(name)["components"]["scheduler"]["config"])
    return getattr(diffusers, config.pop("_class_name")).from_config(config)


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
    spec = random_preset_spec(name)
    entries: dict[str, dict[str, Any]] = spec["components"]
    wanted = wanted_components(name, entries.keys(), components)
    overrides = overrides or {}
    parts = {
        component: (
            _build(
                component,
                entry,
                overrides.get(component, {}),
                dtype,
                torch.device(device),
                spec["pipeline"],
            )
            if component in wanted
            else None
        )
        for component, entry in entries.items()
    }
    return assemble_pipeline(spec["pipeline"], parts, spec.get("pipeline_config", {}))


def assemble_pipeline(class_name: str, parts: dict[str, Any], config: dict[str, Any]) -> Any:
    """diffusers' pipeline `class_name` on `parts` (None for a component left out) with its
    settings `config`. A modular pipeline (`diffusers.ModularPipeline`: its blocks declare
    the components) is built empty and given the parts; a regular one takes them as
    arguments."""
    import diffusers

    pipeline_class = getattr(diffusers, class_name)
    if not issubclass(pipeline_class, diffusers.ModularPipeline):
        return pipeline_class(**parts, **config)
    if config:
        raise ValueError(f"{class_name} takes its settings from its blocks, got {sorted(config)}")
    pipe = pipeline_class()
    pipe.update_components(**{name: part for name, part in parts.items() if part is not None})
    return pipe


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
    pipeline: str,
) -> Any:
    if "byte_level_max_length" in entry:
        return byte_tokenizer(int(entry["byte_level_max_length"]))
    for kind in KINDS:  # an encoder kind's tiny tokenizer (`EncoderKind.tiny_tokenizers`)
        for key, build in kind.tiny_tokenizers.items():
            if key in entry:
                return build(int(entry[key]))
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
        module = _construct(class_name, config, pipeline)
    if device.type != "meta" and "seed" in entry:
        seed_rows(module, int(entry["seed"]))
    return module.eval()


def _construct(class_name: str, config: dict[str, Any], pipeline: str) -> torch.nn.Module:
    import diffusers

    model_class = getattr(diffusers, class_name, None) or _pipeline_package_class(
        pipeline, class_name
    )
    if model_class is not None:
        return model_class.from_config(config)
    import transformers

    model_class = getattr(transformers, class_name, None)
    if model_class is None:
        raise ValueError(f"no diffusers or transformers class named {class_name!r}")
    config_class = model_class.config_class
    return model_class(config_class(**config))


def _pipeline_package_class(pipeline: str, class_name: str) -> Any:
    """A component class that lives with its pipeline (LTX-2's connectors and vocoder): in
    the pipeline's package or one of its modules; None when there is none."""
    import importlib
    import pkgutil

    import diffusers

    package_name = getattr(diffusers, pipeline).__module__.rsplit(".", 1)[0]
    package = importlib.import_module(package_name)
    modules = [package]
    for info in pkgutil.iter_modules(package.__path__):
        try:  # a module may need an optional library (LTX-2's video export: PyAV)
            modules.append(importlib.import_module(f"{package_name}.{info.name}"))
        except ImportError:
            continue
    for module in modules:
        found = getattr(module, class_name, None)
        if found is not None and found.__module__.startswith(package_name):  # defined there
            return found
    return None


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)
