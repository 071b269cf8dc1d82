"""Flux.1: a request's second prompt (`prompt_2`, T5's own, as ComfyUI's CLIPTextEncodeFlux
t5xxl) and Flux.1 schnell's preset. (World size 1 against `FluxPipeline` called directly and
the parallel layouts: the family contract, tests/families/test_family_contract.py.)

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest
import torch
from image_jobs import called_directly, preset_pipeline, run_image_job

from paradit.backend.contract import Limits
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.request import JobRequest

BODY = {"prompt": "a red fox", "width": 64, "height": 64, "num_inference_steps": 2,
        "guidance_scale": 1.0, "seed": 7}  # fmt: skip
"""tiny-flux (no guidance embedding, as schnell): cfg 1, one branch."""
SECOND = "a lighthouse on a cliff at dusk"


@pytest.fixture(scope="module")
def pipe():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield preset_pipeline("tiny-flux", 64)[0]
    finally:
        torch.set_num_threads(threads)


def test_prompt_2_is_t5s_prompt_as_diffusers_takes_it(pipe):
    """A job with `prompt_2` equals FluxPipeline called with prompt (CLIP-L) and prompt_2 (T5)
    byte for byte, and differs from the job without it (T5 then reads `prompt`)."""
    image, _, _ = run_image_job(pipe, {**BODY, "prompt_2": SECOND})
    assert image is not None
    direct = called_directly(pipe, BODY, prompt_2=SECOND, guidance_scale=1.0)
    assert image.tobytes() == direct[:1].tobytes()
    plain, _, _ = run_image_job(pipe, BODY)
    assert plain.tobytes() != image.tobytes()
    assert plain.tobytes() == called_directly(pipe, BODY, guidance_scale=1.0)[:1].tobytes()


@pytest.mark.fast
def test_prompt_2_only_where_the_model_has_a_second_prompt(pipe):
    from paradit.backend.models.families import family_of

    limits = family_of(pipe).limits(pipe, tiny=True)
    assert limits.second_prompt
    assert JobRequest.from_body({**BODY, "prompt_2": SECOND}, limits).prompt_2 == SECOND
    other = Limits(**{**limits.to_dict(), "second_prompt": False})
    with pytest.raises(ValueError, match="^prompt_2: this model has no second text encoder"):
        JobRequest.from_body({**BODY, "prompt_2": SECOND}, other)
    assert JobRequest.from_body(BODY, other).prompt_2 == ""


@pytest.mark.fast
def test_schnell_preset_is_devs_dit_without_the_guidance_embedding():
    """random:flux.1-schnell (what a flux1-schnell file runs on): FLUX.1-schnell's DiT
    (FLUX.1-dev's less its guidance embedder: 11.89B) and scheduler (static shift 1)."""
    schnell = build_random_preset("random:flux.1-schnell", device="meta")
    assert not schnell.transformer.config.guidance_embeds
    assert sum(p.numel() for p in schnell.transformer.parameters()) == 11_891_178_560
    config = schnell.scheduler.config
    assert (config.shift, config.use_dynamic_shifting) == (1.0, False)
