"""`paradit batch`: prompts x seeds as a validation set, one folder per item.

Every item is its own job (batch size 1, its own seed), submitted to the backend's queue,
which hands each to the next free data-parallel replica (`--dp-degree`); so each item's
output is the one a single run of that item gives. Items are written in index order into
`OUT/NNNN-seedS/` (NNNN: the prompt's line among the non-empty ones); an item whose folder
already has its job.json (written last) is complete and skipped when the batch runs again.
At the end `OUT/manifest.json` lists every item and `OUT/contact_sheet.png` shows the first
frame of each, labelled.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("paradit")

BATCH_WINDOW = 8
"""Jobs kept in the backend's queue at once (at least two per replica)."""
MANIFEST = "manifest.json"
CONTACT_SHEET = "contact_sheet.png"
THUMB_SIDE = 160
LABEL_HEIGHT = 28


@dataclass(frozen=True)
class Item:
    """One prompt with one seed."""

    index: int
    prompt_index: int
    prompt: str
    seed: int

    def __post_init__(self) -> None:
        if self.index < 0 or self.prompt_index < 0:
            raise ValueError("item indices must be >= 0")

    @property
    def folder(self) -> str:
        return f"{self.prompt_index:04d}-seed{self.seed}"


def items(prompts: list[str], seeds: list[int]) -> list[Item]:
    """Prompts x seeds, prompt-major, numbered in that order."""
    pairs = [(i, p, s) for i, p in enumerate(prompts) for s in seeds]
    return [Item(n, i, p, s) for n, (i, p, s) in enumerate(pairs)]


def complete(out: Path, item: Item) -> bool:
    return (out / item.folder / "job.json").is_file()


class Progress:
    """Logs items done and an estimate of the time left (from the items run so far)."""

    def __init__(self, total: int, skipped: int):
        self.total, self.done, self.run = total, skipped, 0
        self.started = time.monotonic()

    def item_done(self) -> None:
        self.done += 1
        self.run += 1
        left = self.total - self.done
        per_item = (time.monotonic() - self.started) / self.run
        log.info(
            "batch: %d/%d items done, about %s left",
            self.done,
            self.total,
            f"{math.ceil(per_item * left)}s" if left else "0s",
        )


def run_batch(client: Any, base_body: dict[str, Any], work: list[Item], out: Path) -> int:
    """Run the items not yet complete, write manifest and contact sheet; the failures count."""
    out.mkdir(parents=True, exist_ok=True)
    todo = [item for item in work if not complete(out, item)]
    if len(todo) < len(work):
        log.info(
            "batch: %d of %d items already complete, skipped", len(work) - len(todo), len(work)
        )
    window = max(BATCH_WINDOW, 2 * _replicas(client))
    progress = Progress(len(work), len(work) - len(todo))
    failed = 0
    pending: deque[tuple[Item, str]] = deque()
    for item in todo:
        if len(pending) >= window:  # keep the backend's queue short
            failed += _finish_one(client, out, *pending.popleft(), progress)
        pending.append(
            (item, client.submit({**base_body, "prompt": item.prompt, "seed": item.seed}))
        )
    while pending:
        failed += _finish_one(client, out, *pending.popleft(), progress)
    manifest = write_manifest(out, work)
    write_contact_sheet(out, manifest)
    return failed


def _replicas(client: Any) -> int:
    return int(client.info().get("plan", {}).get("dp_degree", 1))


def _finish_one(client: Any, out: Path, item: Item, job_id: str, progress: Progress) -> int:
    """Wait for one item's job and download it; 1 if it failed (the batch goes on)."""
    from ..client.http import BackendError

    folder = out / item.folder
    try:
        client.download(client.wait(job_id), folder)
        log.info("wrote %s", folder)
        progress.item_done()
        return 0
    except BackendError as exc:
        log.error("%s: %s", folder, exc)
        return 1


def write_manifest(out: Path, work: list[Item]) -> list[dict[str, Any]]:
    """manifest.json: per item its index, prompt, seed, folder, files and seconds (null
    files and seconds for an item that did not complete)."""
    rows = []
    for item in work:
        row: dict[str, Any] = {
            "index": item.index,
            "prompt": item.prompt,
            "seed": item.seed,
            "folder": item.folder,
            "files": None,
            "seconds": None,
        }
        if complete(out, item):
            record = json.loads((out / item.folder / "job.json").read_text())
            row["files"] = [f"{item.folder}/{name}" for name in record.get("files", [])]
            row["seconds"] = record.get("timings", {}).get("total_s")
            row["replica"] = record.get("replica")
        rows.append(row)
    (out / MANIFEST).write_text(json.dumps({"items": rows}, indent=2) + "\n")
    return rows


def write_contact_sheet(out: Path, manifest: list[dict[str, Any]]) -> Path | None:
    """The first frame of every complete item in a grid, each labelled index, seed, prompt."""
    from PIL import Image, ImageDraw

    rows = [row for row in manifest if row["files"]]
    if not rows:
        return None
    columns = min(len(rows), max(1, math.ceil(math.sqrt(len(rows)))))
    lines = math.ceil(len(rows) / columns)
    cell_h = THUMB_SIDE + LABEL_HEIGHT
    sheet = Image.new("RGB", (columns * THUMB_SIDE, lines * cell_h), "white")
    draw = ImageDraw.Draw(sheet)
    for n, row in enumerate(rows):
        x, y = (n % columns) * THUMB_SIDE, (n // columns) * cell_h
        with Image.open(out / row["folder"] / "frames" / "000000.png") as frame:
            thumb = frame.convert("RGB")
            thumb.thumbnail((THUMB_SIDE, THUMB_SIDE))
        sheet.paste(thumb, (x + (THUMB_SIDE - thumb.width) // 2, y))
        label = f"{row['index']:04d} seed {row['seed']}"
        draw.text((x + 3, y + THUMB_SIDE + 1), label, fill="black")
        draw.text((x + 3, y + THUMB_SIDE + 14), row["prompt"][:24], fill="dimgray")
    path = out / CONTACT_SHEET
    sheet.save(path, format="PNG")
    return path
