"""LTX-2.3 from the single files ComfyUI users hold (`ltx-2.3-22b-dev.safetensors`, `-fp8`,
with `gemma_3_12B_it`): the checkpoint in Lightricks' names as for LTX-2 (`comfy_files.
ltx2_checkpoint`, an inverse naming written apart from the loader's), with 2.3's parts: the
prompt AdaLN (`prompt_adaln_single`), one text projection per stream
(`text_embedding_projection.video_aggregate_embed`, `audio_...`), the four-level video VAE
(`up_blocks.7`, `8`) and the vocoder with bandwidth extension (`vocoder.vocoder.`,
`vocoder.bwe_generator.`, `vocoder.mel_stft.`; BigVGAN's `act_post`, `downsample.lowpass`).

- From headers alone (`random:ltx2.3-22b`'s components on the meta device): the DiT's config
  read off the shapes is the preset's, every DiT parameter is read; the fp8 file is
  fp8_scaled with the same config; the checkpoint and the Gemma file resolve to
  `random:ltx2.3-22b`'s pipeline with the checkpoint's parts; a 2.3 (2.5) file named
  distilled resolves to the same preset with the distilled scheduler.
- The distilled schedule: `tiny-ltx2.3`'s checkpoint named `ltx-2.3-22b-distilled` runs 8 steps
  at Lightricks' published distilled sigmas (written out here, the values ComfyUI's 2.3 and 2.5
  templates give ManualSigmas) without CFG.
- The tiny preset's weights in that layout load to exactly `tiny-ltx2.3`'s components and make
  its video and its 48 kHz audio byte for byte; `paradit models DIR` names the file.
- LTX-2.5 the same way: its DiT (the keyframe embedding, no video feed-forward biases) read off
  the keys, `random:ltx2.5-22b`'s config from its header; its Gemma 4 text model (Hugging
  Face's names, `encoders/gemma4.py`: full-attention layers without a value projection) with
  the real 12B's shapes; `tiny-ltx2.5`'s checkpoint and Gemma 4 file load to its components and
  make its video and audio byte for byte. Its diffusion video VAE (`decoder.conv_in_x_t`)
  resolves as the conv VAE does and decodes as diffusers' model with a seed-0 generator.

Cost: about 12 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import inspect
import types

import numpy as np
import pytest
import torch
from comfy_files import (
    LTX2_DIT_PREFIX,
    assert_same_weights,
    ltx2_checkpoint,
    ltx25_diffusion_vae,
    plain_config,
    write_header_only,
)
from image_jobs import run_here
from safetensors.torch import save_file

from paradit.backend.models.families import family_of
from paradit.backend.models.families.ltx2 import PLAIN_CFG
from paradit.backend.models.families.ltx2.adapter import DISTILLED_SCHEDULER
from paradit.backend.models.loading import ModelSource, align_cpu_weights, load_pipeline
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.models.single_file.build import DitWeights
from paradit.backend.models.single_file.detect import recognise
from paradit.backend.models.single_file.listing import list_models
from paradit.backend.models.single_file.load import SingleFiles, resolve
from paradit.backend.models.single_file.quant import quantization
from paradit.backend.runtime.job import JobHooks

COMPONENTS = ("transformer", "connectors", "vae", "audio_vae", "vocoder")
GEMMA3_12B = {  # google/gemma-3-12b-it's text model: the shapes
    "vocab_size": 262208, "hidden_size": 3840, "intermediate_size": 15360,
    "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
}  # fmt: skip


def _gemma_shapes() -> dict[str, tuple[int, ...]]:
    from transformers import Gemma3TextConfig, Gemma3TextModel

    from paradit.backend.models.encoders.gemma3 import GEMMA3_12B as UNSEEN

    with torch.device("meta"):
        model = Gemma3TextModel(Gemma3TextConfig(**GEMMA3_12B, **UNSEEN))
    return {"model." + k: tuple(v.shape) for k, v in model.state_dict().items()}


@pytest.fixture(scope="module")
def real_files(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("ltx23-headers")
    real = build_random_preset("random:ltx2.3-22b", device="meta")
    shapes = {k: tuple(v.shape) for k, v in ltx2_checkpoint(real).items()}
    files = {
        "dev": root / "ltx-2.3-22b-dev.safetensors",
        "fp8": root / "ltx-2.3-22b-dev-fp8.safetensors",
        "distilled": root / "ltx-2.3-22b-distilled.safetensors",
        "gemma": root / "gemma_3_12B_it.safetensors",
    }
    write_header_only(files["dev"], shapes)
    write_header_only(files["distilled"], shapes)
    # Lightricks' fp8 file: the blocks' matrices in fp8, a float32 scale (and input scale) each
    blocks = [k for k, s in shapes.items() if ".transformer_blocks." in k and len(s) == 2]
    blocks = [k for k in blocks if k.endswith(".weight") and k.startswith(LTX2_DIT_PREFIX)]
    scales = {k[: -len("weight")] + x: () for k in blocks for x in ("weight_scale", "input_scale")}
    kinds = {k: "F8_E4M3" for k in blocks} | dict.fromkeys(scales, "F32")
    write_header_only(files["fp8"], shapes | scales, dtypes=kinds)
    write_header_only(files["gemma"], _gemma_shapes())
    return types.SimpleNamespace(files=files, real=real)


@pytest.mark.fast
def test_real_checkpoint_from_its_header(real_files):
    files, real = real_files.files, real_files.real
    found = {}
    for name, fmt in (("dev", "bf16"), ("fp8", "fp8_scaled")):
        part = recognise(str(files[name]))
        found[name] = part.detection
        assert (part.detection.role, part.detection.variant) == ("transformer", "ltx-2.3")
        assert part.detection.bundled == ("connectors", "vae", "audio_vae", "vocoder")
        assert quantization(part.header) == fmt
    assert found["fp8"].config == found["dev"].config
    init = inspect.signature(type(real.transformer).__init__).parameters.values()
    defaults = {p.name: p.default for p in init if p.default is not inspect.Parameter.empty}
    assert plain_config(defaults | found["dev"].config) == plain_config(real.transformer.config)
    assert any("LTX-2.3: no caption projection" in reason for reason in found["dev"].reasons)
    with DitWeights(recognise(str(files["fp8"]))) as weights:
        assert weights.names() == set(real.transformer.state_dict())
        weights.check(real.transformer)
    gemma = (str(files["gemma"]),)
    resolved = resolve(SingleFiles((str(files["dev"]),), gemma))
    assert (resolved.preset.name, resolved.pipeline_class) == ("random:ltx2.3-22b", "LTX2Pipeline")
    assert sorted(resolved.extras) == ["audio_vae", "connectors", "text_projection", "vocoder"]
    distilled = resolve(SingleFiles((str(files["distilled"]),), gemma))
    assert recognise(str(files["distilled"])).detection.variant == "ltx-2.3-distilled"
    assert distilled.preset.name == "random:ltx2.3-22b"
    assert dict(distilled.preset.scheduler) == DISTILLED_SCHEDULER  # sigmas run as given


def _render(pipe) -> tuple[np.ndarray, np.ndarray]:
    """A tiny LTX-2.3 pipeline's video and audio for a fixed job (64x64 px, 9 frames, 2
    steps, CFG 4 for both streams), called with the pipeline's defaults (2.3's)."""
    align_cpu_weights(pipe)
    pipe.set_progress_bar_config(disable=True)
    with torch.no_grad():
        video, audio = pipe(
            prompt="a fox in the snow",
            negative_prompt="rain",
            height=64,
            width=64,
            num_frames=9,
            frame_rate=24.0,
            num_inference_steps=2,
            guidance_scale=4.0,
            audio_guidance_scale=4.0,
            max_sequence_length=32,
            generator=torch.Generator().manual_seed(5),
            output_type="np",
            return_dict=False,
            **PLAIN_CFG,
        )
    return np.asarray(video[0]), audio[0].numpy()


def test_tiny_checkpoint_makes_the_presets_video_and_audio(tmp_path):
    """`tiny-ltx2.3`'s checkpoint (float32, Lightricks' names) and Gemma file load as
    `LTX2Pipeline` holding exactly the preset's components (the vocoder's mel bases and
    filters included), and make its video and 48 kHz audio byte for byte; listed by
    `paradit models DIR`."""
    tiny = build_preset("tiny-ltx2.3")
    folder = tmp_path / "models"
    for sub in ("checkpoints", "text_encoders"):
        (folder / sub).mkdir(parents=True)
    checkpoint = folder / "checkpoints" / "ltx-2.3-22b-dev.safetensors"
    state = ltx2_checkpoint(tiny)
    assert {"vocoder.vocoder.act_post.act.alpha", "vocoder.mel_stft.mel_basis"} <= set(state)
    assert "text_embedding_projection.audio_aggregate_embed.weight" in state
    assert any(k.startswith("vae.decoder.up_blocks.8.") for k in state)
    save_file(state, str(checkpoint))
    gemma = folder / "text_encoders" / "gemma_3_12B_it.safetensors"
    save_file({"model." + k: v for k, v in tiny.text_encoder.state_dict().items()}, str(gemma))
    pipe = load_pipeline(ModelSource.parse(str(checkpoint), [str(gemma)]))
    assert type(pipe) is type(tiny) and type(pipe.vocoder) is type(tiny.vocoder)
    assert_same_weights(pipe, tiny, (*COMPONENTS, "text_encoder"))
    (video, audio), (their_video, their_audio) = [_render(each) for each in (pipe, tiny)]
    assert np.array_equal(video, their_video) and video.std() > 0
    assert np.array_equal(audio, their_audio) and audio.shape == (2, 33 * 480)
    listed = {e.path: (e.role, e.variant) for e in list_models(folder)}
    assert listed["checkpoints/ltx-2.3-22b-dev.safetensors"] == (
        "transformer",
        "all-in-one tiny-ltx2.3 (DiT, connectors, vae, audio_vae, vocoder)",
    )


def _gemma4_shapes() -> dict[str, tuple[int, ...]]:
    """LTX-2.5's Gemma 4 12B text model, as `random:ltx2.5-22b`'s reduced one has it but at
    the published heads (16 of 256, 8 key/value; full attention every 6th layer, 512-wide
    heads, 1 key/value head, keys as values), MLP and vocabulary, under `model.`."""
    from transformers import Gemma4UnifiedTextConfig, Gemma4UnifiedTextModel

    config = Gemma4UnifiedTextConfig(
        vocab_size=262144, hidden_size=3840, intermediate_size=15360, num_hidden_layers=48,
        num_attention_heads=16, num_key_value_heads=8, head_dim=256, global_head_dim=512,
        num_global_key_value_heads=1, attention_k_eq_v=True,
    )  # fmt: skip
    with torch.device("meta"):
        model = Gemma4UnifiedTextModel(config)
    return {"model." + k: tuple(v.shape) for k, v in model.state_dict().items()}


@pytest.mark.fast
def test_ltx2_5_checkpoint_and_gemma4_from_their_headers(tmp_path):
    real = build_random_preset("random:ltx2.5-22b", device="meta")
    checkpoint, gemma = tmp_path / "ltx-2.5-22b-dev.safetensors", tmp_path / "gemma4.safetensors"
    write_header_only(checkpoint, {k: tuple(v.shape) for k, v in ltx2_checkpoint(real).items()})
    write_header_only(gemma, _gemma4_shapes())
    dit = recognise(str(checkpoint)).detection
    assert (dit.role, dit.variant) == ("transformer", "ltx-2.5")
    init = inspect.signature(type(real.transformer).__init__).parameters.values()
    defaults = {p.name: p.default for p in init if p.default is not inspect.Parameter.empty}
    assert plain_config(defaults | dit.config) == plain_config(real.transformer.config)
    encoder = recognise(str(gemma)).detection
    assert (encoder.role, encoder.family, encoder.variant) == (
        "text_encoder",
        "gemma4",
        "gemma4 3840",
    )
    config = encoder.config
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (16, 8)
    assert (config["global_head_dim"], config["num_global_key_value_heads"]) == (512, 1)
    assert config["attention_k_eq_v"] and config["layer_types"][5::6] == ["full_attention"] * 8
    assert config["layer_types"].count("full_attention") == 8
    resolved = resolve(SingleFiles((str(checkpoint),), (str(gemma),)))
    assert (resolved.preset.name, resolved.pipeline_class) == ("random:ltx2.5-22b", "LTX2Pipeline")


@pytest.mark.fast
def test_ltx2_5_diffusion_video_vae_resolves_by_its_keys(tmp_path):
    """LTX-2.5's diffusion video VAE (`ltx-2.5-video-vae-bf16`: `decoder.conv_in_x_t`, the
    key ComfyUI's VAELoader tells `CausalDiffusionVAE` by, comfy/sd.py) given with --vae
    beside the 2.5 checkpoint resolves as the job's video VAE, as the conv VAE does."""
    real = build_random_preset("random:ltx2.5-22b", device="meta")
    checkpoint, gemma = tmp_path / "ltx-2.5-22b-dev.safetensors", tmp_path / "gemma4.safetensors"
    whole = ltx2_checkpoint(real)
    write_header_only(checkpoint, {k: tuple(v.shape) for k, v in whole.items()})
    write_header_only(gemma, _gemma4_shapes())
    video = {k[len("vae.") :]: v for k, v in whole.items() if k.startswith("vae.")}
    diffusion, _ = ltx25_diffusion_vae(video)
    for name, state in (("ltx-2.5-video-vae-bf16", diffusion), ("ltx-2.5-video-vae-conv", video)):
        vae = tmp_path / f"{name}.safetensors"
        write_header_only(vae, {k: tuple(v.shape) for k, v in state.items()})
        resolved = resolve(SingleFiles((str(checkpoint),), (str(gemma),), (str(vae),)))
        assert resolved.vae.header.path == vae


def _diffusion_vae_files(folder) -> tuple[str, str, str]:
    """tiny-ltx2.5's DiT file (the checkpoint without its conv VAE), its Gemma 4 file and the
    diffusion video VAE (`comfy_files.ltx25_diffusion_vae`: the conv VAE's encoder and
    statistics beside the seeded tiny diffusion decoder)."""
    tiny = build_preset("tiny-ltx2.5")
    whole = ltx2_checkpoint(tiny)
    paths = [folder / f"{n}.safetensors" for n in ("ltx-2.5-dit", "gemma4", "ltx-2.5-video-vae")]
    save_file({k: v for k, v in whole.items() if not k.startswith("vae.")}, str(paths[0]))
    text = {"model." + k: v.contiguous() for k, v in tiny.text_encoder.state_dict().items()}
    save_file(text, str(paths[1]))
    video = {k[len("vae.") :]: v for k, v in whole.items() if k.startswith("vae.")}
    state, metadata = ltx25_diffusion_vae(video)
    save_file(state, str(paths[2]), metadata)
    return tuple(str(p) for p in paths)


def test_ltx2_5_diffusion_video_vae_decodes_as_diffusers_with_seed_0(tmp_path):
    """The diffusion VAE file loads (`families/ltx2/diffusion_vae.py`): the pipeline's `vae`
    is the conv VAE of the preset's config with the file's encoder and statistics (they equal
    tiny-ltx2.5's) and no conv decoder; its `diffusion_decoder` holds the seeded diffusers
    model's weights (the file's fused `qkv`, `proj`, `q_norm`, `t_embedder.mlp` mapped back).
    The family's decode of a job's latents (world size 1: one tile) equals diffusers'
    `LTX2VideoDiffusionDecoderModel` called directly with `torch.Generator().manual_seed(0)`
    (ComfyUI's noise: seeded 0 on every decode, whatever the job's seed), postprocessed as
    the pipeline does; the decode of stage 5's smallest grid (2 latent frames, 2x2) fits the
    tiny windows; 1 latent frame does not: refused before the steps, naming the stage."""
    from comfy_files import ltx25_diffusion_decoder
    from diffusers import AutoencoderKLLTX2Video
    from image_jobs import run_here

    from paradit.backend.request import JobRequest

    dit, gemma, vae = _diffusion_vae_files(tmp_path)
    pipe = load_pipeline(ModelSource.parse(dit, (gemma,), (vae,)))
    tiny = build_preset("tiny-ltx2.5")
    assert type(pipe.vae) is AutoencoderKLLTX2Video
    for name, value in tiny.vae.state_dict().items():
        if not name.startswith("decoder."):
            assert torch.equal(pipe.vae.state_dict()[name], value), name
    with pytest.raises(ValueError, match="no convolutional decoder"):
        pipe.vae.decoder(torch.zeros(1))
    reference = ltx25_diffusion_decoder(0)
    theirs = reference.state_dict()
    ours = pipe.vae.diffusion_decoder.state_dict()
    assert set(ours) == set(theirs)
    for name in theirs:
        if name not in ("latents_mean", "latents_std"):
            assert torch.equal(ours[name], theirs[name]), name
    assert torch.equal(ours["latents_mean"], tiny.vae.latents_mean)
    family = family_of(pipe)
    latents = torch.randn(1, 8, 2, 2, 2, generator=torch.Generator().manual_seed(3))
    request = JobRequest(prompt="a fox", width=64, height=64, num_frames=9, seed=11)
    tiles = family.tiled_decode(pipe, request, latents)
    assert tiles.num_tiles == 1
    frames = tiles.assemble([tiles.decode_tile(0)])
    with torch.no_grad():
        video = reference.decode(latents, generator=torch.Generator().manual_seed(0))[0]
    expected = np.asarray(pipe.video_processor.postprocess_video(video, output_type="np"))[0]
    assert frames.shape == (9, 64, 64, 3) and frames.std() > 0
    assert np.array_equal(frames, expected)
    again = tiles.assemble([tiles.decode_tile(0)])
    assert np.array_equal(again, frames)  # seed 0 on every decode
    one_frame = {"prompt": "a fox", "width": 64, "height": 64, "num_frames": 1}
    with pytest.raises(ValueError, match="stage 5 would be 1x4x4"):
        run_here(pipe, one_frame)  # refused in the job's prepare, before the steps


def test_tiny_ltx2_5_checkpoint_makes_the_presets_video_and_audio(tmp_path):
    tiny = build_preset("tiny-ltx2.5")
    checkpoint = tmp_path / "ltx-2.5-22b-dev.safetensors"
    save_file(ltx2_checkpoint(tiny), str(checkpoint))
    gemma = tmp_path / "gemma4-12b-ltx-v1.safetensors"
    save_file({"model." + k: v for k, v in tiny.text_encoder.state_dict().items()}, str(gemma))
    pipe = load_pipeline(ModelSource.parse(str(checkpoint), [str(gemma)]))
    assert type(pipe.text_encoder) is type(tiny.text_encoder)
    assert_same_weights(pipe, tiny, (*COMPONENTS, "text_encoder"))
    (video, audio), (their_video, their_audio) = [_render(each) for each in (pipe, tiny)]
    assert np.array_equal(video, their_video) and np.array_equal(audio, their_audio)


PUBLISHED_DISTILLED = [1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0]
"""Lightricks' distilled noise levels (ltx-pipelines `utils/constants.py`
`DISTILLED_SIGMA_VALUES`, as published; ComfyUI's LTX-2.3 and 2.5 templates write the same nine
into their first stage's ManualSigmas), written out here rather than read from diffusers."""


def test_ltx2_3_distilled_file_runs_the_published_schedule(tmp_path):
    """`tiny-ltx2.3`'s checkpoint under the distilled file's name: 8 steps and guidance 1 by
    default, 8 the only step count, and its job steps through exactly the published levels."""
    tiny = build_preset("tiny-ltx2.3")
    checkpoint = tmp_path / "ltx-2.3-22b-distilled.safetensors"
    save_file(ltx2_checkpoint(tiny), str(checkpoint))
    gemma = tmp_path / "gemma_3_12B_it.safetensors"
    save_file({"model." + k: v for k, v in tiny.text_encoder.state_dict().items()}, str(gemma))
    assert recognise(str(checkpoint)).detection.variant == "tiny-ltx2.3-distilled"
    pipe = load_pipeline(ModelSource.parse(str(checkpoint), [str(gemma)]))
    align_cpu_weights(pipe)
    pipe.set_progress_bar_config(disable=True)
    limits = family_of(pipe).limits(pipe, tiny=True)
    assert (limits.default_steps, limits.default_guidance) == (8, 1.0)
    assert (limits.min_steps, limits.max_steps) == (8, 8)
    assert list(limits.sigmas) + [0.0] == PUBLISHED_DISTILLED
    levels = []
    hooks = JobHooks(on_step=lambda *_: levels.append(pipe.scheduler.sigmas.tolist()) or False)
    body = {"prompt": "a fox in the snow", "width": 64, "height": 64, "num_frames": 9, "seed": 5}
    _, result = run_here(pipe, body, hooks=hooks)
    assert len(levels) == 8
    assert levels[0] == pytest.approx(PUBLISHED_DISTILLED, abs=1e-7)  # float32 levels
    assert result.latents.std() > 0
