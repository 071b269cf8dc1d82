"""One host copy at load, whatever the source: the peak summed resident memory of `paradit
serve` and all its ranks while they load a model (until the backend is ready), at 1 and at 2
ranks, for a ~1 GB Wan DiT given as a ComfyUI single file (Wan 2.1 1.3B cut to 5 blocks,
with its text encoder and VAE files) and for a `random:` preset (each rank draws only its own
shard's rows).

    python docs/measure_memory.py                       # all three
    python docs/measure_memory.py file file-fp8         # the ~1 GB single files (fp32, fp8)
    python docs/measure_memory.py file-fp8-resident     # the fp8 file kept fp8 (--weights file)
    python docs/measure_memory.py random:wan2.1-t2v-1.3b

Prints one line per run and the 2-rank / 1-rank ratio per model (docs/memory.md has the
figures). CPU, one thread per rank; the resident memory is sampled every 20 ms from /proc (as
tests/memory/test_memory.py does).
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from comfy_files import WAN_PREFIX, wan_original, write_safetensors  # noqa: E402

from paradit.backend.client.local import LocalBackend  # noqa: E402
from paradit.backend.config import ServeConfig  # noqa: E402
from paradit.backend.memory.measure import tree_bytes  # noqa: E402

RANDOM_PRESET = "random:wan2.1-t2v-1.3b"


FILES = {
    "file": ("fp32", 5, "bf16"),
    "file-fp8": ("fp8_e4m3fn", 20, "bf16"),
    "file-fp8-resident": ("fp8_e4m3fn", 20, "file"),
}
"""A ~1 GB checkpoint: its format, how many of Wan 2.1 1.3B's 30 blocks it keeps, and
`--weights` (bf16: dequantized at load to the compute dtype; file: the fp8 layers kept)."""


def big_wan_files(folder: Path, fmt: str, blocks: int) -> tuple[str, tuple, tuple, int]:
    """A ~1 GB Wan DiT as ComfyUI's files: Wan 2.1 1.3B's architecture cut to `blocks` of
    its 30 blocks (in `fmt`, ComfyUI's key names), the random preset's UMT5 4096 and Wan VAE;
    returns the flags and the file's bytes."""
    from safetensors.torch import save_file

    from paradit.backend.models.random_presets import build_random_preset

    parts = frozenset({"transformer", "text_encoder", "vae"})
    pipe = build_random_preset(
        RANDOM_PRESET, components=parts, overrides={"transformer": {"num_layers": blocks}}
    )
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / f"wan2.1_t2v_1.3B_{blocks}_blocks_{fmt}.safetensors"
    write_safetensors(model, wan_original(pipe.transformer.state_dict()), fmt, WAN_PREFIX)
    encoder, vae = folder / "umt5_4096.safetensors", folder / "wan_2.1_vae.safetensors"
    state = pipe.text_encoder.state_dict()
    save_file({k: v for k, v in state.items() if "embed_tokens" not in k}, str(encoder))
    save_file(pipe.vae.state_dict(), str(vae))
    return str(model), (str(encoder),), (str(vae),), model.stat().st_size


def peak_at_load(config: ServeConfig, marker: str, log_file: Path) -> tuple[int, int, float]:
    """The peak summed resident bytes (RSS) and proportional set size (PSS) of the processes
    whose command line holds `marker` until the backend is ready, and the seconds it took."""
    peak, pss, done = [0], [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], tree_bytes(marker, "rss"))
            pss[0] = max(pss[0], tree_bytes(marker, "pss"))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        with LocalBackend(config, start_timeout_s=1800, log_file=log_file):
            seconds = time.perf_counter() - started
    finally:
        done.set()
        sampler.join()
    return peak[0], pss[0], seconds


def measure(
    name: str, model: str, work: Path, encoders=(), vaes=(), weights: str = "auto"
) -> float:
    peaks, shared = {}, {}
    for world_size in (1, 2):
        out = work / f"{name.replace(':', '_')}-{world_size}"
        config = ServeConfig(
            model=model,
            text_encoders=encoders,
            vaes=vaes,
            world_size=world_size,
            device="cpu",
            threads_per_rank=1,
            output_dir=str(out),
            weights=weights,
        )
        peak, pss, seconds = peak_at_load(config, str(out), work / f"{out.name}.log")
        peaks[world_size], shared[world_size] = peak, pss
        print(
            f"{name}: {world_size} rank(s): peak RSS {peak / 2**30:.2f} GiB, PSS "
            f"{pss / 2**30:.2f} GiB, ready in {seconds:.0f} s"
        )
    ratio = peaks[2] / peaks[1]
    print(f"{name}: 2 ranks / 1 rank = {ratio:.2f} (RSS), {shared[2] / shared[1]:.2f} (PSS)")
    return ratio


def main(argv: list[str]) -> None:
    wanted = argv or [*FILES, RANDOM_PRESET]
    with tempfile.TemporaryDirectory(prefix="paradit-memory-") as tmp:
        work = Path(tmp)
        for what in wanted:
            if what in FILES:
                fmt, blocks, weights = FILES[what]
                model, encoders, vaes, size = big_wan_files(work / what, fmt, blocks)
                print(f"{what}: {Path(model).name}, {size / 2**30:.2f} GiB, --weights {weights}")
                measure(what, model, work, encoders, vaes, weights)
            else:
                measure(what, what, work)


if __name__ == "__main__":
    main(sys.argv[1:])
