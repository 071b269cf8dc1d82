"""What a rank imports before it loads its model (`warm_imports`), and the imports' objects
frozen once per process (`settle_imports`): `serve` forks its ranks after them
(`forked.py`), and every rank's start settles them (`rank.py`)."""

from __future__ import annotations

import contextlib
import gc


def warm_imports(model: str) -> None:
    """Import what loading `model` on a rank imports: the runtime, diffusers and the
    pipeline class of a preset or a folder (a hub id: diffusers only)."""
    import diffusers

    from ..models.loading import ModelSource, pipeline_index
    from ..models.presets import preset_pipeline_class
    from ..runtime import engine  # noqa: F401  (torch.distributed, FSDP2, the memory plan)

    try:
        source = ModelSource.parse(model)
    except ValueError:  # reported when the rank loads it
        return
    class_name = ""
    if source.kind == "preset":
        class_name = preset_pipeline_class(source.name)
    elif source.kind == "folder":
        with contextlib.suppress(OSError, ValueError):
            class_name = str((pipeline_index(source.name) or {}).get("_class_name", ""))
    if class_name:
        getattr(diffusers, class_name, None)  # diffusers imports the class's modules lazily


def settle_imports(model: str) -> None:
    """Import what a rank of `model` imports; the first time in a process (a forked child
    inherits it), then move every object there is to the garbage collector's permanent
    generation.

    The imports' objects (some 400,000 with diffusers) live as long as the process; frozen,
    a full collection walks only what came after them: `release_freed_memory`'s collection
    at every load and rebuild takes milliseconds instead of 0.2-0.3 s of CPU, and a forked
    rank's collections no longer write to the pages it shares with its parent. Only once:
    what exists at a rebuild (the old model, if anything still held it) must stay
    collectable."""
    warm_imports(model)
    if not gc.get_freeze_count():
        gc.collect()  # what is garbage now is not kept for good
        gc.freeze()
