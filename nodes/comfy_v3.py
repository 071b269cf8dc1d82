"""The ComfyUI V3 nodes: thin wrappers around `pool.py` and `run.py`.

Imported only inside ComfyUI: the pack's `__init__.py` imports it once ComfyUI has loaded
`comfy_api`.
"""

from __future__ import annotations

import io as bytes_io
import os
from fractions import Fraction
from functools import cache

import comfy.model_management
import comfy.utils
import folder_paths
import PIL.Image
from comfy_api.latest import ComfyExtension, InputImpl, Types, io

from ..backend.cache import CacheSettings
from ..backend.models.preset_names import PRESET_NAMES
from ..backend.request import lora_item
from .params import (
    BACKEND_NODE_ID,
    BACKEND_PARAMS,
    BACKEND_TYPE,
    CACHE_NODE_ID,
    CACHE_PARAMS,
    DEVICES,
    FILE_PARAMS,
    IMAGE_EDIT,
    IMAGE_TO_VIDEO,
    KNOWN_HUB_MODELS,
    LORA_NODE_ID,
    LORA_PARAMS,
    NO_FILE,
    TEXT_TO_IMAGE,
    TEXT_TO_VIDEO,
    Param,
    TaskNode,
)
from .pickers import ComfyFolders
from .pool import BackendHandle, BackendPool, resolve_settings
from .run import (
    Generation,
    Interrupted,
    backend_summary,
    build_request,
    generate,
    image_to_png,
    to_image_tensor,
)

CATEGORY = "paradit"
PREVIEW_MAX_SIDE = 512
Backend = io.Custom(BACKEND_TYPE)


@cache
def pool() -> BackendPool:
    """The one pool of this ComfyUI process: its backend lives across prompts."""
    return BackendPool(os.path.join(folder_paths.get_temp_directory(), "paradit"))


def comfy_folders() -> ComfyFolders:
    return ComfyFolders(folder_paths)


def local_folders() -> dict[str, str]:
    return comfy_folders().local_folders()


def backend_options() -> dict[str, list[str]]:
    """The backend node's combo options: the presets, the user's diffusers folders, model
    files and hub ids for `model`; each file picker's files after its "none"."""
    folders = comfy_folders()
    models = [*PRESET_NAMES, *folders.local_folders(), *folders.files("model"), *KNOWN_HUB_MODELS]
    options = {"model": list(dict.fromkeys(models)), "device": list(DEVICES)}
    for param in FILE_PARAMS:
        options[param.name] = [NO_FILE, *folders.files(param.name)]
    return options


def lora_folders() -> list[str]:
    """ComfyUI's `loras` folders (models/loras and those extra_model_paths.yaml adds)."""
    return list(folder_paths.get_folder_paths("loras"))


def lora_options() -> list[str]:
    """The LoRA files ComfyUI lists, as the backend names them ("/" between folders)."""
    return [name.replace("\\", "/") for name in folder_paths.get_filename_list("loras")]


def widget(param: Param, options: list[str] | None = None) -> io.Input:
    common = {
        "default": param.default,
        "tooltip": param.tooltip or None,
        "optional": param.optional or None,
    }
    if param.kind == "int":
        return io.Int.Input(
            param.name,
            min=int(param.low),
            max=int(param.high),
            step=int(param.step),
            control_after_generate=param.control_after_generate or None,
            **common,
        )
    if param.kind == "float":
        return io.Float.Input(
            param.name, min=param.low, max=param.high, step=param.step, round=0.01, **common
        )
    if param.kind in ("string", "text"):
        return io.String.Input(param.name, multiline=param.kind == "text", **common)
    if param.kind == "combo":
        return io.Combo.Input(param.name, options=options or list(param.choices), **common)
    if param.kind == "boolean":
        return io.Boolean.Input(param.name, **common)
    raise ValueError(f"unknown widget kind {param.kind!r} for {param.name}")


class ParaDiTBackend(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        options = backend_options()
        return io.Schema(
            node_id=BACKEND_NODE_ID,
            display_name="ParaDiT Backend",
            category=CATEGORY,
            description="Starts a multi-GPU paradit backend (its own process group, kept alive "
            "across prompts and restarted when these inputs change), or connects to a running "
            "`paradit serve` by URL.",
            inputs=[widget(p, options.get(p.name)) for p in BACKEND_PARAMS],
            outputs=[
                Backend.Output(display_name="backend"),
                io.String.Output(display_name="plan"),
            ],
        )

    @classmethod
    def execute(cls, **values) -> io.NodeOutput:
        folders = comfy_folders()
        settings = resolve_settings(
            **values,
            local_folders=folders.local_folders(),
            file_path=folders.full_path,
            lora_dirs=tuple(lora_folders()),
        )
        handle = pool().handle(settings)
        return io.NodeOutput(handle, backend_summary(handle.client().info()))


class _ComfyProgress:
    """Progress and cancel through ComfyUI.

    ComfyUI's progress hook itself raises InterruptProcessingException once Cancel was pressed
    (and clears the flag); that is remembered here so the backend job still gets cancelled.
    """

    def __init__(self, total: int):
        self.bar = comfy.utils.ProgressBar(total)
        self.seen_interrupt = False

    def on_step(self, step: int, total: int) -> None:
        if self.seen_interrupt:
            return
        try:
            self.bar.update_absolute(step, total)
        except comfy.model_management.InterruptProcessingException:
            self.seen_interrupt = True

    def on_preview(self, step: int, total: int, png: bytes) -> None:
        """Show the backend's latent preview on the node, as ComfyUI's samplers do."""
        if self.seen_interrupt:
            return
        image = PIL.Image.open(bytes_io.BytesIO(png)).convert("RGB")
        try:
            self.bar.update_absolute(step, total, ("JPEG", image, PREVIEW_MAX_SIDE))
        except comfy.model_management.InterruptProcessingException:
            self.seen_interrupt = True

    def interrupted(self) -> bool:
        return self.seen_interrupt or comfy.model_management.processing_interrupted()

    @staticmethod
    def interrupt_error() -> Exception:
        """ComfyUI's interrupt, with its flag cleared as ComfyUI's own check would."""
        comfy.model_management.interrupt_current_processing(False)
        return comfy.model_management.InterruptProcessingException()


def run_task(
    node: TaskNode, backend: BackendHandle, values: dict, image=None, more_images=()
) -> Generation:
    more = tuple(image_to_png(other) for other in more_images if other is not None)
    request = build_request(node, values, None if image is None else image_to_png(image), more)
    if backend.loras:  # what the chained ParaDiTLora nodes added
        request["loras"] = backend.lora_items()
    if backend.cache:  # what a chained ParaDiTStepCache node set
        request["cache"] = dict(backend.cache)
    progress = _ComfyProgress(int(values["steps"]))
    try:
        return generate(
            backend.client(),
            node,
            request,
            on_step=progress.on_step,
            on_preview=progress.on_preview,
            interrupted=progress.interrupted,
        )
    except Interrupted:
        raise progress.interrupt_error() from None


def video_output(result: Generation, images):
    if result.video is not None:
        return InputImpl.VideoFromFile(bytes_io.BytesIO(result.video))
    components = Types.VideoComponents(images=images, frame_rate=Fraction(result.fps))
    return InputImpl.VideoFromComponents(components)


def task_schema(node: TaskNode, description: str) -> io.Schema:
    inputs = [Backend.Input("backend")]
    for index, name in enumerate(node.image_inputs):
        if index == 0:
            what = "The image to edit" if node.task == IMAGE_EDIT.task else "The start image"
            inputs.append(io.Image.Input(name, tooltip=f"{what} (first of the batch)."))
        else:
            tooltip = f"Reference image {index + 1} (optional; first of the batch)."
            inputs.append(io.Image.Input(name, optional=True, tooltip=tooltip))
    inputs += [widget(p) for p in node.params]
    outputs = [io.Image.Output(display_name="images")]
    if node.makes_video:
        outputs.append(io.Video.Output(display_name="video"))
    outputs.append(io.String.Output(display_name="info"))
    if node.gives_audio:
        outputs.append(io.Audio.Output(display_name="audio"))
    return io.Schema(
        node_id=node.node_id,
        display_name=node.display_name,
        category=CATEGORY,
        description=description,
        inputs=inputs,
        outputs=outputs,
    )


def audio_output(result: Generation) -> dict | None:
    """ComfyUI's AUDIO: {"waveform": (1, channels, samples), "sample_rate"}; None when the
    model made no audio track."""
    if result.audio is None:
        return None
    import torch

    waveform, rate = result.audio
    return {"waveform": torch.from_numpy(waveform).unsqueeze(0), "sample_rate": rate}


def task_output(node: TaskNode, result: Generation) -> io.NodeOutput:
    images = to_image_tensor(result.frames)
    outputs = [images]
    if node.makes_video:
        outputs.append(video_output(result, images))
    outputs.append(result.info)
    if node.gives_audio:
        outputs.append(audio_output(result))
    return io.NodeOutput(*outputs)


class ParaDiTTextToVideo(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return task_schema(
            TEXT_TO_VIDEO,
            "Text to video on the paradit backend (e.g. Wan 2.1, CogVideoX; LTX-2 with its audio).",
        )

    @classmethod
    def execute(cls, backend: BackendHandle, **values) -> io.NodeOutput:
        return task_output(TEXT_TO_VIDEO, run_task(TEXT_TO_VIDEO, backend, values))


class ParaDiTImageToVideo(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return task_schema(
            IMAGE_TO_VIDEO,
            "Image to video on the paradit backend (Wan 2.1 I2V, Wan 2.2 I2V-A14B and TI2V-5B, "
            "CogVideoX I2V).",
        )

    @classmethod
    def execute(cls, backend: BackendHandle, image, **values) -> io.NodeOutput:
        return task_output(IMAGE_TO_VIDEO, run_task(IMAGE_TO_VIDEO, backend, values, image))


class ParaDiTTextToImage(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return task_schema(TEXT_TO_IMAGE, "Text to image on the paradit backend (e.g. Flux).")

    @classmethod
    def execute(cls, backend: BackendHandle, **values) -> io.NodeOutput:
        return task_output(TEXT_TO_IMAGE, run_task(TEXT_TO_IMAGE, backend, values))


class ParaDiTImageEdit(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return task_schema(
            IMAGE_EDIT,
            "Edit an image by instruction on the paradit backend (Qwen-Image-Edit; Flux.2 with "
            "reference images). Width and height 0: the first image's aspect at the model's "
            "pixel budget.",
        )

    @classmethod
    def execute(
        cls, backend: BackendHandle, image, image_2=None, image_3=None, **values
    ) -> io.NodeOutput:
        result = run_task(IMAGE_EDIT, backend, values, image, (image_2, image_3))
        return task_output(IMAGE_EDIT, result)


class ParaDiTLora(io.ComfyNode):
    """Chained like LoraLoaderModelOnly: backend in, the same backend with one more LoRA out."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        options = {"lora_name": lora_options()}
        return io.Schema(
            node_id=LORA_NODE_ID,
            display_name="ParaDiT LoRA",
            category=CATEGORY,
            description="Adds a LoRA to the jobs of the paradit backend it is given (chain "
            "several; they apply in order). The backend applies it to its loaded, sharded "
            "weights for each job and removes it afterwards: switching LoRAs reloads nothing.",
            inputs=[Backend.Input("backend")]
            + [widget(p, options.get(p.name)) for p in LORA_PARAMS],
            outputs=[Backend.Output(display_name="backend")],
        )

    @classmethod
    def execute(
        cls, backend: BackendHandle, lora_name: str, strength: float, expert: str = "both"
    ) -> io.NodeOutput:
        return io.NodeOutput(backend.with_lora(lora_item(lora_name, strength, expert)))


class ParaDiTStepCache(io.ComfyNode):
    """Chained like the LoRA node: backend in, the same backend with a step cache out."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id=CACHE_NODE_ID,
            display_name="ParaDiT Step Cache",
            category=CATEGORY,
            description="Skips most of the transformer at steps where it would change little "
            "(First-Block-Cache). Every rank takes the same decision; job.json records which "
            "steps were computed.",
            inputs=[Backend.Input("backend")] + [widget(p) for p in CACHE_PARAMS],
            outputs=[Backend.Output(display_name="backend")],
        )

    @classmethod
    def execute(cls, backend: BackendHandle, method: str, threshold: float) -> io.NodeOutput:
        cache = CacheSettings.parse({"method": method, "threshold": threshold})
        info = backend.client().info()
        if not info["limits"].get("step_cache"):  # the node's schema cannot know the model
            raise ValueError(
                f"the backend's model {info['model']!r} has no step cache: remove the "
                "ParaDiT Step Cache node"
            )
        return io.NodeOutput(backend.with_cache(cache.to_dict()))


NODES: list[type[io.ComfyNode]] = [
    ParaDiTBackend,
    ParaDiTTextToVideo,
    ParaDiTImageToVideo,
    ParaDiTTextToImage,
    ParaDiTImageEdit,
    ParaDiTLora,
    ParaDiTStepCache,
]


class ParaDiTExtension(ComfyExtension):
    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        return NODES


async def comfy_entrypoint() -> ParaDiTExtension:
    return ParaDiTExtension()
