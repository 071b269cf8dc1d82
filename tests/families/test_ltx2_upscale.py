"""LTX-2's two-stage job (the request's `upscale`, `serve --upscaler`): the request's rules and
refusals, the upscaler file as Lightricks ships it (keys and configuration read from it), world
size 1 against diffusers called directly (`LTX2Pipeline` stage 1 -> `LTX2LatentUpsamplePipeline`
-> `LTX2Pipeline` stage 2 on the distilled scheduler settings, one generator) byte for byte,
and a stage-2 LoRA applied to stage 2 only.

Served: `paradit serve --upscaler FILE` on 2 ranks runs a two-stage job through HTTP, job.json
records it, its progress counts both stages (`paradit generate --upscaler`: test_cli.py).

Cost: about 5 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from comfy_files import ltx2_upscaler_file
from lora_files import peft_lora
from safetensors.torch import save_file

from paradit.backend.contract import TEXT_TO_VIDEO, Limits
from paradit.backend.lora import LoraLibrary, LoraPatcher
from paradit.backend.models.families import family_of
from paradit.backend.models.families.ltx2 import upscaler
from paradit.backend.models.families.ltx2.tiny_job import I2V, two_stage_called
from paradit.backend.models.presets import build_preset
from paradit.backend.request import JobRequest
from paradit.backend.runtime.job import JobHooks, RankModel, encode, job_message, run_on_rank
from paradit.backend.upscale import STAGE_2_SIGMAS, UpscaleSettings

BODY = {"prompt": "a drum solo in the rain", "negative_prompt": "silence", "seed": 5}
BODY.update(width=128, height=128, num_frames=9, num_inference_steps=2, guidance_scale=4.0)
UPSCALE = {"sigmas": [0.9, 0.5]}
LIMITS = Limits(
    TEXT_TO_VIDEO, 32, 64, 2048, 8, 481, samplers=("euler",), two_stage=True, upscale_factors=(2,)
)


@pytest.mark.fast
def test_defaults_are_diffusers_stage_2_levels():
    from diffusers.pipelines.ltx2.utils import STAGE_2_DISTILLED_SIGMA_VALUES

    settings = UpscaleSettings.parse({"factor": 2})
    assert list(settings.sigmas) == STAGE_2_DISTILLED_SIGMA_VALUES == list(STAGE_2_SIGMAS)
    assert (settings.guidance_scale, settings.sampler, settings.loras) == (1.0, "default", ())
    # ComfyUI's ManualSigmas end in 0: taken, the 0 dropped
    assert UpscaleSettings.parse({"sigmas": [0.8, 0.4, 0]}).sigmas == (0.8, 0.4)
    request = JobRequest.from_body({**BODY, "upscale": {"factor": 2}}, LIMITS)
    assert request.upscale["sigmas"] == STAGE_2_DISTILLED_SIGMA_VALUES
    assert request.total_steps == 2 + 3


@pytest.mark.fast
@pytest.mark.parametrize(
    ("limits", "body", "says"),
    [
        (dataclasses.replace(LIMITS, two_stage=False), {}, "runs one stage"),
        (dataclasses.replace(LIMITS, upscale_factors=()), {}, "--upscaler FILE"),
        (LIMITS, {"upscale": {"sigmas": [0.5, 0.9]}}, "strictly decreasing"),
        (LIMITS, {"upscale": {"sigmas": [1.5, 0.9]}}, "in (0, 1]"),
        (LIMITS, {"upscale": {"sigmas": [0.9, 0, 0.1]}}, "in (0, 1]"),
        (LIMITS, {"upscale": {"factor": 4}}, "upscale.factor must be one"),
        (LIMITS, {"upscale": {"sampler": "lcm"}}, "upscale.sampler"),
        (LIMITS, {"upscale": {"loras": [{"strength": 1}]}}, "upscale.loras[0].name"),
        (LIMITS, {"width": 96}, "multiples of 64"),
        (LIMITS, {"cache": {"method": "first-block"}}, "cache is not run with upscale"),
    ],
)
def test_refusals_name_the_rule(limits, body, says):
    limits = dataclasses.replace(limits, step_cache=True)
    with pytest.raises(ValueError, match=None) as refused:
        JobRequest.from_body({**BODY, "upscale": {"factor": 2}, **body}, limits)
    assert says in str(refused.value)


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    pipe = build_preset("tiny-ltx2")
    pipe.set_progress_bar_config(disable=True)
    return pipe, upscaler.tiny(0, pipe.vae.config.latent_channels)


def test_upscaler_file_with_lightricks_keys(tiny, tmp_path):
    pipe, module = tiny
    state = {k: v.contiguous() for k, v in module.state_dict().items()}
    state.pop("upsampler.blur_down.kernel")  # a fixed buffer a file may leave out
    save_file(state, str(tmp_path / "ltx-2-spatial-upscaler-x2-1.0.safetensors"))
    loaded = family_of(pipe).load_upsampler(
        str(tmp_path / "ltx-2-spatial-upscaler-x2-1.0.safetensors"), torch.float32
    )
    assert loaded.factors == (2,)
    assert dict(loaded.module.config) | {"_use_default_values": None} == dict(module.config) | {
        "_use_default_values": None
    }
    x = torch.randn(1, pipe.vae.config.latent_channels, 2, 2, 3)
    with torch.no_grad():
        assert torch.equal(loaded.module(x), module(x))
    save_file({"x.weight": torch.zeros(1)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(ValueError, match="not an LTX-2 latent upscaler"):
        family_of(pipe).load_upsampler(str(tmp_path / "other.safetensors"), torch.float32)


def _model(pipe, module, loras=None) -> RankModel:
    model = RankModel.here(pipe)
    model.limits = dataclasses.replace(model.limits, upscale_factors=(2,))
    model.upsampler, model.loras = module, loras
    return model


def _paradit(model: RankModel, body: dict, upscale_loras=()):
    request = JobRequest.from_body(body, model.limits)
    tensors = encode(model, request)
    steps: list[tuple[int, int]] = []
    hooks = JobHooks(tensors, on_step=lambda step, total: steps.append((step, total)) or False)
    message = job_message("t", request, tensors, upscale_loras=list(upscale_loras))
    return run_on_rank(model, message, hooks), steps


def _diffusers(pipe, module, body, stage_2=None):
    """Stage 1, the upsample and stage 2 as diffusers' LTX-2 docs chain them, one generator
    (`ltx2.tiny_job.two_stage_called`); `stage_2`: a context (the LoRA) around stage 2 only.
    (video latents, audio latents)."""
    return two_stage_called(pipe, body, module, stage_2)


def test_world_size_1_equals_diffusers_byte_for_byte(tiny):
    pipe, module = tiny
    result, steps = _paradit(_model(pipe, module), {**BODY, "upscale": UPSCALE})
    video, audio = _diffusers(pipe, module, {**BODY, "upscale": UPSCALE})
    assert torch.equal(result.outputs[0], video) and torch.equal(result.outputs[1], audio)
    assert result.frames.shape == (9, 128, 128, 3)
    assert steps == [(1, 4), (2, 4), (3, 4), (4, 4)]  # both stages' steps, one count
    record = result.clock.notes["upscale"]
    assert record["stage_1"] == {"width": 64, "height": 64, "steps": 2}
    assert record["stage_2_sampling"]["sigmas"] == pytest.approx([0.9, 0.5, 0.0])


def test_stage_2_lora_applies_to_stage_2_only(tiny, tmp_path):
    pipe, module = tiny
    peft_lora(tmp_path / "distilled.safetensors", pipe.transformer, ("attn1.to_q",), seed=3)
    patcher = LoraPatcher(
        LoraLibrary((str(tmp_path),)), type(pipe), {"transformer": pipe.transformer}
    )
    lora = patcher.resolve([{"name": "distilled.safetensors", "strength": 1.0}])
    body = {**BODY, "upscale": {**UPSCALE, "loras": [{"name": "distilled.safetensors"}]}}
    result, _ = _paradit(_model(pipe, module, patcher), body, lora)
    video, _ = _diffusers(pipe, module, body, stage_2=patcher.applied(lora))
    plain, _ = _diffusers(pipe, module, {**BODY, "upscale": UPSCALE})
    assert not torch.equal(video, plain)  # the LoRA changes stage 2
    assert torch.equal(result.outputs[0], video)  # and only stage 2 (not stage 1 too)
    assert np.isfinite(result.frames).all()


def test_image_to_video_conditions_both_stages(tiny):
    """With an image: `LTX2ImageToVideoPipeline` in both stages, the image at stage 1's size
    conditioning stage 1 and, at the final size, replacing the upscaled first latent frame
    for stage 2 (Lightricks' two-stage pipelines, ComfyUI's `LTXVImgToVideoInplace` after
    the upscale): byte for byte diffusers' chain with that replacement; the first frame's
    latent is the image's, and differs from the upscaled one's."""
    pipe, module = tiny
    body = {**BODY, "image": I2V["image"], "upscale": UPSCALE}  # a 96x96 image, resized
    result, steps = _paradit(_model(pipe, module), body)
    video, audio = _diffusers(pipe, module, body)
    assert torch.equal(result.outputs[0], video) and torch.equal(result.outputs[1], audio)
    assert steps == [(1, 4), (2, 4), (3, 4), (4, 4)]
    text, _ = _paradit(_model(pipe, module), {**BODY, "upscale": UPSCALE})
    assert not torch.equal(result.outputs[0][:, :, 0], text.outputs[0][:, :, 0])
    assert result.frames.shape == (9, 128, 128, 3) and np.isfinite(result.frames).all()


def test_served_two_stage_job_through_http(backends, tmp_path_factory):
    """`serve --upscaler FILE` on 2 ranks (stage 1 CFG parallel, stage 2 spread): /v1/info
    gives the factor, the job's progress ends at both stages' steps, job.json records the
    upscale as it ran (defaults filled in) with stage 1's size and each stage's time; a
    backend without the upscaler refuses the field naming the flag."""
    from conftest import run_job

    from paradit.backend.client.http import BackendError

    path = ltx2_upscaler_file(tmp_path_factory.mktemp("upscaler"), 8)  # tiny-ltx2's 8 channels
    client = backends.get("tiny-ltx2", 2, "--upscaler", path)
    assert client.info()["limits"]["upscale_factors"] == [2]
    job, frames = run_job(client, {**BODY, "upscale": UPSCALE})
    assert len(frames) == 9 and job["progress"] == {"step": 4, "total": 4}
    record = client.record(job["id"])
    assert record["request"]["upscale"] == {
        "factor": 2, "sigmas": [0.9, 0.5], "sampler": "default", "guidance_scale": 1.0,
        "loras": [],
    }  # fmt: skip
    upscale = record["upscale"]
    assert upscale["stage_1"] == {"width": 64, "height": 64, "steps": 2}
    assert all(upscale[k] > 0 for k in ("stage_1_s", "upsample_s", "stage_2_s")), upscale
    assert upscale["stage_1_sequence_layout"] != record["sequence_layout"]  # CFG, then spread
    with pytest.raises(BackendError) as refused:
        backends.get("tiny-ltx2", 2).submit({**BODY, "upscale": UPSCALE})
    assert refused.value.status == 422 and "--upscaler FILE" in str(refused.value)
