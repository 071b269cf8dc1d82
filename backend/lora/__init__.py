"""LoRAs per job: files under `--lora-dir` (`library.py`), their layers in diffusers' names
(`parse.py`), applied to each rank's own weight rows and removed after the job (`patch.py`)."""

from .library import DEFAULT_CACHE_BYTES, Lora, LoraLibrary
from .parse import LayerDelta, LoraError
from .patch import JobLora, LoraPatcher

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "JobLora",
    "LayerDelta",
    "Lora",
    "LoraError",
    "LoraLibrary",
    "LoraPatcher",
]
