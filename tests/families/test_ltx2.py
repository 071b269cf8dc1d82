"""LTX-2 text to video with its audio track: the presets, limits and defaults, world size 1
against `LTX2Pipeline` called directly (video and audio), and the outputs: `audio.wav` and
the mp4's AAC track, probed with the ffmpeg binary. Image to video (`tiny-ltx2-i2v`): world
size 1 against `LTX2ImageToVideoPipeline` called directly, no image refused; `tiny-ltx2`
(`LTX2Pipeline`, as the hub's LTX-2 loads) with an image makes the same job on its
components. The step cache's decisions at world size 1. The memory plan at real size counts
what a split keeps whole (`gathered_video`). On 4, 3 and 2 ranks (CFG halves, uneven tokens
spread, image to video's per-token timesteps, the step cache's decisions and a rank deciding
alone, video and audio): the family contract's LTX-2 jobs (`ltx2/tiny_job.py`).

Jobs run as a rank runs them (the family encodes and prepares, the pipeline runs with a step
callback; rank 0 decodes the video and the audio), judged with `paradit verify`'s measure
(tools/equivalence.py).

Cost: about 5 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess

import numpy as np
import pytest
import torch
from diffusers.pipelines.ltx2.utils import apply_image_conditioning_crf
from image_jobs import run_here
from PIL import Image

from paradit.backend.audio import AUDIO_FILE, Audio
from paradit.backend.contract import IMAGE_TO_VIDEO, TEXT_TO_VIDEO
from paradit.backend.models.families import enable_tiles, family_for, family_of
from paradit.backend.models.families.ltx2 import PLAIN_CFG
from paradit.backend.models.families.ltx2.tiny_job import called_with_audio, one_cpu
from paradit.backend.models.presets import build_preset
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.parallel import Parallelized
from paradit.backend.parallel.plan import ParallelPlan
from paradit.backend.parallel.step_cache import (
    install_step_cache,
)
from paradit.backend.request import JobRequest
from paradit.backend.runtime.job import JobHooks
from paradit.backend.runtime.preview import Previewer
from paradit.backend.serving.outputs import to_uint8, write_outputs
from paradit.backend.tools.equivalence import (
    FLOAT32,
    IDENTICAL,
    compare,
)

TINY, TINY_I2V, RANDOM = "tiny-ltx2", "tiny-ltx2-i2v", "random:ltx-2"
RANDOM_I2V = "random:ltx-2-i2v"
CPU = torch.device("cpu")

# 192x128 px and 9 frames are 2 latent frames of 6 x 4 tokens (32x, patch 1), decoded in 2 x 3
# tiles; 9 frames at 24 fps are 0.375 s: 9 audio latent frames (25 a second), 33 mel frames,
# 7920 samples at 24 kHz.
GUIDED = {"prompt": "a drum solo in the rain", "negative_prompt": "silence", "seed": 5}
GUIDED.update(width=192, height=128, num_frames=9, num_inference_steps=2, guidance_scale=4.0)
UNGUIDED = {**GUIDED, "prompt": "ein Boot 🚤.", "seed": 9, "guidance_scale": 1.0}
UNGUIDED.update(width=96, height=96, num_frames=17)  # 3 latent frames of 3 x 3 tokens: 27
JOBS = {"guided": GUIDED, "unguided": UNGUIDED}
# The step cache on the unguided job over 4 steps. Random weights change a lot from step to
# step (the metric is 0.47-0.57 here): at 0.535 world size 1 skips step 2 (0.532), where
# rank 0's 14 of the 27 tokens alone would compute it (0.541), so a rank deciding alone
# fails the job.
CACHED = {**UNGUIDED, "num_inference_steps": 4}
CACHED["cache"] = {"method": "first-block", "threshold": 0.535}
# Guided, at 96x96 (18 tokens): the conditional row decides for the batch of 2; at 0.52 world
# size 1 skips steps 1 (0.509) and 3, where the unconditional half alone would compute (0.743).
CACHED_GUIDED = {**GUIDED, "width": 96, "height": 96, "num_inference_steps": 4}
CACHED_GUIDED["cache"] = {"method": "first-block", "threshold": 0.52}
SAMPLES = 7920


def _png(width: int, height: int) -> str:
    """A seeded start image as base64 PNG."""
    pixels = np.random.default_rng(3).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


# Unguided at 96x96, 17 frames: 27 video tokens, the first latent frame's 9 the image's
# (timestep 0); Ulysses 2 gives rank 0 those 9 and 5 more, rank 1 the other 13.
I2V = {**UNGUIDED, "prompt": "the boat sails off", "seed": 4, "image": _png(96, 96)}
I2V_GUIDED = {**I2V, "seed": 6, "guidance_scale": 4.0}  # CFG: one batch of 2, or CFG halves
# The smallest video: 64x64 px and 9 frames are 2 latent frames of 2 x 2 tokens, 8 in all,
# which 3 ranks split as 3 + 3 + 2 (unguided, one tile).
SMALL = {**UNGUIDED, "prompt": "waves on a pebble beach", "seed": 7}
SMALL.update(width=64, height=64, num_frames=9)
TILE = 128  # sample pixels: 4 latent pixels every 2; 96x96 fits one tile

# DiT parameters on the meta device: LTX-2's "19B" (video and audio streams).
LTX2_DIT = 18_876_174_592


def _pipeline(preset: str = TINY):
    """The preset as a rank holds it, with the test's VAE tiles, and its family."""
    pipe = build_preset(preset)
    pipe.set_progress_bar_config(disable=True)
    enable_tiles(pipe.vae, TILE, TILE)
    return pipe, family_of(pipe)


def _run(pipe, body: dict, *, parallel=None, alone=False, group=None, layouts=None):
    """One job through the engine's `run_on_rank`: the pipeline stops at the latents on every
    rank, the video decodes tile by tile (dealt to the ranks when there are several), the
    leader decodes the audio. (frames as uint8 and the audio on rank 0, else None; the steps
    the callback saw, or for a job with `cache` the step cache's record, its decisions agreed
    over the group when there is one (`alone`: each rank on its own tokens, the sabotage); the
    decode's tiles). `parallel`: what `parallelize` applied (its step cache switch and CFG
    halves); `group`: the ranks that run the job (None: all); `layouts` gets the job's
    sequence layout."""
    steps: list = []

    def on_step(step: int, _total: int) -> bool:
        steps.append(step - 1)
        return False  # never cancel

    hooks = JobHooks(on_step=on_step)
    try:
        frames, result = run_here(
            pipe, body, parallel=parallel, group=group, hooks=hooks, cache_alone=alone
        )
    finally:  # a job that fails has its layout too
        if layouts is not None:
            layouts.append(hooks.clock.notes["sequence_layout"])
    record = steps if result.cache is None else result.cache["steps"]
    return frames, result.audio, record, result.num_tiles


def _cached(pipe):
    """World size 1's `parallelize` with the step cache's hooks on the DiT (between jobs they
    call the blocks through)."""
    switch = install_step_cache(pipe.transformer)
    return Parallelized(ParallelPlan(1, 1, 1, False, False), [], [], [switch])


@pytest.fixture(scope="module")
def references() -> dict:
    """World size 1, one thread: every job's (frames, audio, steps) and its DiT calls."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipe, family = _pipeline()
        calls = []
        pipe.transformer.register_forward_hook(lambda *_args: calls.append(1))
        outputs = {}
        for label, body in JOBS.items():
            calls.clear()
            outputs[label] = (*_run(pipe, body), len(calls))
        outputs["t2v_with_image"] = _run(pipe, I2V)
        # the step cache's hooks on the same DiT (between jobs they call the blocks through)
        cached = _cached(pipe)
        outputs["cached"] = _run(pipe, CACHED, parallel=cached)
        outputs["cached guided"] = _run(pipe, CACHED_GUIDED, parallel=cached)
        i2v_pipe, _ = _pipeline(TINY_I2V)
        outputs["i2v"] = _run(i2v_pipe, I2V)
    finally:
        torch.set_num_threads(threads)
    return {"outputs": outputs, "pipe": pipe, "i2v_pipe": i2v_pipe}


# -- presets, limits ---------------------------------------------------------------------------


def test_preset_structure_and_limits(references):
    pipe = references["pipe"]
    assert type(pipe).__name__ == "LTX2Pipeline"
    assert type(pipe.text_encoder).__name__ == "Gemma3TextModel"
    text_config = pipe.text_encoder.config
    assert pipe.connectors.config.text_proj_in_factor == text_config.num_hidden_layers + 1
    assert pipe.connectors.config.caption_channels == text_config.hidden_size
    assert pipe.vae_spatial_compression_ratio == 32 and pipe.vae_temporal_compression_ratio == 8
    assert pipe.vocoder.config.output_sampling_rate == 24000
    family = family_of(pipe)
    assert family.name == "ltx2-t2v" and family_for("LTX2Pipeline") is family
    assert family.batched_cfg and family.step_cache
    limits = family.limits(pipe, tiny=True)
    assert limits.task == TEXT_TO_VIDEO and (limits.size_multiple, limits.fps) == (32, 24)
    request = JobRequest.from_body({"prompt": "x"}, limits)
    assert (request.width, request.num_frames, request.num_inference_steps) == (64, 9, 4)
    assert request.guidance_scale == 4.0 and request.uses_cfg
    with pytest.raises(ValueError, match="multiple of 32, got 48"):
        JobRequest.from_body({"prompt": "x", "width": 48}, limits)
    with pytest.raises(ValueError, match="between 64 and 2048"):  # 2 latent rows at least
        JobRequest.from_body({"prompt": "x", "height": 32}, limits)
    # 160 px with tiles of 128 every 64: the third tile would be one latent pixel wide, which
    # the decoder cannot pad; refused before the steps, on every rank alike
    narrow = JobRequest.from_body({"prompt": "x", "width": 160, "height": 64}, limits)
    with pytest.raises(ValueError, match="one latent pixel at 160x64"):
        family.prepare(pipe, narrow, {"prompt_embeds": torch.zeros(1, 32, 96)})
    # previews: the packed step latents' first latent frame (3 x 2 tokens) through the map
    # fitted to this VAE
    previewer = Previewer.fit(family, pipe)
    assert previewer is not None
    packed = torch.randn(1, 2 * 2 * 3, 8, generator=torch.Generator().manual_seed(1))
    png = previewer.png(packed, JobRequest.from_body({"prompt": "x", "width": 96}, limits))
    with Image.open(io.BytesIO(png)) as image:
        assert image.size == (3 * 8, 2 * 8)
    with pytest.raises(ValueError, match="8k\\+1"):
        JobRequest.from_body({"prompt": "x", "num_frames": 5}, limits)


@pytest.mark.fast
def test_random_preset_counts_the_published_parameters():
    pipe = build_random_preset(RANDOM, device="meta")
    assert sum(p.numel() for p in pipe.transformer.parameters()) == LTX2_DIT
    config = pipe.transformer.config
    assert (config.num_layers, config.num_attention_heads, config.audio_num_attention_heads) == (
        48,
        32,
        32,
    )
    text_config = pipe.text_encoder.config
    assert (text_config.hidden_size, text_config.num_hidden_layers + 1) == (3840, 49)
    assert pipe.connectors.config.text_proj_in_factor == 49
    assert len(pipe.tokenizer) == text_config.vocab_size
    family = family_of(pipe)
    limits = family.limits(pipe, tiny=False)
    assert (limits.default_width, limits.default_height, limits.default_frames) == (768, 512, 121)
    assert (limits.fps, limits.default_steps, limits.default_guidance) == (24, 40, 4.0)
    assert limits.tokens(768, 512, 121) == 16 * 24 * 16
    assert family.text_tokens(pipe) == 1024


@pytest.mark.fast
def test_random_image_to_video_preset_is_ltx_2_under_its_pipeline():
    from paradit.backend.models.random_presets import random_preset_spec

    spec, t2v = random_preset_spec(RANDOM_I2V), random_preset_spec(RANDOM)
    assert spec["pipeline"] == "LTX2ImageToVideoPipeline"
    assert {**spec, "pipeline": t2v["pipeline"]} == t2v
    assert family_for(spec["pipeline"]).name == "ltx2-i2v"


@pytest.mark.fast
def test_plan_at_real_size():
    """`paradit plan`: the model card's 768x512 video of 121 frames (16 latent frames of
    16 x 24 tokens, 126 audio tokens) on 4 GPUs of 80 GB: CFG x Ulysses, the DiT sharded in
    bf16, the decode split; every rank holds the VAE with the connectors, the audio VAE and
    the vocoder. Under the split each rank also holds the whole video where the audio attends
    to it (`gathered_video`, with its reason)."""
    from paradit.backend.tools.plan import estimate

    report = estimate(RANDOM, 4, 80, 768, 512, 121)
    assert report["tokens"] == 16 * 16 * 24 and report["fits"]
    weights = report["memory"]["weights_bytes"]
    assert weights["transformer"] == LTX2_DIT * 2
    assert report["plan"]["modes"] == ["cfg", "ulysses", "fsdp", "vae"]
    job = report["memory"]["reference_job"]
    parts = job["parts_bytes"]
    others = ("vae", "connectors", "audio_vae", "vocoder")
    assert parts["vae"] == sum(weights[name] for name in others)
    assert parts["activations"] > 0 and parts["decode"] > 0

    # CFG 2 x Ulysses 2: a rank's share is 8 of the 16 rows, one CFG row (batch 1). The
    # video stream is 32 heads of 128 wide, the audio stream (and the audio-video rotary
    # table) 32 of 64; rotary tables are float32, activations bf16; 128 output channels.
    whole, share = 16 * 16 * 24, 16 * 8 * 24
    video, audio, bf16, f32 = 32 * 128, 32 * 64, 2, 4
    # the rope modules' whole tables (cosine, sine) stay alive beyond the rank's share
    tables = 2 * (whole - share) * (video + audio) * f32
    # in every block: the gathered video tokens and their key tables (cosine, sine), the
    # keys and values of every video token; at the end the gathered output
    gather = whole * video * bf16 + 2 * whole * audio * f32 + 2 * whole * audio * bf16
    output = whole * 128 * bf16
    least = tables + gather + output
    # ... and the rotary embedding's float32 temporaries of the keys: at most 4 copies
    most = least + 4 * whole * audio * f32
    assert least < parts["gathered_video"] <= most, (least, parts["gathered_video"], most)
    counted = parts["dit_steps"] + parts["activations"] + parts["gathered_video"] + parts["vae"]
    assert job["predicted_bytes"]["other_ranks"] >= counted
    (reason,) = (r for r in job["reasons"] if "gathered_video" in r)
    assert "all 6144 video tokens" in reason and f"({tables / 1024**3:.2f} GiB more" in reason


# -- world size 1 against diffusers called directly ----------------------------------------------


def test_world_size_1_equals_diffusers_called_directly(references):
    """`LTX2Pipeline` as a user calls it (prompt, negative prompt, plain CFG; the VAE's own
    tiled decode) gives the same video and the same audio waveform, bit for bit; the step
    callback ran once per step."""
    outputs, pipe = references["outputs"], references["pipe"]
    assert (outputs["guided"][3], outputs["unguided"][3]) == (6, 1)  # VAE tiles
    assert (outputs["guided"][4], outputs["unguided"][4]) == (2, 2)  # CFG is one batch of 2
    assert outputs["guided"][2] == outputs["unguided"][2] == [0, 1]
    # the cached job (LTX-2's block registered for the hooks: video and audio carried through
    # a skipped step) skipped step 2 and computed the others
    record = outputs["cached"][2]
    assert [step["computed"] for step in record] == [True, True, False, True], record
    record = outputs["cached guided"][2]
    assert [step["computed"] for step in record] == [True, False, True, False], record
    assert outputs["cached"][1].waveform.shape == outputs["unguided"][1].waveform.shape
    torch.set_num_threads(1)
    for label, body in JOBS.items():
        video, audio = called_with_audio(pipe, body)
        frames, track = outputs[label][0], outputs[label][1]
        result = compare(frames, to_uint8(np.asarray(video[0])), FLOAT32)
        assert result.verdict == IDENTICAL, (label, result.overall)
        assert track.sample_rate == 24000 and track.waveform.shape[0] == 2
        assert np.array_equal(track.waveform, audio[0].numpy()), label
    assert outputs["guided"][1].waveform.shape == (2, SAMPLES)
    # 17 frames: 0.708 s, 18 audio latent frames, 69 mel frames of 240 samples
    assert outputs["unguided"][1].waveform.shape == (2, 69 * 240)


def test_image_to_video_equals_diffusers_called_directly(references):
    """`tiny-ltx2-i2v`: `LTX2ImageToVideoPipeline` as a user calls it with the same image
    (re-compressed at the model's default CRF, 33, on one CPU: `one_cpu`) gives the same
    video and audio, bit for bit; the first frame follows the image; a request without an
    image is refused, one with an image gets the model's CRF."""
    pipe = references["i2v_pipe"]
    family = family_of(pipe)
    assert type(pipe).__name__ == "LTX2ImageToVideoPipeline" and family.name == "ltx2-i2v"
    limits = family.limits(pipe, tiny=True)
    assert limits.task == IMAGE_TO_VIDEO and limits.needs_image
    with pytest.raises(ValueError, match="image is required for image-to-video"):
        JobRequest.from_body({k: v for k, v in I2V.items() if k != "image"}, limits)
    image = Image.open(io.BytesIO(base64.b64decode(I2V["image"]))).convert("RGB")
    assert limits.image_crf == 33
    assert JobRequest.from_body(I2V, limits).image_crf == 33
    call = dict(image=image, prompt=I2V["prompt"], height=96, width=96)
    call.update(num_frames=17, frame_rate=24.0, num_inference_steps=2, guidance_scale=1.0)
    call.update(audio_guidance_scale=1.0, use_cross_timestep=False, max_sequence_length=32)
    torch.set_num_threads(1)
    with torch.no_grad(), one_cpu():
        video, audio = pipe(
            **call,
            **PLAIN_CFG,
            generator=torch.Generator().manual_seed(I2V["seed"]),
            output_type="np",
            return_dict=False,
        )
        latents = pipe(
            **call,
            **PLAIN_CFG,
            generator=torch.Generator().manual_seed(I2V["seed"]),
            output_type="latent",
            return_dict=False,
        )[0]
        squeezed = Image.fromarray(apply_image_conditioning_crf(np.asarray(image), 33))
        pixels = pipe.video_processor.preprocess(squeezed, height=96, width=96)
        encoded = pipe.vae.encode(pixels[:, :, None]).latent_dist.mode()
    frames, track = references["outputs"]["i2v"][:2]
    result = compare(frames, to_uint8(np.asarray(video[0])), FLOAT32)
    assert result.verdict == IDENTICAL, result.overall
    assert np.array_equal(track.waveform, audio[0].numpy())
    assert track.waveform.shape == (2, 69 * 240)
    # the first latent frame is the image's, never stepped (normalised and back: rounding)
    assert latents.shape == (1, 8, 3, 3, 3)
    assert torch.allclose(latents[:, :, 0], encoded[:, :, 0], atol=1e-5)
    assert (latents[:, :, 1] - encoded[:, :, 0]).abs().max() > 0.1


def test_text_to_video_model_takes_an_image(references):
    """`LTX2Pipeline` loaded (the hub's `Lightricks/LTX-2`): `GET /v1/info` lists both tasks, a
    job with an image runs `LTX2ImageToVideoPipeline` on the loaded components and equals
    `tiny-ltx2-i2v`'s job bit for bit (video and audio); a job without one keeps the pipeline."""
    from paradit.backend.contract import model_tasks

    pipe = references["pipe"]
    family = family_of(pipe)
    limits = family.limits(pipe, tiny=True)
    assert limits.accepts_image and not limits.needs_image
    assert model_tasks(limits.task, limits.accepts_image) == (TEXT_TO_VIDEO, IMAGE_TO_VIDEO)
    i2v_limits = family_of(references["i2v_pipe"]).limits(references["i2v_pipe"], tiny=True)
    assert not i2v_limits.accepts_image
    runner = family.pipeline_for_job(pipe, JobRequest.from_body(I2V, limits))
    assert type(runner).__name__ == "LTX2ImageToVideoPipeline"
    assert runner.transformer is pipe.transformer and runner.vae is pipe.vae
    assert family.pipeline_for_job(pipe, JobRequest.from_body(UNGUIDED, limits)) is pipe
    (frames, track, steps, tiles), (i2v_frames, i2v_track, i2v_steps, i2v_tiles) = (
        references["outputs"]["t2v_with_image"],
        references["outputs"]["i2v"],
    )
    assert np.array_equal(frames, i2v_frames) and frames.shape == (17, 96, 96, 3)
    assert np.array_equal(track.waveform, i2v_track.waveform)
    assert (steps, tiles) == (i2v_steps, i2v_tiles) == ([0, 1], 1)
    # the image conditions the video: without it, the same job differs
    assert not np.array_equal(frames, references["outputs"]["unguided"][0])


# -- the outputs: audio.wav and the mp4's AAC track -------------------------------------------


def test_outputs_carry_the_audio_track(references, tmp_path):
    """`video.mp4` gets an AAC track of the waveform's length (probed with ffmpeg, decoded
    back to samples); `audio.wav` holds the samples as 16-bit PCM; job.json's record."""
    import wave

    import imageio_ffmpeg

    frames, audio = references["outputs"]["guided"][:2]
    files = write_outputs(tmp_path, frames, 24, audio)
    assert files[:2] == ["video.mp4", AUDIO_FILE] and len(files) == 2 + len(frames)
    assert not (tmp_path / "image.png").exists()  # the layout: image.png only for one frame
    silent, still = tmp_path / "silent", tmp_path / "still"  # the same writer without audio
    assert write_outputs(silent, frames, 24)[0] == "video.mp4"
    assert sorted(p.name for p in silent.iterdir()) == ["frames", "video.mp4"]
    assert write_outputs(still, frames[:1], 24) == ["image.png", "frames/000000.png"]
    assert sorted(p.name for p in still.iterdir()) == ["frames", "image.png"]
    with wave.open(str(tmp_path / AUDIO_FILE)) as wav:
        assert (wav.getnchannels(), wav.getframerate(), wav.getsampwidth()) == (2, 24000, 2)
        pcm = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
    assert np.array_equal(pcm.reshape(-1, 2), audio.pcm16())
    assert json.loads(json.dumps(audio.record())) == {
        "sample_rate": 24000,
        "channels": 2,
        "codec": "aac",
        "seconds": round(SAMPLES / 24000, 4),
        "file": AUDIO_FILE,
    }

    ffmpeg = imageio_ffmpeg.get_ffmpeg_exe()
    mp4 = str(tmp_path / "video.mp4")
    probe = subprocess.run([ffmpeg, "-hide_banner", "-i", mp4], capture_output=True, text=True)
    streams = re.findall(r"Stream #0:\d.*?: (Video|Audio): (\w+)(.*)", probe.stderr)
    assert [(kind, codec) for kind, codec, _ in streams] == [("Video", "h264"), ("Audio", "aac")]
    assert "24000 Hz, stereo" in streams[1][2]
    decoded = subprocess.run(
        [ffmpeg, "-v", "error", "-i", mp4, "-map", "0:a:0", "-f", "s16le", "-ac", "2", "-"],
        capture_output=True,
        check=True,
    ).stdout
    samples = len(decoded) // 4  # 2 channels of 2 bytes
    assert abs(samples - SAMPLES) <= 1024, samples  # one AAC frame at most
    # the frames are still the video's: 9 of them
    count = subprocess.run(
        [ffmpeg, "-v", "error", "-i", mp4, "-map", "0:v:0", "-f", "null", "-"],
        capture_output=True,
        text=True,
    )
    assert count.returncode == 0


@pytest.mark.fast
def test_audio_refuses_what_is_not_a_track():
    with pytest.raises(ValueError, match="channels, samples"):
        Audio(np.zeros(5, dtype=np.float32), 24000)
    with pytest.raises(ValueError, match="sample rate"):
        Audio(np.zeros((2, 5), dtype=np.float32), 0)
    loud = Audio(np.array([[2.0, -2.0, 0.5]], dtype=np.float32), 8000)
    assert loud.pcm16().tolist() == [[32767], [-32767], [16384]]


@pytest.mark.fast
def test_the_wav_reaches_comfyui_and_verify_as_written(tmp_path):
    """The nodes read the backend's `audio.wav` back into ComfyUI's AUDIO waveform
    (float32, -1..1); `paradit verify` compares two tracks' 16-bit samples."""
    from paradit.backend.audio import write_wav
    from paradit.backend.tools.verify import compare_audio
    from paradit.nodes.run import wav_track

    rng = np.random.default_rng(0)
    audio = Audio(rng.uniform(-1, 1, (2, 480)).astype(np.float32), 24000)
    write_wav(tmp_path / AUDIO_FILE, audio)
    data = (tmp_path / AUDIO_FILE).read_bytes()
    waveform, rate = wav_track(data)
    assert rate == 24000 and waveform.shape == (2, 480) and waveform.dtype == np.float32
    assert np.abs(waveform - audio.waveform).max() <= 0.5 / 32767 + 1e-7  # 16-bit rounding
    assert compare_audio(data, data) == {
        "identical": True, "max_abs": 0, "snr_db": float("inf"), "samples": 480, "channels": 2
    }  # fmt: skip
    nudged = Audio(audio.waveform + 2 / 32767, 24000)
    write_wav(tmp_path / "nudged.wav", nudged)
    near = compare_audio(data, (tmp_path / "nudged.wav").read_bytes())
    assert not near["identical"] and near["max_abs"] <= 3 and near["snr_db"] > 70
    assert compare_audio(None, None) is None
    assert compare_audio(data, None)["identical"] is False
