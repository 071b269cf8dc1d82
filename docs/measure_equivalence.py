"""Make the distance tables of docs/equivalence.md: every request of
tests/parallel/test_equivalence.py on every plan, legitimate and deliberately broken
(PARADIT_BREAK_PLAN), against world size 1.

    python docs/measure_equivalence.py > measured.jsonl           # both models, ~10 min
    python docs/measure_equivalence.py tiny-flux > measured.jsonl

One backend per plan (CPU, one thread per rank, --save-latents); each job is compared with
`paradit.backend.tools.equivalence.compare`, as `paradit verify` does. Prints one JSON line per job,
then the summary tables (worst legitimate request; mildest request a break affects).
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_equivalence import REQUESTS  # noqa: E402

from paradit.backend.client.local import LocalBackend  # noqa: E402
from paradit.backend.config import ServeConfig  # noqa: E402
from paradit.backend.tools.equivalence import FLOAT32, IDENTICAL, compare, json_safe  # noqa: E402
from paradit.backend.tools.verify import decode_png  # noqa: E402

PLANS = {  # name: (world size, plan flags)
    "CFG": (2, ()),
    "Ulysses 2": (2, ("--cfg-degree", "1")),
    "Ulysses 3": (3, ()),
    "CFG x Ulysses 2": (4, ()),
}
BREAKS = {  # kind: the plans it is measured on
    "cfg-swap": ("CFG",),
    "drop-shard": ("Ulysses 2", "Ulysses 3"),
    "dup-shard": ("Ulysses 2", "Ulysses 3"),
    "text-other-rank": ("Ulysses 2", "CFG"),
}


def run(root: str, model: str, world_size: int, flags=(), kind: str = "") -> list:
    env = (("PARADIT_BREAK_PLAN", kind),) if kind else ()
    spec = ServeConfig.from_argv(
        ["--save-latents", *flags],
        model=model,
        world_size=world_size,
        device="cpu",
        threads_per_rank=1,
        output_dir=f"{root}/{model}-{world_size}-{'-'.join(flags)}-{kind}",
        timeout_s=120,
    )
    outputs = []
    with LocalBackend(spec, start_timeout_s=300, env=dict(env)) as backend:
        client = backend.client
        for body in REQUESTS[model]:
            job = client.wait(client.submit(body), timeout_s=300)
            pngs = [client.frame(job["id"], i) for i in range(job["num_frames"])]
            outputs.append((np.stack([decode_png(p) for p in pngs]), client.latents(job["id"])))
    return outputs


def measure(model: str, root: str) -> list[dict]:
    reference = run(root, model, 1)
    cases = [(name, "") for name, (size, _) in PLANS.items() if size < 4 or model == "tiny-wan"]
    cases += [(plan, kind) for kind, plans in BREAKS.items() for plan in plans]
    rows = []
    for plan, kind in cases:
        world_size, flags = PLANS[plan]
        outputs = run(root, model, world_size, flags, kind)
        for index, (ref, got) in enumerate(zip(reference, outputs, strict=True)):
            result = compare(ref[0], got[0], FLOAT32, ref[1], got[1])
            row = {"model": model, "plan": plan, "break": kind, "request": index}
            row |= {"verdict": result.verdict, "latent_rel_l2": result.latent_rel_l2}
            row |= {k: result.overall[k] for k in ("max_abs", "mean_abs", "min_frame_psnr")}
            print(json.dumps(json_safe(row)), flush=True)
            rows.append(row)
    return rows


def summary(rows: list[dict]) -> None:
    print("\n| model | break | plan | requests | max_abs | mean_abs | worst PSNR | latent_rel_l2 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["model"], row["break"], row["plan"]), []).append(row)
    for (model, kind, plan), group in groups.items():
        if kind:  # the mildest request the break affects
            hit = [r for r in group if r["verdict"] != IDENTICAL] or group
            pick, cmp, label = min, "≥ ", f"{len(hit)} of {len(group)} affected"
            psnr = max(r["min_frame_psnr"] for r in hit)
        else:  # the worst request
            hit, pick, cmp = group, max, ""
            label = f"{len(group)} ({sum(r['verdict'] == IDENTICAL for r in group)} identical)"
            psnr = min(r["min_frame_psnr"] for r in hit)
        cells = [pick(r[k] for r in hit) for k in ("max_abs", "mean_abs", "latent_rel_l2")]
        psnr_text = "inf" if math.isinf(psnr) else f"{'≤ ' if kind else ''}{psnr:.1f}"
        print(
            f"| {model} | {kind or '-'} | {plan} | {label} | {cmp}{cells[0]} | "
            f"{cmp}{cells[1]:.2g} | {psnr_text} | {cmp}{cells[2]:.2g} |"
        )


if __name__ == "__main__":
    models = sys.argv[1:] or sorted(REQUESTS)
    with tempfile.TemporaryDirectory(prefix="paradit-equivalence-") as root:
        summary([row for model in models for row in measure(model, root)])
