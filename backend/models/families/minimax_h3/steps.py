"""H3's denoising as paradit runs it: diffusers' own blocks (`MiniMaxH3CoreDenoiseStep`,
`MiniMaxH3FL2VACoreDenoiseStep`: layout, noise, per-row timesteps, the loop, unpacking)
with one block added to the loop, after the scheduler step, that calls the job's step
callback; the text encoder and the decode run outside (rank 0 encodes, the job decodes).
`DenoiseRunner` is what `pipeline_for_job` hands the job: called as the regular pipelines
are (`output_type="latent"`, `callback_on_step_end`, `return_dict=False`), it returns the
video and the audio latents."""

from __future__ import annotations

from typing import Any

import torch

DENOISE_OUTPUTS = ("latents", "audio_latents")
GEOMETRY = ("vae", "audio_vae")
"""The components `MiniMaxH3ModularPipeline`'s geometry (latent channels, compression, audio
rate) is read from: without them it falls back to the released model's numbers."""


def _step_end_block() -> Any:
    from diffusers.modular_pipelines.modular_pipeline import ModularPipelineBlocks
    from diffusers.modular_pipelines.modular_pipeline_utils import InputParam

    class StepEnd(ModularPipelineBlocks):
        """Calls `callback_on_step_end(pipeline, step, t, {"latents": rows})` after a step."""

        model_name = "minimax-h3"

        @property
        def description(self) -> str:
            return "Calls the job's step callback with the packed video rows after each step."

        @property
        def inputs(self) -> list[Any]:
            return [InputParam(name="callback_on_step_end", default=None)]

        def __call__(self, components: Any, block_state: Any, i: int, t: torch.Tensor):
            callback = block_state.callback_on_step_end
            if callback is not None:
                callback(components, i, t, {"latents": block_state.latents})
            return components, block_state

    return StepEnd


def _geometry_block() -> Any:
    from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio
    from diffusers.modular_pipelines.modular_pipeline import ModularPipelineBlocks
    from diffusers.modular_pipelines.modular_pipeline_utils import ComponentSpec

    class Geometry(ModularPipelineBlocks):
        """Runs nothing: declares the VAEs the pipeline's geometry reads (`GEOMETRY`)."""

        model_name = "minimax-h3"

        @property
        def description(self) -> str:
            return "Holds the VAEs whose configs give the latent geometry; runs nothing."

        @property
        def expected_components(self) -> list[Any]:
            return [
                ComponentSpec("vae", AutoencoderKLMiniMaxH3),
                ComponentSpec("audio_vae", AutoencoderKLMiniMaxH3Audio),
            ]

        def __call__(self, components: Any, state: Any):
            return components, state

    return Geometry


def _comfyui_condition_block(seed: int) -> Any:
    """diffusers' condition-noising block with the keyframes' noise ComfyUI's
    (`comfyui_prep.condition_rows`, seeded with the job's `seed`); the request's generator
    still makes diffusers' draws there, unused, so the rest of the job's noise is paradit's."""
    from diffusers.modular_pipelines.minimax_h3.before_denoise import (
        MiniMaxH3PrepareConditionLatentsStep,
    )
    from diffusers.utils.torch_utils import randn_tensor

    from .comfyui_prep import condition_rows

    class ComfyUIConditionNoise(MiniMaxH3PrepareConditionLatentsStep):
        @torch.no_grad()
        def __call__(self, components: Any, state: Any):
            block_state = self.get_block_state(state)
            device = components._execution_device
            latents = block_state.condition_latents
            for condition in latents:  # diffusers' draws, in its order, so the rest follows
                randn_tensor(
                    condition.shape,
                    generator=block_state.generator,
                    device=device,
                    dtype=torch.float32,
                )
            rows = condition_rows(latents, seed, components.patch_size).to(device)
            if rows.shape[0] != block_state.num_condition_video_rows:
                raise ValueError(
                    f"the layout reserved {block_state.num_condition_video_rows} conditioning "
                    f"rows, the keyframes pack into {rows.shape[0]}"
                )
            block_state.condition_rows = rows
            self.set_block_state(state, block_state)
            return components, state

    return ComfyUIConditionNoise


def denoise_blocks(keyframes: bool, comfyui_seed: int | None = None) -> Any:
    """diffusers' core denoise blocks of `t2va` (or `fl2va` with `keyframes`), their loop
    with the step callback block added; with `comfyui_seed`, the keyframes noised as
    ComfyUI noises them (`_comfyui_condition_block`)."""
    from diffusers.modular_pipelines.minimax_h3.denoise import (
        MiniMaxH3DenoiseStep,
        MiniMaxH3LoopDenoiser,
        MiniMaxH3LoopSchedulerStep,
    )
    from diffusers.modular_pipelines.minimax_h3.modular_blocks_minimax_h3 import (
        MiniMaxH3CoreDenoiseStep,
        MiniMaxH3FL2VACoreDenoiseStep,
    )

    class DenoiseWithCallback(MiniMaxH3DenoiseStep):
        block_classes = [MiniMaxH3LoopDenoiser, MiniMaxH3LoopSchedulerStep, _step_end_block()]
        block_names = ["denoiser", "update", "step_end"]

    from diffusers.modular_pipelines.modular_pipeline import SequentialPipelineBlocks

    core = MiniMaxH3FL2VACoreDenoiseStep() if keyframes else MiniMaxH3CoreDenoiseStep()
    core.sub_blocks["denoise"] = DenoiseWithCallback()
    if keyframes and comfyui_seed is not None:
        core.sub_blocks["prepare_condition_latents"] = _comfyui_condition_block(comfyui_seed)()
    return SequentialPipelineBlocks.from_blocks_dict(
        {"geometry": _geometry_block()(), "core": core}
    )


def text_encoder(pipe: Any) -> Any:
    """diffusers' t2va text encoder block on the pipeline's Qwen3-VL (rank 0)."""
    from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3TextEncoderStep

    return _on_components(MiniMaxH3TextEncoderStep(), pipe)


def keyframe_encoder(pipe: Any, comfyui: bool = False) -> Any:
    """diffusers' fl2va blocks before the denoise, on the pipeline's components (rank 0):
    the keyframes put onto the canvas (`MiniMaxH3ResizeStep`), the prompt presented with
    them (`MiniMaxH3FL2VATextEncoderStep`), their latents (`MiniMaxH3KeyframeVaeEncoderStep`).
    With `comfyui` the vision tower's input is ComfyUI's (`comfyui_prep.VisionInput`) and
    the latents are left to `comfyui_prep.keyframe_latents` (the blocks return the canvas
    keyframes, `keyframes`)."""
    from diffusers.modular_pipelines.minimax_h3.before_encoder import MiniMaxH3ResizeStep
    from diffusers.modular_pipelines.minimax_h3.encoders import (
        MiniMaxH3FL2VATextEncoderStep,
        MiniMaxH3KeyframeVaeEncoderStep,
    )
    from diffusers.modular_pipelines.modular_pipeline import SequentialPipelineBlocks

    steps = {"resize": MiniMaxH3ResizeStep(), "text": MiniMaxH3FL2VATextEncoderStep()}
    if not comfyui:
        steps["vae_encode"] = MiniMaxH3KeyframeVaeEncoderStep()
    runner = _on_components(SequentialPipelineBlocks.from_blocks_dict(steps), pipe)
    if comfyui:
        from .comfyui_prep import presenting_processor

        runner.update_components(processor=presenting_processor(pipe.processor))
    return runner


def _on_components(blocks: Any, pipe: Any) -> Any:
    """`blocks` as a pipeline holding the loaded pipeline's components it names (nothing
    copied); the ones `pipe` lacks are the blocks' defaults (the image processor)."""
    runner = blocks.init_pipeline()
    wanted = [spec.name for spec in runner.blocks.expected_components]
    parts = {name: getattr(pipe, name, None) for name in wanted}
    runner.update_components(**{k: v for k, v in parts.items() if v is not None})
    return runner


class DenoiseRunner:
    """The job's denoising on the loaded pipeline's components (nothing copied), called as
    a regular pipeline: returns `(latents, audio_latents)` (normalised, as the decode blocks
    take them)."""

    def __init__(self, pipe: Any, keyframes: bool, comfyui_seed: int | None = None):
        self.pipe = pipe
        self.runner = _on_components(denoise_blocks(keyframes, comfyui_seed), pipe)
        self.scheduler = pipe.scheduler
        """The video scheduler; a job on paradit's sampler sets a `FlowSampler` here (as on
        every pipeline, sampling/job.py), which the call runs as H3's two stream samplers
        (`sampling.stream_samplers`)."""

    @property
    def config(self) -> Any:
        return self.pipe.config

    def __call__(
        self,
        *,
        generator: torch.Generator,
        callback_on_step_end: Any = None,
        output_type: str = "latent",
        return_dict: bool = False,
        **inputs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if output_type != "latent" or return_dict:
            raise ValueError("H3's denoise returns the latents as a tuple: output_type='latent'")
        own = {name: getattr(self.pipe, name) for name in ("scheduler", "audio_scheduler")}
        chosen = self.scheduler
        if chosen is not own["scheduler"]:
            from .sampling import stream_samplers

            self.runner.update_components(
                **stream_samplers(chosen.sampler, tuple(chosen.levels), chosen.seed, self.pipe)
            )
        try:
            out = self.runner(
                **inputs,
                generator=generator,
                callback_on_step_end=callback_on_step_end,
                output=list(DENOISE_OUTPUTS),
            )
        finally:
            if chosen is not own["scheduler"]:
                self.runner.update_components(**own)
        return out["latents"], out["audio_latents"]
