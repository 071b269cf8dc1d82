"""LoRAs per job: stacked, applied to each rank's own weight rows and removed after the job.

What is proven, on tiny LoRAs made here in both formats users hold (diffusers/PEFT and
ComfyUI/Kohya with alpha, diff_b and a full diff; `lora_files.py`):
- world size 1 equals the diffusers pipeline with `load_lora_weights` + `fuse_lora` at the same
  strengths, byte for byte (frames), and the weights equal diffusers' fused ones (Wan, the Wan
  2.2 pair with a strength per expert, Flux in PEFT and Kohya format);
- world size 3 (sharded, uneven rows) equals world size 1 within rounding, and each of 2
  data-parallel replicas (pinned: the other one held by a long job) runs a LoRA job beside a
  plain job and gives world size 1's frames, then world size 1's plain frames;
- a job after LoRA jobs (succeeded, refused, cancelled) is byte-identical to the same job before
  them (frames and latents) on the same backend;
- bad LoRAs (missing, outside the folder, another model's, wrong shapes, corrupt) get 422 naming
  the LoRA and the reason before the job runs.

Cost: about 9 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import copy
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REFERENCE_FLAGS, run_job, wait_for
from lora_files import FLUX_TARGETS, WAN_TARGETS, comfy_wan_lora, kohya_flux_lora, peft_lora

from paradit.backend.client.http import BackendError
from paradit.backend.lora import LoraError, LoraLibrary, LoraPatcher
from paradit.backend.models.presets import build_preset
from paradit.backend.request import parse_lora
from paradit.backend.tools.equivalence import DIFFERENT, FLOAT32, IDENTICAL, compare
from paradit.backend.tools.verify import decode_png

BODY = {
    "prompt": "a lantern by the sea",
    "seed": 5,
    "guidance_scale": 4.0,
    "width": 64,
    "height": 48,
    "num_frames": 5,
    "num_inference_steps": 3,
}
STACKED = [{"name": "peft.safetensors", "strength": 0.8}, {"name": "kohya", "strength": 0.5}]
WITH_DIFF = [
    {"name": "kohya_diff.safetensors", "strength": 0.9},
    {"name": "peft", "strength": -0.4},
]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def wan():
    pipe = build_preset("tiny-wan")
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture(scope="module")
def loras(backends, wan, tmp_path_factory) -> Path:
    """The module's LoRAs in the pool's --lora-dir (every pool backend reads it)."""
    folder = backends.lora_dir
    peft_lora(folder / "peft.safetensors", wan.transformer, WAN_TARGETS, seed=1)
    comfy_wan_lora(folder / "kohya.safetensors", wan.transformer, seed=2)
    comfy_wan_lora(folder / "kohya_diff.safetensors", wan.transformer, seed=3, full_diff=True)
    (folder / "other").mkdir(exist_ok=True)
    flux = build_preset("tiny-flux").transformer
    peft_lora(folder / "other" / "flux.safetensors", flux, FLUX_TARGETS, seed=4)
    wide = copy.deepcopy(wan.transformer)  # the same names, other shapes
    wide.blocks[0].attn1.to_q = torch.nn.Linear(64, 96)
    peft_lora(folder / "other" / "wide.safetensors", wide, ("attn1.to_q",), seed=5)
    (folder / "corrupt.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    outside = tmp_path_factory.mktemp("outside") / "secret.safetensors"
    outside.write_bytes((folder / "peft.safetensors").read_bytes())
    link = folder / "escape.safetensors"
    if not link.is_symlink():
        link.symlink_to(outside)
    return folder


BAD = [
    ({"name": "nope"}, "LoRA 'nope': no such LoRA"),
    ({"name": "../outside/secret.safetensors"}, "no absolute path, no '..'"),
    ({"name": "/etc/passwd"}, "no absolute path"),
    ({"name": "escape.safetensors"}, "LoRA 'escape.safetensors': it leads outside"),
    ({"name": "corrupt.safetensors"}, "LoRA 'corrupt.safetensors': not a readable safetensors"),
    ({"name": "other/flux"}, "LoRA 'other/flux': 6 of its 6 layers are not layers of this model"),
    ({"name": "other/wide"}, "layer blocks.0.attn1.to_q changes a 96x64 weight, the model's is"),
    ({"name": "peft", "high": 1.0, "low": 0.0}, "high/low strengths are for Wan 2.2's two"),
]


def frames_of(pngs: list[bytes]) -> np.ndarray:
    return np.stack([decode_png(p) for p in pngs])


def run_pipeline(pipe, body: dict) -> np.ndarray:
    """The diffusers pipeline as a user calls it, on one thread like a rank; uint8 frames."""
    from paradit.backend.serving.outputs import to_uint8

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            out = pipe(
                prompt=body["prompt"],
                negative_prompt="",
                height=body["height"],
                width=body["width"],
                num_frames=body["num_frames"],
                num_inference_steps=body["num_inference_steps"],
                guidance_scale=body["guidance_scale"],
                generator=torch.Generator("cpu").manual_seed(body["seed"]),
                output_type="np",
            ).frames[0]
    finally:
        torch.set_num_threads(threads)
    return to_uint8(np.asarray(out))


def fused(pipe, folder: Path, items: list[dict], component: str = "transformer"):
    """A copy of `pipe` with `items` loaded by diffusers and fused at their strengths."""
    pipe = copy.deepcopy(pipe)
    names = []
    for index, item in enumerate(items):
        name = (
            item["name"] if item["name"].endswith(".safetensors") else f"{item['name']}.safetensors"
        )
        pipe.load_lora_weights(str(folder / name), adapter_name=f"a{index}")
        names.append(f"a{index}")
    pipe.set_adapters(names, [item["strength"] for item in items])
    pipe.fuse_lora(components=[component], adapter_names=names)
    pipe.unload_lora_weights()
    return pipe


@pytest.fixture(scope="module")
def ws1(backends, references, loras) -> dict[str, tuple[dict, list[bytes], np.ndarray]]:
    """World size 1 (the references' backend): the plain job first, then the LoRA jobs."""
    base_job, base_frames, base_latents = references.get("tiny-wan", BODY)
    client = backends.get("tiny-wan", 1, *REFERENCE_FLAGS)
    out = {"base": (base_job, base_frames, base_latents)}
    for key, items in (("stacked", STACKED), ("diff", WITH_DIFF), ("peft", STACKED[:1])):
        job, frames = run_job(client, {**BODY, "loras": items})
        out[key] = job, frames, client.latents(job["id"])
    return out


def test_world_size_1_equals_diffusers_fuse_lora_and_restores_the_weights(
    backends, ws1, wan, loras
):
    client = backends.get("tiny-wan", 1, *REFERENCE_FLAGS)
    listed = client.loras()
    assert {"peft.safetensors", "kohya_diff.safetensors", "other/flux.safetensors"} <= set(listed)
    assert "escape.safetensors" not in listed  # a link that leads outside is not listed
    job, frames, _ = ws1["stacked"]
    assert frames != ws1["base"][1], "the LoRAs changed nothing"
    record = client.record(job["id"])
    assert record["loras"] == [
        {"name": "peft.safetensors", "strength": 0.8, "sha256": sha256(loras / "peft.safetensors")},
        {"name": "kohya", "strength": 0.5, "sha256": sha256(loras / "kohya.safetensors")},
    ]
    assert record["timings"]["lora_apply_s"] >= 0 and record["timings"]["lora_remove_s"] >= 0
    # rank 0 saved, once each, the 8 weights the two LoRAs change (the Kohya one's 6 are among
    # them) and the Kohya one's 6 biases: 2 blocks of 3 64x64 and one 128x64, float32
    weights, biases = 2 * (3 * 64 * 64 + 128 * 64), 2 * 3 * 64
    assert record["memory"]["loras"]["saved_rows_bytes"] == 4 * (weights + biases)
    reference = run_pipeline(fused(wan, loras, STACKED), BODY)
    result = compare(frames_of(frames), reference, FLOAT32)
    assert result.verdict == IDENTICAL, result.overall
    for item, reason in BAD:  # refused before the job runs, naming the LoRA and the reason
        with pytest.raises(BackendError, match=reason.replace("(", r"\(")) as refused:
            client.submit({**BODY, "loras": [STACKED[0], item]})
        assert refused.value.status == 422
    job, frames = run_job(client, BODY)  # after LoRA jobs and refusals: the base weights
    assert frames == ws1["base"][1]
    assert np.array_equal(client.latents(job["id"]), ws1["base"][2])
    assert client.record(job["id"])["loras"] == []


def test_world_size_3_equals_world_size_1_and_cancel_restores(backends, ws1):
    backend = backends.start("tiny-wan", 3, *REFERENCE_FLAGS)
    client = backend.client
    try:
        before, before_frames = run_job(client, BODY)
        for key, items in (("stacked", STACKED), ("diff", WITH_DIFF)):
            job, frames = run_job(client, {**BODY, "loras": items})
            result = compare(
                frames_of(ws1[key][1]),
                frames_of(frames),
                FLOAT32,
                ws1[key][2],
                client.latents(job["id"]),
            )
            assert result.verdict != DIFFERENT, (key, result.overall)
        with pytest.raises(BackendError, match="LoRA 'other/flux'"):
            client.submit({**BODY, "loras": [{"name": "other/flux"}]})
        slow = client.submit({**BODY, "loras": WITH_DIFF, "num_inference_steps": 200})
        wait_for(lambda: client.job(slow)["progress"]["step"] >= 1, what="the slow job's step")
        client.cancel(slow)
        wait_for(lambda: client.job(slow)["status"] == "cancelled", what="the cancelled job")
        after, after_frames = run_job(client, BODY)
        assert after_frames == before_frames
        assert np.array_equal(client.latents(after["id"]), client.latents(before["id"]))
    finally:
        backends.stop(backend)


def test_two_replicas_apply_their_own_jobs_loras(backends, ws1):
    """Each replica in turn takes a LoRA job and then a plain job while the other replica is
    held by a long plain job, so which replica runs which job is pinned, not a race: the
    LoRA's frames on each (replica 1's ranks apply it from rank 0's message), world size 1's
    plain frames after it."""
    backend = backends.start("tiny-wan", 2, "--dp-degree", "2")
    client = backend.client
    long_job = {**BODY, "width": 256, "height": 256, "num_frames": 17, "num_inference_steps": 200}

    def running(job_id: str) -> dict:
        return wait_for(
            lambda: (job := client.job(job_id))["status"] == "running" and job,
            what=f"job {job_id} to run",
        )

    def on(replica: int, body: dict) -> list[bytes]:
        """`body`'s frames, run on `replica` (the only free one)."""
        job = client.wait(client.submit(body), timeout_s=120)
        assert job["replica"] == replica, job
        return [client.frame(job["id"], i) for i in range(job["num_frames"])]

    def cancel(job_id: str) -> None:
        client.cancel(job_id)
        wait_for(lambda: client.job(job_id)["status"] != "running", what=f"job {job_id} to end")
        assert client.job(job_id)["status"] == "cancelled"  # it held its replica until now

    try:
        first_hold = client.submit(long_job)
        held = running(first_hold)["replica"]
        free = 1 - held
        assert on(free, {**BODY, "loras": STACKED[:1]}) == ws1["peft"][1]
        assert on(free, BODY) == ws1["base"][1]  # its rows restored
        second_hold = client.submit(long_job)
        assert running(second_hold)["replica"] == free
        cancel(first_hold)
        assert on(held, {**BODY, "loras": STACKED[:1]}) == ws1["peft"][1]
        assert on(held, BODY) == ws1["base"][1]
        cancel(second_hold)
    finally:
        backends.stop(backend)


# -- the weights, in this process (no backend) --------------------------------------------------


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> list[str]:
    return [k for k in a if not torch.equal(a[k], b[k])]


def test_wan22_pair_takes_a_strength_per_expert(wan, loras):
    """high -> the high-noise `transformer`, low -> `transformer_2`, as diffusers' fuse_lora
    with `load_into_transformer_2`."""
    pair = copy.deepcopy(wan)
    pair.register_modules(transformer_2=copy.deepcopy(wan.transformer))
    dits = {"transformer": pair.transformer, "transformer_2": pair.transformer_2}
    patcher = LoraPatcher(LoraLibrary((str(loras),)), type(pair), dits)
    base = {name: _state(dit) for name, dit in dits.items()}
    item = {"name": "kohya", "high": 0.7, "low": -0.3}
    with patcher.applied(patcher.resolve([item])):
        ours = {name: _state(dit) for name, dit in dits.items()}
    assert all(not _same(base[n], _state(d)) for n, d in dits.items()), "not restored"
    reference = copy.deepcopy(pair)
    path = str(loras / "kohya.safetensors")
    reference.load_lora_weights(path, adapter_name="high")
    reference.load_lora_weights(path, adapter_name="low", load_into_transformer_2=True)
    reference.transformer.set_adapters(["high"], [0.7])
    reference.transformer_2.set_adapters(["low"], [-0.3])
    reference.fuse_lora(components=["transformer", "transformer_2"])
    reference.unload_lora_weights()
    for name in dits:
        fused_state = _state(getattr(reference, name))
        assert _same(base[name], ours[name]), f"{name} did not change"
        assert not _same(fused_state, ours[name]), f"{name} differs from diffusers'"


def test_flux_loras_equal_diffusers_fuse_lora(loras):
    """PEFT format, and Kohya's fused q/k/v split by diffusers' converter, with alpha."""
    flux = build_preset("tiny-flux")
    kohya_flux_lora(loras / "other" / "kohya_flux.safetensors", flux.transformer, seed=6)
    patcher = LoraPatcher(LoraLibrary((str(loras),)), type(flux), {"transformer": flux.transformer})
    base = _state(flux.transformer)
    for name, layers in (("other/flux", 2 * len(FLUX_TARGETS)), ("other/kohya_flux", 2 * 4)):
        items = [{"name": name, "strength": 0.6}]
        with patcher.applied(patcher.resolve(items)):
            ours = _state(flux.transformer)
        assert not _same(base, _state(flux.transformer))
        reference = fused(flux, loras, items)
        assert len(_same(base, ours)) == layers  # both double blocks' layers
        assert not _same(_state(reference.transformer), ours), name


# -- names and formats (pure logic) ----------------------------------------------------------------


@pytest.mark.fast
def test_names_resolve_only_inside_the_folders(tmp_path):
    inside, outside = tmp_path / "loras", tmp_path / "elsewhere"
    (inside / "style").mkdir(parents=True)
    outside.mkdir()
    (inside / "style" / "a.safetensors").write_bytes(b"x")
    (outside / "b.safetensors").write_bytes(b"x")
    (inside / "b.safetensors").symlink_to(outside / "b.safetensors")
    os.symlink(outside, inside / "linked")
    library = LoraLibrary((str(inside),))
    assert library.names() == ["style/a.safetensors"]
    assert library.resolve("style/a") == (inside / "style" / "a.safetensors").resolve()
    for name, reason in [
        ("b.safetensors", "leads outside"),
        ("linked/b.safetensors", "leads outside"),
        ("../elsewhere/b", "no '..'"),
        (str(outside / "b.safetensors"), "no absolute path"),
        ("style\\a", "no absolute path"),
        ("xyz", r"no such LoRA \(GET /v1/loras lists them\)$"),
        ("style/b", "no such LoRA .*; did you mean style/a.safetensors\\?"),
        # names no file can have: the file system's refusal (ENAMETOOLONG) was a server error
        ("x" * 300, "each folder or file name in it .* at most 255 bytes .*got 312"),
        ("style/" + "é" * 128 + ".safetensors", "got 268 in"),  # 2 bytes a character
        ("é" * 128 + "/a", "got 256 in"),
        ("a" * 244, "got 256 in"),  # looked up as a * 244 + .safetensors
        ("a\0b", "a name holds no NUL character"),
    ]:
        with pytest.raises(LoraError, match=reason):
            library.resolve(name)
    longest = inside / ("a" * 243 + ".safetensors")  # 255 bytes: a file may have it
    longest.write_bytes(b"x")
    assert library.resolve("a" * 243) == library.resolve(longest.name) == longest.resolve()
    with pytest.raises(LoraError, match="start it with --lora-dir"):
        LoraLibrary(()).resolve("a")


@pytest.mark.fast
def test_command_line_lora_forms():
    assert parse_lora("a.safetensors") == {"name": "a.safetensors", "strength": 1.0}
    assert parse_lora("dir/a:0.5") == {"name": "dir/a", "strength": 0.5}
    assert parse_lora("w22:1,0.25") == {"name": "w22", "high": 1.0, "low": 0.25}
    for bad in ("a:x", ":1", "a:1,2,3"):
        with pytest.raises(ValueError, match="--lora must be NAME"):
            parse_lora(bad)
