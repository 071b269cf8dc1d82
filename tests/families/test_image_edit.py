"""The image-edit task: Qwen-Image-Edit-2509 (`tiny-qwen-image-edit`, `random:qwen-image-edit`)
and Flux.2 with reference images (`tiny-flux2`): the request's rules and their HTTP replies, the
OpenAI-style edit route, the command line, the ComfyUI node and the web form (no process);
Flux.2's edit at world size 1 against the diffusers pipeline called directly (on Ulysses 2, 3 and
4, the reference-image tokens riding in the DiT's sequence: the family contract's Flux.2 "edit"
job, `flux2/tiny_job.py`); Qwen-Image-Edit's: the family contract
(tests/families/test_family_contract.py).
LoRAs per edit job (two stacked, in the layouts users hold: Kohya and ComfyUI names for
Qwen-Image-Edit, ai-toolkit's BFL names and Kohya for Flux.2): the weights under them equal
diffusers' `fuse_lora`, the edit changes, and the pipelines called directly after the LoRA job
give the image of the edit before it, byte for byte (the LoRA left nothing behind).

Jobs run as a rank runs them (tests/image_jobs.py: the family encodes and prepares, the
pipeline stops at the latents, the VAE decodes tile by tile), judged with `paradit verify`'s
measure. No gloo group here: the parallel runs are the family contract's.

Cost: about 2 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch
from image_jobs import encoded, preset_pipeline, run_image_job
from lora_files import diffusers_fused, dit_patcher, flux2_loras, lora_items, qwen_image_loras

from paradit.backend.contract import IMAGE_EDIT, TEXT_TO_IMAGE, Limits, edit_size
from paradit.backend.models.families import family_of
from paradit.backend.models.families.flux2.tiny_job import EDIT as FLUX2_JOB
from paradit.backend.models.random_presets import build_random_preset
from paradit.backend.request import JobRequest
from paradit.backend.serving.outputs import to_uint8
from paradit.backend.tools.equivalence import (
    DIFFERENT,
    FLOAT32,
    IDENTICAL,
    compare,
)

QWEN, FLUX2, RANDOM = "tiny-qwen-image-edit", "tiny-flux2", "random:qwen-image-edit"
# VAE tiles in sample pixels: Edit-Plus VAE-encodes each input at about 1024x1024 pixels on
# every rank, 3 times faster in tiles of 128 than of 64 (Qwen's decode is then one tile; the
# Qwen-Image VAE's decode split over the ranks: test_qwen_image.py); Flux.2's output, 112x64 px,
# is 6 tiles of 64.
TILES = {QWEN: 128, FLUX2: 64}


def _png(width: int, height: int, seed: int) -> str:
    from PIL import Image

    pixels = (np.random.RandomState(seed).rand(height, width, 3) * 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


# Edit-Plus VAE-encodes every input at about 1024x1024 pixels, so one input image puts 4096
# reference tokens behind the 5 x 3 = 15 output tokens (80x48 px: the image's aspect at the
# tiny preset's 64x64 budget, as no width or height is given). True CFG (two branches).
QWEN_JOB = {"prompt": "make the fox red 🦊", "negative_prompt": "blurry", "seed": 5}
QWEN_JOB.update(image=_png(64, 48, 1), num_inference_steps=2)
# Flux.2's edit (two reference images): the family contract's job (`flux2/tiny_job.py`).


# -- the request's rules (no process) ------------------------------------------------------------

EDIT = Limits(
    task=IMAGE_EDIT, size_multiple=16, min_size=16, max_size=2048, frame_multiple=0,
    max_frames=1, needs_image=True, accepts_image=True, max_images=3, edit_pixels=1024 * 1024,
)  # fmt: skip
TEXT = Limits(task=TEXT_TO_IMAGE, size_multiple=16, min_size=16, max_size=2048,
              frame_multiple=0, max_frames=1)  # fmt: skip


@pytest.mark.fast
@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"prompt": "x"}, "image is required for image edit: send a base64 PNG or JPEG"),
        ({"prompt": "x", "image": "aGk="}, "image could not be decoded: send a PNG or JPEG"),
        ({"prompt": "x", "image": "not base64!"}, "image is not valid base64"),
        ({"prompt": "x", "image": _png(8, 8, 0), "images": [_png(8, 8, 0), "aGk="]},
         r"images\[1\] could not be decoded"),
        ({"prompt": "x", "image": _png(8, 8, 0), "images": [_png(8, 8, 0)] * 3},
         r"this model takes at most 3 input images \(image plus images\), got 4"),
        ({"prompt": "x", "images": [_png(8, 8, 0)]},
         "images holds the input images after the first: send the first as image"),
        ({"prompt": "x", "image": _png(8, 8, 0), "images": "abc"},
         "images must be a list of base64 PNG or JPEG strings"),
    ],
)  # fmt: skip
def test_bad_edit_requests_are_refused_naming_the_rule(body, error):
    with pytest.raises(ValueError, match=error):
        JobRequest.from_body(body, EDIT)


@pytest.mark.fast
def test_flux2_refuses_references_smaller_than_its_pipeline_takes():
    flux2 = Limits(**{**EDIT.to_dict(), "needs_image": False, "min_image_side": 64})
    with pytest.raises(ValueError, match=r"images\[0\] must be at least 64 pixels .* got 64x48"):
        JobRequest.from_body(
            {"prompt": "x", "image": _png(64, 64, 0), "images": [_png(64, 48, 0)]}, flux2
        )


@pytest.mark.fast
def test_images_are_refused_where_the_model_takes_none_or_one():
    with pytest.raises(ValueError, match="only accepted by image-to-video models and image-edit"):
        JobRequest.from_body({"prompt": "x", "image": _png(8, 8, 0)}, TEXT)
    one = Limits(**{**EDIT.to_dict(), "max_images": 1})
    with pytest.raises(ValueError, match="takes at most 1 image"):
        JobRequest.from_body(
            {"prompt": "x", "image": _png(8, 8, 0), "images": [_png(8, 8, 0)]}, one
        )


@pytest.mark.fast
def test_a_request_may_name_its_task_as_the_issue_spells_it():
    """`"task": "edit"` (the contract's value) on an edit model and on Flux.2, which also makes
    images from text; a task the model does not serve, or one the image contradicts, is refused."""
    image = _png(64, 48, 0)
    assert (
        JobRequest.from_body({"task": "edit", "prompt": "x", "image": image}, EDIT).task == "edit"
    )
    assert JobRequest.from_body({"prompt": "x", "image": image}, EDIT).task is None
    flux2 = Limits(**{**EDIT.to_dict(), "task": TEXT_TO_IMAGE, "needs_image": False})
    assert (
        JobRequest.from_body({"task": "edit", "prompt": "x", "image": image}, flux2).task == "edit"
    )
    assert JobRequest.from_body({"task": "text-to-image", "prompt": "x"}, flux2).image is None
    assert JobRequest.from_body({"task": "", "prompt": "x"}, flux2).task is None  # the web form's
    refusals = [
        ({"task": "edit", "prompt": "x"}, flux2, "image is required for image edit"),
        ({"task": "text-to-image", "prompt": "x", "image": image}, flux2,
         "task text-to-image takes no image: leave the image out, or ask for edit"),
        ({"task": "image-to-video", "prompt": "x", "image": image}, flux2,
         r"task must be one this model serves \(text-to-image, edit\), got 'image-to-video'"),
        ({"task": "text-to-image", "prompt": "x", "image": image}, EDIT,
         r"task must be one this model serves \(edit\)"),
        ({"task": "edit", "prompt": "x"}, TEXT, r"serves \(text-to-image\), got 'edit'"),
    ]  # fmt: skip
    for body, limits, error in refusals:
        with pytest.raises(ValueError, match=error):
            JobRequest.from_body(body, limits)


@pytest.mark.fast
def test_the_default_size_is_the_first_images_aspect_at_the_pixel_budget():
    """Qwen-Image-Edit's rule: 1024x1024 pixels at the input's aspect (1184x880 for 4:3,
    in steps of 16); a size the request gives wins; Flux.2 keeps a smaller image's size."""
    request = JobRequest.from_body({"prompt": "x", "image": _png(640, 480, 0)}, EDIT)
    assert (request.width, request.height) == (1184, 880)
    assert edit_size(480, 640, EDIT) == (880, 1184)
    given = JobRequest.from_body({"prompt": "x", "image": _png(64, 48, 0), "width": 320}, EDIT)
    assert (given.width, given.height) == (320, 64)  # the other side: the model's default
    keeps = Limits(**{**EDIT.to_dict(), "edit_keeps_smaller": True})
    assert edit_size(640, 480, keeps) == (640, 480) and edit_size(4000, 3000, keeps) == (1184, 880)
    assert request.to_dict(with_image=False)["image"].endswith("base64 chars>")


@pytest.mark.fast
def test_cli_repeated_image_fills_image_then_images(tmp_path):
    from paradit.backend.tools.cli import build_parser, job_body

    paths = []
    for index in range(3):
        path = tmp_path / f"{index}.png"
        path.write_bytes(base64.b64decode(_png(8, 8, index)))
        paths.append(str(path))
    args = build_parser().parse_args(
        ["generate", "x", "--out", "o", "--model", QWEN, *sum((["--image", p] for p in paths), [])]
    )
    body = job_body(args, "x")
    assert body["image"] == _png(8, 8, 0) and body["images"] == [_png(8, 8, 1), _png(8, 8, 2)]
    one = job_body(
        build_parser().parse_args(["generate", "x", "--out", "o", "--image", paths[0]]), "x"
    )
    assert one["image"] == _png(8, 8, 0) and "images" not in one


@pytest.mark.fast
def test_random_preset_is_qwen_image_edit_2509_on_meta():
    pipe = build_random_preset(RANDOM, device="meta")
    assert type(pipe).__name__ == "QwenImageEditPlusPipeline"
    assert sum(p.numel() for p in pipe.transformer.parameters()) == 20_430_401_088
    assert len(pipe.tokenizer) == pipe.text_encoder.config.text_config.vocab_size
    config = pipe.text_encoder.config
    assert pipe.processor.tokenizer.convert_tokens_to_ids(
        ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    ) == [config.vision_start_token_id, config.vision_end_token_id, config.image_token_id,
          config.video_token_id]  # fmt: skip
    limits = family_of(pipe).limits(pipe, tiny=False)
    assert (limits.task, limits.max_images, limits.edit_pixels) == (IMAGE_EDIT, 3, 1024 * 1024)
    assert (limits.default_steps, limits.default_guidance) == (40, 4.0)
    # its scheduler's shift_terminal makes 1 step NaN: refused (Qwen-Image's too)
    with pytest.raises(ValueError, match="num_inference_steps must be at least 2 for this model"):
        JobRequest.from_body(
            {"prompt": "x", "image": _png(64, 64, 0), "num_inference_steps": 1}, limits
        )


class _EditService:
    """What `create_app` uses of `Service`, validating with the real rules for an edit model;
    `stop`: refuse every job after recording it (the OpenAI route would wait for it)."""

    def __init__(self, stop: bool = False):
        from paradit.backend.serving.jobs import JobBook

        self.limits, self.book, self.stop, self.received = EDIT, JobBook(1, 10), stop, []

    def health(self) -> tuple[bool, dict]:
        return True, {"status": "ok"}

    def info(self) -> dict:
        return {"limits": EDIT.to_dict()}

    def submit(self, body: dict):
        from pathlib import Path

        from paradit.backend.serving.jobs import Job

        self.received.append(body)
        request = JobRequest.from_body(body, EDIT)
        if self.stop:
            raise ValueError("recorded")
        return self.book.submit(Job(request=request, out_dir=Path("unused")))


@pytest.mark.fast
def test_http_refuses_bad_edits_with_422_naming_the_rule():
    from fastapi.testclient import TestClient

    from paradit.backend.serving.http import create_app

    api = TestClient(create_app(_EditService()))
    cases = [
        ({"prompt": "x"}, "image is required for image edit"),
        ({"prompt": "x", "image": "aGk="}, "image could not be decoded"),
        ({"prompt": "x", "image": _png(8, 8, 0), "images": "abc"}, "images"),
        ({"prompt": "x", "image": _png(8, 8, 0), "images": [_png(8, 8, 0)] * 3},
         "this model takes at most 3 input images"),
    ]  # fmt: skip
    for body, message in cases:
        reply = api.post("/v1/jobs", json=body)
        assert reply.status_code == 422 and message in reply.json()["error"], reply.text
    good = api.post("/v1/jobs", json={"prompt": "x", "image": _png(64, 48, 0), "images": []})
    assert good.status_code == 202, good.text
    job = api.get(f"/v1/jobs/{good.json()['id']}").json()
    assert (job["request"]["width"], job["request"]["height"]) == (1184, 880)


@pytest.mark.fast
def test_openai_images_edits_maps_the_uploaded_files():
    """`POST /v1/images/edits` as the `openai` client sends several files (`image[]`): the
    first is `image`, the others `images`; `mask` and a missing image are refused."""
    from fastapi.testclient import TestClient

    from paradit.backend.serving.http import create_app

    service = _EditService(stop=True)
    api = TestClient(create_app(service))
    files = [
        ("image[]", (f"{i}.png", base64.b64decode(_png(8, 8, i)), "image/png")) for i in range(3)
    ]
    reply = api.post("/v1/images/edits", data={"prompt": "red", "seed": "4"}, files=files)
    assert reply.status_code == 422 and reply.json()["error"]["message"] == "recorded"
    assert service.received == [
        {
            "prompt": "red",
            "seed": 4,
            "image": _png(8, 8, 0),
            "images": [_png(8, 8, 1), _png(8, 8, 2)],
        }
    ]
    for body, message in (
        ({"prompt": "x", "image": _png(8, 8, 0), "mask": _png(8, 8, 0)}, "mask is not supported"),
        ({"prompt": "x"}, "image is required"),
    ):
        reply = api.post("/v1/images/edits", json=body)
        assert reply.status_code == 422 and message in reply.json()["error"]["message"]


@pytest.mark.fast
def test_comfyui_edit_node_sends_its_images_and_leaves_the_size_to_the_image():
    from paradit.nodes.params import IMAGE_EDIT
    from paradit.nodes.run import build_request, check_task

    assert IMAGE_EDIT.image_inputs == ("image", "image_2", "image_3")
    values = {p.name: p.default for p in IMAGE_EDIT.params} | {"prompt": "red"}
    pngs = [base64.b64decode(_png(8, 8, i)) for i in range(3)]
    body = build_request(IMAGE_EDIT, values, pngs[0], tuple(pngs[1:]))
    assert "width" not in body and "height" not in body  # 0: from the image
    assert body["image"] == _png(8, 8, 0) and body["images"] == [_png(8, 8, 1), _png(8, 8, 2)]
    sized = build_request(IMAGE_EDIT, values | {"width": 512, "height": 384}, pngs[0])
    assert (sized["width"], sized["height"]) == (512, 384) and "images" not in sized
    flux2 = {"model": "tiny-flux2", "limits": {"task": TEXT_TO_IMAGE, "accepts_image": True}}
    check_task(IMAGE_EDIT, flux2)  # a text-to-image model that edits
    ti2v = {
        "model": "tiny-wan2.2-ti2v-5b",
        "limits": {"task": "text-to-video", "accepts_image": True},
    }
    with pytest.raises(
        ValueError,
        match="ParaDiTImageEdit runs image edit, .* choose an image edit model in ParaDiTBackend",
    ):
        check_task(IMAGE_EDIT, ti2v)


@pytest.mark.fast
def test_web_form_uploads_the_images_for_edit_models(tmp_path):
    """The form shows the image and the further images for an edit model and for Flux.2 (a
    text-to-image model that edits), not for Flux.1; the uploaded files become the body's."""
    from paradit.web.forms import (
        FROM_IMAGE,
        form_fields,
        image_label,
        job_body,
        parse_size,
        size_presets,
    )

    def images(task: str, limits: dict | None) -> list[str]:
        return [f.name for f in form_fields(task, limits) if f.kind in ("image", "images")]

    flux2 = {**TEXT.to_dict(), "accepts_image": True, "max_images": 10, "edit_pixels": 64 * 64}
    assert images(IMAGE_EDIT, EDIT.to_dict()) == images(TEXT_TO_IMAGE, flux2) == ["image", "images"]
    assert images(TEXT_TO_IMAGE, TEXT.to_dict()) == []
    assert (image_label(IMAGE_EDIT), image_label(TEXT_TO_IMAGE)) == (
        "Image to edit",
        "Reference image",
    )
    paths = []
    for index in range(2):
        paths.append(tmp_path / f"{index}.png")
        paths[-1].write_bytes(base64.b64decode(_png(8, 8, index)))
    body = job_body(
        limits=EDIT.to_dict(), prompt="red", seed=1, image=str(paths[0]), images=[str(paths[1])]
    )
    assert body["image"] == _png(8, 8, 0) and body["images"] == [_png(8, 8, 1)]
    with pytest.raises(
        ValueError, match="this edit model needs an image to edit: upload a PNG or JPEG"
    ):
        job_body(limits=EDIT.to_dict(), prompt="red", seed=1)
    # the size: from the image by default for an edit model (the body leaves it out)
    presets = size_presets(EDIT.to_dict())
    assert presets[0] == ("From the image (its aspect at 1024×1024 pixels)", FROM_IMAGE)
    assert parse_size(FROM_IMAGE) == (None, None) and "width" not in body
    assert size_presets(flux2)[1][1] == FROM_IMAGE  # offered, not the default, for Flux.2
    assert FROM_IMAGE not in [value for _, value in size_presets(TEXT.to_dict())]


# -- world size 1 against diffusers, 2, 3 and 4 ranks against world size 1 -----------------------


LORA_WRITERS = {QWEN: qwen_image_loras, FLUX2: flux2_loras}
STACKED = {  # two LoRAs per job, in two layouts
    QWEN: [("q_kohya", 0.8), ("q_comfy", -0.5)],
    FLUX2: [("f2_aitk", 0.8), ("f2_kohya", -0.5)],
}
CHANGED = {QWEN: 12, FLUX2: 20}  # weights the two LoRAs change on the tiny DiTs (2+2 blocks)


@pytest.fixture(scope="module")
def references(tmp_path_factory) -> dict:
    """World size 1, one thread: each model's pipeline with two stacked LoRAs; for Flux.2 its
    encoded text (rank 0's) and edit job (image, latents, tiles), then the same edit under the
    LoRAs on the same pipeline, as a backend runs a LoRA job: what the tests after it call runs
    on weights a LoRA job has changed and put back. (Qwen-Image-Edit's edit, with a LoRA and
    without: the family contract, tests/families/test_family_contract.py.)"""
    folder = tmp_path_factory.mktemp("edit_loras")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        outputs, pipes, patchers, with_loras, saved = {}, {}, {}, {}, {}
        for name, body in ((QWEN, QWEN_JOB), (FLUX2, FLUX2_JOB)):
            pipes[name], _family = preset_pipeline(name, TILES[name])
            LORA_WRITERS[name](folder, pipes[name].transformer, seed=len(name))
            patchers[name] = dit_patcher(pipes[name], folder)
            items = patchers[name].resolve(lora_items(STACKED[name]))
            if name == QWEN:  # the LoRAs' weights only
                with patchers[name].applied(items) as job:
                    pass
                saved[name] = job.saved_bytes
                continue
            tensors = encoded(pipes[name], body)  # rank 0's, for both jobs
            outputs[name] = run_image_job(pipes[name], body, tensors)
            with patchers[name].applied(items) as job:
                with_loras[name] = run_image_job(pipes[name], body, tensors)
            saved[name] = job.saved_bytes
    finally:
        torch.set_num_threads(threads)
    return {
        "outputs": outputs,
        "pipes": pipes,
        "patchers": patchers,
        "with_loras": with_loras,
        "saved_bytes": saved,
        "folder": folder,
    }


def test_a_lora_per_edit_job_changes_the_edit_and_equals_diffusers_fuse_lora(references):
    """Per model: the LoRA job's weights equal diffusers' `load_lora_weights` + `fuse_lora` at
    the same strengths, byte for byte; every weight is back to the base bytes after it (the
    next job's image: the test below); Flux.2's edit differs from the plain one."""
    for name, pipe in references["pipes"].items():
        patcher, stack = references["patchers"][name], STACKED[name]
        base = {k: v.clone() for k, v in pipe.transformer.state_dict().items()}
        with patcher.applied(patcher.resolve(lora_items(stack))):
            ours = {k: v.clone() for k, v in pipe.transformer.state_dict().items()}
        assert all(torch.equal(base[k], v) for k, v in pipe.transformer.state_dict().items())
        changed = [k for k in base if not torch.equal(base[k], ours[k])]
        assert len(changed) == CHANGED[name], (name, changed)
        assert references["saved_bytes"][name] > 0
        fused = diffusers_fused(pipe, references["folder"], stack).transformer.state_dict()
        assert all(torch.equal(fused[k], ours[k]) for k in base), f"{name}: not diffusers' fuse"
    # the edit under them differs (Qwen-Image-Edit's under a LoRA: the family contract)
    plain, with_loras = references["outputs"][FLUX2], references["with_loras"][FLUX2]
    assert compare(plain[0], with_loras[0], FLOAT32).verdict == DIFFERENT


def _images(body: dict) -> list:
    from PIL import Image

    return [
        Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")
        for data in (body["image"], *body.get("images", ()))
    ]


def test_world_size_1_equals_the_edit_pipelines_called_directly(references):
    """`Flux2Pipeline` as a user calls it with the images: the same image, bit for bit. The
    pipeline has run a LoRA job since that image was made (`references`): the plain job after
    a LoRA job equals the one before it, byte for byte. (Qwen-Image-Edit's edit against
    `QwenImageEditPlusPipeline`, and on 2-4 ranks: the family contract,
    tests/families/test_family_contract.py.)"""
    torch.set_num_threads(1)
    outputs = references["outputs"]
    flux2 = references["pipes"][FLUX2]
    qwen = references["pipes"][QWEN]
    request = JobRequest.from_body(
        QWEN_JOB, family_of(qwen).limits(qwen, tiny=True)
    )  # the contract's job's size: 80x48
    assert (request.width, request.height) == (80, 48)
    with torch.no_grad():
        direct = {
            FLUX2: flux2(
                image=_images(FLUX2_JOB),
                prompt=FLUX2_JOB["prompt"],
                height=64,
                width=112,
                num_inference_steps=2,
                generator=torch.Generator().manual_seed(FLUX2_JOB["seed"]),
                output_type="np",
            ).images,
        }
    for name, image in direct.items():
        result = compare(outputs[name][0], to_uint8(np.asarray(image)), FLOAT32)
        assert result.verdict == IDENTICAL, (name, result.overall)
    # the references count: without the second image, a different edit
    alone = run_image_job(flux2, {**FLUX2_JOB, "images": None})
    assert compare(outputs[FLUX2][0], alone[0], FLOAT32).verdict == DIFFERENT
