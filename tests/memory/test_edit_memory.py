"""The memory plan counts an image edit's reference tokens: the sequence the DiT sees is the
output's tokens then each input image's (Qwen-Image-Edit: about 1024x1024 pixels each), so
the estimate grows with the images and a job that fits only without them is refused.

Qwen-Image-Edit's DiT at its real widths (the random preset's config) with 1 of its 60 blocks,
built on the meta device: the activation peak is one block's, whatever the depth.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import pytest

from paradit.backend.contract import IMAGE_EDIT, Limits, reference_sizes
from paradit.backend.memory.planner import GIB, Budget, MemoryPlanner, TooLarge, Topology
from paradit.backend.memory.settings import JobShape, MemorySettings
from paradit.backend.request import JobRequest

pytestmark = pytest.mark.fast

EDIT_LIMITS = Limits(  # Qwen-Image-Edit-2509's, as its family reports them for the real model
    task=IMAGE_EDIT,
    size_multiple=16,
    min_size=16,
    max_size=2048,
    frame_multiple=0,
    max_frames=1,
    needs_image=True,
    accepts_image=True,
    max_images=3,
    edit_pixels=1024 * 1024,
    default_width=1024,
    default_height=1024,
    default_frames=1,
)
OUTPUT = (1024, 1024)


@pytest.fixture(scope="module")
def qwen_edit_sizes():
    import torch
    from diffusers import QwenImageTransformer2DModel

    from paradit.backend.memory.sizes import ModelSizes
    from paradit.backend.models.random_presets import random_preset_spec

    spec = random_preset_spec("random:qwen-image-edit")
    config = {**spec["components"]["transformer"]["config"], "num_layers": 1}
    config.pop("_class_name")
    with torch.device("meta"):
        dit = QwenImageTransformer2DModel.from_config(config)
    dit_bytes = sum(p.numel() for p in dit.parameters()) * 2
    return ModelSizes(
        "QwenImageEditPlusPipeline",
        {"transformer": dit_bytes},
        dit,
        None,
        torch.bfloat16,
        torch.bfloat16,
        spatial=8,
        temporal=1,
    )


def png(width: int, height: int) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (90, 120, 200)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def edit_shape(images: int) -> JobShape:
    """The job's shape as the service builds it from a request with `images` input images."""
    from paradit.backend.serving.service import job_shape

    body = {"prompt": "make it blue", "image": png(64, 64), "width": 1024, "height": 1024}
    if images > 1:
        body["images"] = [png(64, 64)] * (images - 1)
    return job_shape(JobRequest.from_body(body, EDIT_LIMITS), EDIT_LIMITS)


def test_an_edit_request_counts_each_input_image_as_the_pipeline_encodes_it():
    # about 1024x1024 pixels at each image's aspect, in steps of 16
    assert reference_sizes([png(96, 64), png(64, 64)], EDIT_LIMITS) == (
        (1248, 832),
        (1024, 1024),
    )
    assert edit_shape(3).references == ((1024, 1024),) * 3
    assert edit_shape(1).references == ((1024, 1024),)
    start_image = Limits(  # a start image (image-to-video) is not a reference
        task="image-to-video", size_multiple=16, min_size=16, max_size=2048,
        frame_multiple=4, max_frames=81, needs_image=True,
    )  # fmt: skip
    assert reference_sizes([png(96, 64)], start_image) == ()


def test_the_estimate_grows_by_the_reference_tokens(qwen_edit_sizes):
    sizes, square = qwen_edit_sizes, (1024, 1024)
    alone = sizes.activations(JobShape(*OUTPUT, 1), 1)
    one = sizes.activations(JobShape(*OUTPUT, 1, references=(square,)), 1)
    three = sizes.activations(JobShape(*OUTPUT, 1, references=(square,) * 3), 1)
    assert alone < one < three
    # each 1024x1024 reference adds its 4096 tokens: the same again per image
    assert 2.8 < (three - alone) / (one - alone) < 3.2


def test_an_edit_that_fits_only_without_its_references_is_refused_naming_the_rule(
    qwen_edit_sizes,
):
    sizes = qwen_edit_sizes
    three = edit_shape(3)
    without = JobShape(*OUTPUT, 1)
    # room for the three references with a 512x512 output, not with the 1024x1024 one
    smaller = JobShape(512, 512, 1, references=three.references)
    room = sizes.dit_bytes + sizes.activations(smaller, 1)
    budget = Budget(int(room / 0.9) + 1, "test")
    settings = MemorySettings(room / GIB, offload="none")
    planner = MemoryPlanner(sizes, settings, budget, Topology("cuda", 1), without)
    assert planner.check(without).fits
    assert not planner.plan_job(three).fits
    with pytest.raises(TooLarge) as refused:
        planner.check(three)
    message = str(refused.value)
    assert message.startswith(
        "1024x1024x1 with 3 reference image(s) (1024x1024, 1024x1024, 1024x1024) needs "
    )
    assert "on a rank (an edit's reference images are counted: their tokens follow" in message
    largest = message.rsplit("the largest size that fits at 1 frames is ", 1)[1]
    width, height, frames = (int(n) for n in largest.split("x"))
    assert 16 <= width == height < 1024 and frames == 1
    assert planner.plan_job(JobShape(width, height, 1, references=three.references)).fits
    assert planner.plan_job(three).to_dict()["reference_images"] == ["1024x1024"] * 3
