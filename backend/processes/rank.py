"""What one rank runs to join the group and load the model; ranks 1..N-1 then answer rank 0's
messages until told to stop (`run_worker`). Used by `serve` under every launcher and by the
ranks `serve` starts itself (`child.py`)."""

from __future__ import annotations

import logging
import os
import signal
from datetime import timedelta
from typing import TYPE_CHECKING

import torch

from ..config import ServeConfig
from ..kernels import KERNELS, device_refusal
from ..runtime.control import Worker, channel
from ..runtime.group import Abort, Group, join_group, pick_device
from ..runtime.launch_env import LaunchEnv
from ..runtime.progress import Heartbeat

if TYPE_CHECKING:  # the engine's imports wait until a rank loads its model
    from ..runtime.engine import Carried

log = logging.getLogger(__name__)


def _threads(config: ServeConfig, env: LaunchEnv) -> int:
    if config.threads_per_rank:
        return config.threads_per_rank
    return max(1, (os.cpu_count() or 1) // max(1, env.local_world_size))


def start_rank(
    config: ServeConfig,
    env: LaunchEnv,
    store=None,
    abort: Abort = lambda: None,
    carried: Carried | None = None,
):
    """Join the group and load the model on this rank; `abort` ends start-up waits early;
    `carried`: what the runtime of the group this one rebuilds hands on (rank 0)."""
    from ..lora import LoraLibrary
    from ..runtime.engine import Runtime
    from .warm import settle_imports

    torch.set_num_threads(_threads(config, env))
    device = pick_device(config.device, env)
    refusal = device_refusal(config.attention, device.type) if config.attention in KERNELS else None
    if refusal is not None:  # before loading anything (auto's device is known only here)
        raise ValueError(refusal)
    settle_imports(config.model)  # frozen at the first start; a rebuild finds them so
    timeout = timedelta(seconds=config.timeout_s)
    group = join_group(env, device, timeout, store, abort, config.dp_degree)
    dtype = "bfloat16" if device.type == "cuda" else "float32"
    runtime = Runtime(
        group,
        config.model,
        config.plan_overrides(),
        dtype,
        config.memory_settings(),
        text_encoders=config.text_encoders,
        vaes=config.vaes,
        image_encoders=config.image_encoders,
        upscaler=config.upscaler,
        loras=LoraLibrary(config.lora_dirs, int(config.lora_cache_gib * 2**30)),
        attention_kernel=config.attention,
        fp8_compute=config.fp8_compute,
        int8_compute=config.int8_compute,
        compile_mode=config.compile,
        carried=carried,
    )
    return group, runtime


def run_worker(config: ServeConfig, env: LaunchEnv) -> int:
    """A rank other than 0: load, then answer rank 0's messages until told to stop."""
    from ..runtime.worker import serve_worker

    group: Group | None = None
    try:
        group, runtime = start_rank(config, env)
        store = group.store_client()
        heartbeat = Heartbeat(store, env.rank, runtime.progress, place=runtime.place).start()
        prefix = channel(group.replica, group.dp_degree)
        serve_worker(runtime, Worker(group.store, env.rank, prefix))
        heartbeat.stop()
        return 0
    except Exception as exc:  # rank 0 gone or load failed: say why in one line, exit non-zero
        log.error("rank %d stopping: %s: %s", env.rank, type(exc).__name__, exc)
        return 1
    except KeyboardInterrupt:  # an external launcher stops the group
        return 0
    finally:
        if group is not None:
            group.close()


def child_main(argv: list[str]) -> int:
    """Ranks 1..N-1 started by `serve` (see `child.py`, which set the death signal first)."""
    logging.basicConfig(
        level=os.environ.get("PARADIT_LOG", "WARNING").upper(),
        format="%(asctime)s rank%(process)d %(levelname)s %(name)s: %(message)s",
        force=True,  # a rank forked from rank 0 (`forked.py`) has rank 0's handlers
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # rank 0 decides when the group stops
    config = ServeConfig.from_argv(argv)
    env = LaunchEnv.from_environ()
    if env is None:
        raise SystemExit("paradit worker started without RANK/WORLD_SIZE")
    return run_worker(config, env)
