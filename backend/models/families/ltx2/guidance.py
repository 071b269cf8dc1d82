"""LTX-2's guidance terms beside `guidance_scale` (a request's `guidance_terms`), as diffusers'
`LTX2Pipeline` takes them, and the pipeline arguments a job passes.

Each step the pipeline runs the CFG pair (one batch of 2) and then, at batch 1 on the
conditional inputs:

- spatio-temporal guidance (`stg_scale`, `audio_stg_scale` > 0): one DiT call with the
  self-attention of `spatio_temporal_guidance_blocks` replaced by its value projection (the
  perturbable attention of LTX-2.3 and later, `perturbed_attn`; LTX-2.0's DiT in diffusers
  has none, so it is not offered there: the call would change nothing);
- modality-isolation guidance (`modality_scale`, `audio_modality_scale` > 1): one DiT call
  with the audio-to-video and video-to-audio attention off.

It adds every term's delta to the conditional prediction (as x0): CFG's (scale - 1) x (cond -
uncond), STG's scale x (cond - perturbed), modality's (scale - 1) x (cond - isolated); then
rescales toward the conditional prediction's spread (`guidance_rescale`) and turns the
result back into a velocity. The audio terms left out take the video's (the pipeline reads
None and 0 that way; `audio_guidance_scale` takes `guidance_scale`).

paradit's defaults are "off" (what the adapter ran before the field existed, as the LTX-2
model card runs it): STG 0, modality 1, rescale 0, the audio at the video's scale.
"""

from __future__ import annotations

from typing import Any

from ....contract import GuidanceTerm
from ....guidance_terms import effective
from ....request import JobRequest

STG_BLOCK = 28
"""diffusers' default block for STG (LTX-2.3's 48-block DiT); a smaller DiT its last block."""


def guidance_terms(transformer: Any) -> tuple[GuidanceTerm, ...]:
    """The terms `transformer` (an `LTX2VideoTransformer3DModel`) runs."""
    config = transformer.config
    last = int(config.num_layers) - 1
    stg: tuple[GuidanceTerm, ...] = ()
    if getattr(config, "perturbed_attn", False):
        stg = (
            GuidanceTerm("stg_scale", 0.0, "spatio-temporal guidance (video)", extra_pass=True),
            GuidanceTerm(
                "audio_stg_scale", None, "the audio's", follows="stg_scale", extra_pass=True
            ),
            GuidanceTerm(
                "spatio_temporal_guidance_blocks",
                (min(STG_BLOCK, last),),
                "the blocks whose self-attention STG skips",
                high=last,
            ),
        )
    return (
        *stg,
        GuidanceTerm(
            "modality_scale", 1.0, "modality-isolation guidance (video)", low=1.0, extra_pass=True
        ),
        GuidanceTerm(
            "audio_modality_scale",
            None,
            "the audio's",
            low=1.0,
            follows="modality_scale",
            extra_pass=True,
        ),
        GuidanceTerm("guidance_rescale", 0.0, "rescale toward the conditional (video)", high=1.0),
        GuidanceTerm(
            "audio_guidance_rescale", None, "the audio's", high=1.0, follows="guidance_rescale"
        ),
        GuidanceTerm(
            "audio_guidance_scale", None, "the audio's CFG scale", follows="guidance_scale"
        ),
    )


PLAIN_CFG = {
    "stg_scale": 0.0,
    "audio_stg_scale": 0.0,
    "modality_scale": 1.0,
    "audio_modality_scale": 1.0,
    "guidance_rescale": 0.0,
    "audio_guidance_rescale": 0.0,
}
"""The terms off, under diffusers' names (its own defaults are LTX-2.3's: STG 1, modality 3,
rescale 0.7): what a model without a term runs."""


def audio_guidance(pipe: Any, request: JobRequest) -> float:
    """The audio stream's CFG scale in this job."""
    fields = {"guidance_scale": request.guidance_scale}
    terms = guidance_terms(pipe.transformer)
    return float(effective("audio_guidance_scale", request.guidance_terms, terms, fields))


def pipeline_kwargs(pipe: Any, request: JobRequest, cfg: bool) -> dict[str, Any]:
    """The pipeline's guidance arguments for `request` (`cfg`: the negative branch runs)."""
    fields = {"guidance_scale": request.guidance_scale}
    terms = guidance_terms(pipe.transformer)
    given = request.guidance_terms
    values = {term.name: effective(term.name, given, terms, fields) for term in terms}
    values["guidance_scale"] = request.guidance_scale if cfg else 1.0
    values["audio_guidance_scale"] = values["audio_guidance_scale"] if cfg else 1.0
    return {**PLAIN_CFG, **values}
