"""LTX-2 from the single files ComfyUI users hold: the checkpoint as Lightricks ships it
(`ltx-2-19b-dev.safetensors`: the DiT and the text connectors under `model.diffusion_model.`,
the text projection, the video VAE under `vae.`, the audio VAE under `audio_vae.`, the vocoder
under `vocoder.`, in Lightricks' names) and the Gemma 3 text encoder file
(`gemma_3_12B_it.safetensors`: Hugging Face's names under `model.`, its SentencePiece model as
a `spiece_model` tensor). The files are written by comfy_files.ltx2_checkpoint, an inverse
naming written apart from the loader's (which uses diffusers' converters for the DiT and the
VAEs, its own names for the vocoder and the connectors).

- From headers alone (the real architectures on the meta device, header-only files): the 19B
  DiT's config read off the shapes is `random:ltx-2`'s, every DiT parameter is read and the
  connectors are left to their component; Gemma 3 12B is recognised with its published config;
  the two files resolve to `random:ltx-2`'s pipeline with the checkpoint's VAE, connectors,
  audio VAE and vocoder. Lightricks' fp8 checkpoint (`-fp8`: fp8 blocks with `weight_scale`
  and `input_scale` beside them) is recognised as fp8_scaled with the same config; a DiT
  without the rest is refused by name (LTX-2.3's files: test_single_file_ltx23.py).
- The tiny preset's weights in those layouts load to exactly the preset's components and make
  its video and its audio byte for byte; `paradit models DIR` lists both files; an fp8 DiT in
  Lightricks' names reads to the values the file holds.
- A file named distilled (`ltx-2-19b-distilled`: the dev model's shapes) is `ltx-2-distilled`
  on `random:ltx-2-distilled` (random:ltx-2's components, its scheduler without dynamic
  shifting); the tiny one's job, with no steps or guidance given, runs the 8 distilled sigmas
  and equals `LTX2Pipeline` called with `sigmas=DISTILLED_SIGMA_VALUES` byte for byte; other
  step counts are refused; the dev file keeps the dev schedule and defaults.
- A Gemma file's SentencePiece model makes a Gemma tokenizer that cuts text as SentencePiece
  does, with `<bos>` first and the chat markers whole; a Gemma file without one takes
  `Lightricks/LTX-2`'s tokenizer from the hub cache, offline, or is refused naming where.

Cost: about 5 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import functools
import inspect
import io
import types

import numpy as np
import pytest
import torch
from comfy_files import (
    LTX2_DIT_PREFIX,
    assert_same_weights,
    ltx2_checkpoint,
    ltx2_dit_original,
    meta_shapes,
    plain_config,
    read_whole_dit,
    write_gguf,
    write_header_only,
    write_safetensors,
)
from image_jobs import run_here
from safetensors.torch import save_file

from paradit.backend.models.families import family_of
from paradit.backend.models.families.ltx2 import PLAIN_CFG
from paradit.backend.models.families.ltx2.detect import CONNECTORS
from paradit.backend.models.loading import ModelSource, align_cpu_weights, load_pipeline
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import random_preset_spec
from paradit.backend.models.single_file.build import DitWeights
from paradit.backend.models.single_file.convert import dit_row_map
from paradit.backend.models.single_file.detect import detect, recognise
from paradit.backend.models.single_file.header import read_header
from paradit.backend.models.single_file.listing import list_models
from paradit.backend.models.single_file.load import SingleFiles, resolve
from paradit.backend.models.single_file.quant import quantization
from paradit.backend.runtime.job import JobHooks

SPEC = random_preset_spec("random:ltx-2")["components"]
GEMMA3_12B = {  # google/gemma-3-12b-it's text model: the shapes
    "vocab_size": 262208, "hidden_size": 3840, "intermediate_size": 15360,
    "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
}  # fmt: skip
COMPONENTS = ("transformer", "connectors", "vae", "audio_vae", "vocoder")


def _meta(component: str, config: dict) -> torch.nn.Module:
    """A diffusers LTX-2 component on the meta device from its config."""
    import diffusers
    from accelerate import init_empty_weights
    from diffusers.pipelines import ltx2

    name = config["_class_name"]
    model_class = getattr(diffusers, name, None) or getattr(ltx2, name)
    settings = {k: v for k, v in config.items() if not k.startswith("_")}
    with init_empty_weights(include_buffers=True):
        return model_class.from_config(settings)


@functools.cache
def _real() -> types.SimpleNamespace:
    """`random:ltx-2`'s components (the published configs) on the meta device."""
    return types.SimpleNamespace(**{c: _meta(c, SPEC[c]["config"]) for c in COMPONENTS})


def _gemma_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    from transformers import Gemma3TextConfig, Gemma3TextModel

    from paradit.backend.models.encoders.gemma3 import GEMMA3_12B as UNSEEN

    with torch.device("meta"):
        model = Gemma3TextModel(Gemma3TextConfig(**config, **UNSEEN))
    return {"model." + k: v for k, v in meta_shapes(model).items()}


def _fox_in_the_snow(pipe, **call):
    """`LTX2Pipeline` called as these tests call it: a fox in the snow, 64x64 px, 9 frames at
    24 fps, seed 5, the DiT's text length 32, plain CFG, the rest (steps, guidance, output) as
    `call` says."""
    return pipe(
        prompt="a fox in the snow",
        height=64,
        width=64,
        num_frames=9,
        frame_rate=24.0,
        use_cross_timestep=False,
        max_sequence_length=32,
        generator=torch.Generator().manual_seed(5),
        return_dict=False,
        **PLAIN_CFG,
        **call,
    )


@pytest.fixture(scope="module")
def real_files(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("ltx2-headers")
    shapes = {k: tuple(v.shape) for k, v in ltx2_checkpoint(_real()).items()}
    files = {name: root / f"{name}.safetensors" for name in ("dev", "fp8", "dit_only")}
    write_header_only(files["dev"], shapes)
    files["distilled"] = root / "ltx-2-19b-distilled.safetensors"
    write_header_only(files["distilled"], shapes)
    # Lightricks' fp8 file: the blocks' matrices in fp8, a float32 scale (and input scale) each
    blocks = [k for k, s in shapes.items() if ".transformer_blocks." in k and k.endswith(".weight")]
    blocks = [k for k in blocks if len(shapes[k]) == 2]
    scales = {k[: -len("weight")] + x: () for k in blocks for x in ("weight_scale", "input_scale")}
    kinds = {k: "F8_E4M3" for k in blocks} | dict.fromkeys(scales, "F32")
    write_header_only(files["fp8"], shapes | scales, dtypes=kinds)
    dit = {k: s for k, s in shapes.items() if k.startswith(LTX2_DIT_PREFIX)}
    write_header_only(files["dit_only"], dit)
    files["gemma"] = root / "gemma_3_12B_it.safetensors"
    gemma = _gemma_shapes(GEMMA3_12B)
    write_header_only(files["gemma"], gemma)
    files["fp4"] = root / "gemma_3_12B_it_fp4_mixed.safetensors"  # NVFP4: 2 values a byte
    packed = "model.layers.0.self_attn.q_proj.weight"
    fp4 = gemma | {packed: (4096, 1920), packed + "_scale": (4096, 240), packed + "_scale_2": ()}
    dtypes = {packed: "U8", packed + "_scale": "F8_E4M3", packed + "_scale_2": "F32"}
    write_header_only(files["fp4"], fp4, dtypes=dtypes)
    files["fp4_partial"] = root / "gemma_3_12B_it_fp4_partial.safetensors"  # no second scale
    del fp4[packed + "_scale_2"]
    write_header_only(files["fp4_partial"], fp4, dtypes=dtypes)
    return files


@pytest.mark.fast
def test_real_checkpoint_and_gemma_from_their_headers(real_files):
    real = _real()
    found = {}
    for name, fmt in (("dev", "bf16"), ("fp8", "fp8_scaled")):
        part = recognise(str(real_files[name]))
        found[name] = part.detection
        assert (found[name].role, found[name].variant, found[name].prefix) == (
            "transformer", "ltx-2", LTX2_DIT_PREFIX
        )  # fmt: skip
        assert found[name].bundled == ("connectors", "vae", "audio_vae", "vocoder")
        assert quantization(part.header) == fmt
    assert found["fp8"].config == found["dev"].config
    init = inspect.signature(type(real.transformer).__init__).parameters.values()
    defaults = {p.name: p.default for p in init if p.default is not inspect.Parameter.empty}
    assert plain_config(defaults | found["dev"].config) == plain_config(real.transformer.config)
    # every parameter's rows, none of the file's DiT weights unread (the connectors are
    # another component's; DitWeights refuses unread weights, fp8 scales are not weights)
    with DitWeights(recognise(str(real_files["fp8"]))) as weights:
        assert weights.names() == set(real.transformer.state_dict())
        weights.check(real.transformer)
    gemma = detect(read_header(real_files["gemma"]))
    assert (gemma.role, gemma.family, gemma.variant, gemma.prefix) == (
        "text_encoder", "gemma3", "gemma3 3840", "model."
    )  # fmt: skip
    assert {k: gemma.config[k] for k in GEMMA3_12B} == GEMMA3_12B
    resolved = resolve(SingleFiles((str(real_files["dev"]),), (str(real_files["gemma"]),)))
    assert (resolved.preset.name, resolved.pipeline_class) == ("random:ltx-2", "LTX2Pipeline")
    assert (resolved.vae.detection.variant, resolved.vae.header.prefix) == (
        "ltx-2 video vae", "vae."
    )  # fmt: skip
    assert resolved.vae.detection.config["latent_channels"] == 128
    assert sorted(resolved.extras) == ["audio_vae", "connectors", "text_projection", "vocoder"]
    assert {p.header.prefix for p in resolved.extras.values()} == {
        "audio_vae.", "vocoder.", "text_embedding_projection.", "model.diffusion_model."
    }  # fmt: skip
    gemma_file = (str(real_files["gemma"]),)
    # the distilled file: the same shapes, named so; random:ltx-2-distilled's scheduler
    distilled = resolve(SingleFiles((str(real_files["distilled"]),), gemma_file))
    found = distilled.dits["transformer"].detection
    assert (found.variant, found.config) == (
        "ltx-2-distilled",
        resolved.dits["transformer"].detection.config,
    )
    assert "8 steps at diffusers' DISTILLED_SIGMA_VALUES without CFG" in found.reasons[-2]
    assert distilled.preset.name == "random:ltx-2-distilled"
    spec = random_preset_spec("random:ltx-2-distilled")
    scheduler = spec["components"].pop("scheduler")["config"]
    dev_scheduler = SPEC["scheduler"]["config"]
    assert spec["components"] == {k: v for k, v in SPEC.items() if k != "scheduler"}
    assert scheduler == dev_scheduler | {"use_dynamic_shifting": False, "shift_terminal": None}
    with pytest.raises(ValueError, match=r"dit_only.safetensors holds LTX-2's DiT; no file given "
                       r"holds text_projection, vae, audio_vae, vocoder: give the text "
                       r"projection .*; the video VAE .*; the audio VAE"):  # fmt: skip
        resolve(SingleFiles((str(real_files["dit_only"]),), gemma_file))
    with pytest.raises(ValueError, match=r"needs gemma3 text encoders; gemma3 is in none"):
        resolve(SingleFiles((str(real_files["dev"]),)))
    # Gemma in ComfyUI's fp4_mixed: its nvfp4 layers are read (dequantized at load, issue 52);
    # a U8 weight with block scales but no nvfp4 second scale is refused naming the tensor
    fp4 = resolve(SingleFiles((str(real_files["dev"]),), (str(real_files["fp4"]),)))
    assert fp4.summary()["files"]["text_encoder"]["format"] == "nvfp4"
    with pytest.raises(ValueError, match=r"q_proj\.weight_scale .* only fp8 and int8 weights"):
        resolve(SingleFiles((str(real_files["dev"]),), (str(real_files["fp4_partial"]),)))


def test_tiny_checkpoint_makes_the_presets_video_and_audio(tmp_path):
    """The tiny preset's checkpoint (float32) and Gemma file load as `LTX2Pipeline` holding
    exactly the preset's components and tokenizer, and the pipeline makes the preset's video
    and audio track with them, byte for byte (32x32 px, 9 frames, 2 steps, CFG); listed by
    `paradit models DIR`. An fp8 DiT in Lightricks' names reads to the values it holds."""
    tiny = build_preset("tiny-ltx2")
    folder = tmp_path / "models"
    for sub in ("checkpoints", "text_encoders"):
        (folder / sub).mkdir(parents=True)
    checkpoint = folder / "checkpoints" / "ltx-2-19b-dev.safetensors"
    save_file(ltx2_checkpoint(tiny), str(checkpoint))
    gemma = folder / "text_encoders" / "gemma_3_12B_it.safetensors"
    save_file({"model." + k: v for k, v in tiny.text_encoder.state_dict().items()}, str(gemma))
    pipe = load_pipeline(ModelSource.parse(str(checkpoint), [str(gemma)]))
    assert type(pipe) is type(tiny)
    # the dev file keeps the dev schedule (the token-dependent shift) and defaults
    assert pipe.scheduler.config.use_dynamic_shifting and pipe.scheduler.config.shift_terminal
    limits = family_of(pipe).limits(pipe, tiny=True)
    assert (limits.default_steps, limits.default_guidance, limits.sigmas) == (4, 4.0, ())
    # what a workflow's import holds the file to (Family.fixed_levels): any step count
    assert family_of(pipe).fixed_levels(recognise(str(checkpoint)).detection.variant) == ()
    assert_same_weights(pipe, tiny, (*COMPONENTS, "text_encoder"))
    text = "a fox <bos> 42"
    assert pipe.tokenizer(text).input_ids == tiny.tokenizer(text).input_ids
    outputs = [_render(each) for each in (pipe, tiny)]
    (video, audio), (their_video, their_audio) = outputs
    assert np.array_equal(video, their_video) and video.std() > 0
    assert np.array_equal(audio, their_audio) and audio.shape[0] == 2 and audio.std() > 0
    listed = {e.path: (e.role, e.variant) for e in list_models(folder)}
    assert listed == {
        "checkpoints/ltx-2-19b-dev.safetensors": (
            "transformer",
            "all-in-one tiny-ltx2 (DiT, connectors, vae, audio_vae, vocoder)",
        ),
        "text_encoders/gemma_3_12B_it.safetensors": ("text_encoder", "gemma3 32"),
    }
    dit = {
        k: v for k, v in ltx2_checkpoint(tiny).items() if k.startswith(LTX2_DIT_PREFIX)
    }  # Lightricks' fp8 names: weight_scale (write_safetensors writes ComfyUI's scale_weight)
    fp8 = tmp_path / "ltx-2-19b-dev-fp8.safetensors"
    held = write_safetensors(fp8, dit, "fp8_scaled")
    _rename_scales(fp8)
    part, model = read_whole_dit(fp8)
    assert (part.detection.variant, quantization(part.header)) == ("tiny-ltx2", "fp8_scaled")
    rows = dit_row_map(part.header, part.detection)
    for name, value in model.state_dict().items():  # one segment each: a rename
        assert torch.equal(value.reshape(held[rows[name][0].key].shape), held[rows[name][0].key])


def test_gguf_dit_with_its_parts_in_separate_files(tmp_path):
    """The tiny DiT alone as a GGUF (the DiT's own names, no prefix, as the GGUF node pack's
    `ltx-2-19b-dev-Q4_K_M.gguf`) with the other parts as separate files, each with or without
    the checkpoint's prefix (`model.diffusion_model.` for the connectors,
    `text_embedding_projection.`, `vae.`, `audio_vae.`, `vocoder.`), given as --text-encoder
    and --vae: with an F32 GGUF the pipeline holds exactly the preset's components and makes
    its video and audio byte for byte; a Q8_0 GGUF beside the whole checkpoint (given as --vae,
    the source of every other part) makes them within a measured tolerance. A part that no file
    holds is refused by name with the files that would hold it; two files with one part too.
    `paradit models DIR` lists the split files as LTX-2 parts."""
    tiny = build_preset("tiny-ltx2")
    whole = ltx2_checkpoint(tiny)

    def under(*prefixes: str, strip: bool = False) -> dict[str, torch.Tensor]:
        picked = {k: v for k, v in whole.items() if k.startswith(prefixes)}
        if not strip:
            return picked
        return {k.split(".", 1)[1] if k.startswith(prefixes[-1]) else k: v
                for k, v in picked.items()}  # fmt: skip

    connectors = tuple(LTX2_DIT_PREFIX + c for c in CONNECTORS)
    dit = {
        k[len(LTX2_DIT_PREFIX) :]: v
        for k, v in under(LTX2_DIT_PREFIX).items()
        if not k.startswith(connectors)
    }
    files = {}
    for name, qtype in (("ltx-2-19b-dev-F32.gguf", "F32"), ("ltx-2-19b-dev-Q8_0.gguf", "Q8_0")):
        files[qtype] = tmp_path / name
        held = write_gguf(files[qtype], dit, qtype)
    assert not all(torch.equal(held[k], v) for k, v in dit.items())  # Q8_0 changed values
    parts = {  # the prefixed files, then the same parts without prefixes
        "connectors": under(*connectors, "text_embedding_projection."),
        "video_vae": under("vae."),
        "audio": under("audio_vae.", "vocoder."),
        "connectors_bare": {
            **{k[len(LTX2_DIT_PREFIX) :]: v for k, v in under(*connectors).items()},
            **under("text_embedding_projection.", strip=True),
        },
        "video_vae_bare": under("vae.", strip=True),
        "audio_bare": {**under("audio_vae.", strip=True), **under("vocoder.", strip=True)},
        "checkpoint": whole,
    }
    for name, state in parts.items():
        save_file(state, str(tmp_path / f"{name}.safetensors"))
    gemma = tmp_path / "gemma_3_12B_it.safetensors"
    save_file({"model." + k: v for k, v in tiny.text_encoder.state_dict().items()}, str(gemma))

    def source(dit_file, encoders=(), vaes=()) -> ModelSource:
        return ModelSource.parse(
            str(dit_file),
            [str(gemma), *(str(tmp_path / f"{e}.safetensors") for e in encoders)],
            [str(tmp_path / f"{v}.safetensors") for v in vaes],
        )

    listed = {e.path: (e.role, e.variant) for e in list_models(tmp_path)}
    assert {k: listed[k] for k in ("connectors_bare.safetensors", "audio.safetensors")} == {
        "connectors_bare.safetensors": ("part", "ltx-2 connectors, text_projection"),
        "audio.safetensors": ("part", "ltx-2 audio_vae, vocoder"),
    }
    assert listed["video_vae_bare.safetensors"] == ("vae", "ltx-2 video vae")
    assert listed["ltx-2-19b-dev-Q8_0.gguf"] == ("transformer", "tiny-ltx2")
    exact = load_pipeline(source(files["F32"], ["connectors"], ["video_vae", "audio_bare"]))
    bare = load_pipeline(source(files["F32"], ["connectors_bare"], ["audio", "video_vae_bare"]))
    for pipe in (exact, bare):
        for name in COMPONENTS:
            ours, theirs = getattr(pipe, name).state_dict(), getattr(tiny, name).state_dict()
            assert set(ours) == set(theirs), name
            assert all(torch.equal(ours[k], v) for k, v in theirs.items()), name
    (video, audio), (their_video, their_audio) = _render(exact), _render(tiny)
    assert np.array_equal(video, their_video) and video.std() > 0
    assert np.array_equal(audio, their_audio) and audio.std() > 0
    q8 = load_pipeline(source(files["Q8_0"], vaes=["checkpoint"]))
    assert all(
        torch.equal(value, held[name]) for name, value in ltx2_dit_original(
            q8.transformer.state_dict()).items()
    )  # fmt: skip
    q8_video, q8_audio = _render(q8)
    video_error = float(np.abs(q8_video - their_video).max())
    audio_error = float(np.abs(q8_audio - their_audio).max())
    print("Q8_0 max errors: video", video_error, "audio", audio_error)
    assert 0 < video_error < 0.05 and 0 < audio_error < 0.05
    with pytest.raises(
        ValueError,
        match=r"ltx-2-19b-dev-F32.gguf holds LTX-2's DiT; no file given holds connectors, "
        r"text_projection, audio_vae, vocoder: give the text connectors .*embeddings_connector"
        r".*; the audio VAE \(audio_vae.: --vae with the audio VAE file.*; the vocoder",
    ):
        source(files["F32"], vaes=["video_vae"])
    with pytest.raises(
        ValueError, match=r"--vae checkpoint.safetensors and video_vae.safetensors both hold "
        r"LTX-2's vae: give one file for each part"
    ):  # fmt: skip
        source(files["F32"], vaes=["video_vae", "checkpoint"])


def _render(pipe) -> tuple[np.ndarray, np.ndarray]:
    """The video and audio of a tiny LTX-2 pipeline's fixed job (`_fox_in_the_snow`, 2 steps,
    CFG 4 for both streams, a negative prompt)."""
    align_cpu_weights(pipe)
    pipe.set_progress_bar_config(disable=True)
    with torch.no_grad():
        video, audio = _fox_in_the_snow(
            pipe,
            negative_prompt="rain",
            num_inference_steps=2,
            guidance_scale=4.0,
            audio_guidance_scale=4.0,
            output_type="np",
        )
    return np.asarray(video[0]), audio[0].numpy()


def test_distilled_file_runs_its_own_schedule(tmp_path):
    """A tiny-ltx2 checkpoint named distilled loads with the distilled scheduler (sigmas as
    given) and the distilled defaults (8 steps, guidance 1, that step count only); its job with
    no steps or guidance given runs the 8 distilled sigmas and equals `LTX2Pipeline` called as
    diffusers' docs call the distilled model (`sigmas=DISTILLED_SIGMA_VALUES`, guidance 1,
    the scheduler without dynamic shifting), latents byte for byte (the dev file keeps the
    dev schedule: test_tiny_checkpoint_makes_the_presets_video_and_audio)."""
    from diffusers import FlowMatchEulerDiscreteScheduler, LTX2Pipeline
    from diffusers.pipelines.ltx2.utils import DISTILLED_SIGMA_VALUES

    from paradit.backend.request import JobRequest

    tiny = build_preset("tiny-ltx2")
    gemma = tmp_path / "gemma_3_12B_it.safetensors"
    save_file({"model." + k: v for k, v in tiny.text_encoder.state_dict().items()}, str(gemma))
    checkpoint = tmp_path / "ltx-2-19b-distilled.safetensors"
    save_file(ltx2_checkpoint(tiny), str(checkpoint))
    assert recognise(str(checkpoint)).detection.variant == "tiny-ltx2-distilled"
    distilled = load_pipeline(ModelSource.parse(str(checkpoint), [str(gemma)]))
    family = family_of(distilled)
    limits = family.limits(distilled, tiny=True)
    assert (limits.default_steps, limits.default_guidance) == (8, 1.0)
    assert (limits.min_steps, limits.max_steps, limits.sigmas) == (
        8,
        8,
        tuple(DISTILLED_SIGMA_VALUES),
    )
    # a workflow's import holds the file to the same levels (Family.fixed_levels, by variant)
    assert family.fixed_levels("tiny-ltx2-distilled") == limits.sigmas
    body = {"prompt": "a fox in the snow", "width": 64, "height": 64, "num_frames": 9, "seed": 5}
    for steps in (4, 30):
        with pytest.raises(
            ValueError, match=rf"must be 8 for this model: .*8-step sigma schedule.*got {steps}"
        ):
            JobRequest.from_body({**body, "num_inference_steps": steps}, limits)
    request = JobRequest.from_body(body, limits)  # the distilled defaults
    assert not request.uses_cfg
    sigmas = []
    reference = LTX2Pipeline(
        **{
            **tiny.components,
            "scheduler": FlowMatchEulerDiscreteScheduler.from_config(
                tiny.scheduler.config, use_dynamic_shifting=False, shift_terminal=None
            ),
        }
    )
    for pipe in (distilled, reference):
        align_cpu_weights(pipe)
        pipe.set_progress_bar_config(disable=True)
    # the job as a rank runs it (`run_on_rank`); the job's runner shares the loaded scheduler
    hooks = JobHooks(on_step=lambda *_: sigmas.append(distilled.scheduler.sigmas) or False)
    _, result = run_here(distilled, body, hooks=hooks)
    with torch.no_grad():
        their_video, their_audio = _fox_in_the_snow(
            reference,
            num_inference_steps=8,
            sigmas=DISTILLED_SIGMA_VALUES,
            guidance_scale=1.0,
            audio_guidance_scale=1.0,
            output_type="latent",
        )
        theirs = family.audio(reference, (their_video, their_audio))  # as the job decodes it
    assert len(sigmas) == 8
    assert sigmas[0].tolist() == torch.tensor([*DISTILLED_SIGMA_VALUES, 0.0]).tolist()
    video, audio = result.latents, result.audio
    assert torch.equal(video, their_video) and np.array_equal(audio.waveform, theirs.waveform)
    assert video.std() > 0 and their_audio.std() > 0 and audio.waveform.std() > 0


def _rename_scales(path) -> None:
    """ComfyUI's `scale_weight`/`scale_input` as Lightricks names them."""
    from safetensors.torch import load_file

    state = load_file(str(path))
    renamed = {
        k.replace(".scale_weight", ".weight_scale").replace(".scale_input", ".input_scale"): v
        for k, v in state.items()
        if k != "scaled_fp8"
    }
    save_file(renamed, str(path))


@pytest.mark.fast
def test_gemma_file_carries_its_tokenizer(tmp_path, no_hub_cache):
    """A Gemma-like SentencePiece model (BPE, byte fallback, no dummy prefix, chat markers as
    user-defined pieces) stored as the file's `spiece_model`: the tokenizer built from it cuts
    every text as SentencePiece does, after `<bos>`, and pads on the left for the pipeline."""
    import sentencepiece
    from transformers import Gemma3TextConfig, Gemma3TextModel

    from paradit.backend.models.single_file.components import tokenizer as tokenizer_of
    from paradit.backend.models.single_file.detect import Part

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["a red fox runs through the snow", "the quick brown dog"] * 40),
        model_writer=model,
        vocab_size=300,
        model_type="bpe",
        byte_fallback=True,
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        split_by_whitespace=False,
        user_defined_symbols=["<start_of_turn>", "<end_of_turn>"],
        pad_id=0, eos_id=1, bos_id=2, unk_id=3,
        pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>",
        minloglevel=2,
    )  # fmt: skip
    raw = model.getvalue()
    config = Gemma3TextConfig(
        vocab_size=320, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
        num_attention_heads=1, num_key_value_heads=1, head_dim=8,
    )  # fmt: skip
    state = {"model." + k: v for k, v in Gemma3TextModel(config).state_dict().items()}
    state["spiece_model"] = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    path = tmp_path / "gemma_3_12B_it.safetensors"
    save_file(state, str(path))
    header = read_header(path)
    found = Part(header, detect(header))
    assert found.detection.family == "gemma3" and "spiece_model" in found.detection.reasons[1]
    tokenizer = tokenizer_of(found, "random:ltx-2", "tokenizer")
    processor = sentencepiece.SentencePieceProcessor(model_proto=raw)
    for text in (
        "a red fox",
        "Ünïcødé 🦊  two  spaces\nline",
        "<start_of_turn>user\nhi<end_of_turn>",
    ):
        assert tokenizer(text).input_ids == [2, *processor.encode(text)], text
    tokenizer.padding_side = "left"
    padded = tokenizer(["a fox"], padding="max_length", max_length=8).input_ids[0]
    fox = processor.encode("a fox")
    assert padded == [0] * (8 - 1 - len(fox)) + [2, *fox]
    # without its spiece_model, a Gemma file takes LTX-2's tokenizer from the hub cache, offline
    del state["spiece_model"]
    save_file(state, str(path))
    header = read_header(path)
    with pytest.raises(ValueError, match=r"GEMMA3 file carries no tokenizer.*Lightricks/LTX-2"):
        tokenizer_of(Part(header, detect(header)), "random:ltx-2", "tokenizer")
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = no_hub_cache / "models--Lightricks--LTX-2"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    tokenizer.save_pretrained(str(repo / "snapshots" / revision / "tokenizer"))
    cached = tokenizer_of(Part(header, detect(header)), "random:ltx-2", "tokenizer")
    text = "<start_of_turn>a red fox 🦊"
    assert cached(text).input_ids == [2, *processor.encode(text)]
