"""The layout keeps its promises: no import cycles, and the frontends' side stays torch-free.

Cost: about 1 s (in the suite's two-worker run on 2 cores).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("backend", "nodes", "web")


def _module_name(path: Path) -> str:
    parts = ["paradit", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every paradit module `path` imports, at module level or inside functions."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c.startswith("paradit."))
    return found


def _graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {_module_name(p): p for p in files}
    return {name: {m for m in _imports(path) if m in modules} for name, path in modules.items()}


@pytest.mark.fast
def test_no_import_cycles():
    graph = _graph()
    # packages import their own modules in __init__; an edge into a package is an edge to it
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, trail: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if nxt.startswith(node + "."):
                continue  # a package's __init__ importing its own module
            if state.get(nxt) == 1:
                cycle.extend([*trail[trail.index(nxt) :], nxt] if nxt in trail else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, [*trail, nxt]):
                return True
        state[node] = 2
        return False

    for start in sorted(graph):
        if state.get(start) is None and visit(start, [start]):
            break
    assert not cycle, " -> ".join(cycle)


def test_frontend_side_imports_no_torch():
    """The contract, the config, the client and the frontends' logic load without torch:
    ComfyUI and the web app stay light, and the CLI starts fast."""
    code = (
        "import sys\n"
        "import paradit.backend.contract, paradit.backend.config, paradit.backend.client\n"
        "import paradit.backend.client.connect, paradit.nodes.pool, paradit.nodes.run\n"
        "import paradit.web.forms, paradit.web.progress, paradit.backend.tools.cli\n"
        "print('torch' in sys.modules, 'diffusers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.fast
def test_nothing_on_a_rank_imports_http_or_the_frontends():
    graph = _graph()
    ranks = [
        m for m in graph if m.startswith(("paradit.backend.runtime", "paradit.backend.models"))
    ]
    ranks += [m for m in graph if m.startswith("paradit.backend.parallel")]
    for module in ranks:
        bad = {
            m
            for m in graph[module]
            if m.startswith(
                (
                    "paradit.backend.serving",
                    "paradit.backend.client",
                    "paradit.backend.tools",
                    "paradit.web",
                    "paradit.nodes",
                )
            )
        }
        assert not bad, (module, bad)
        source = (ROOT / Path(*module.split(".")[1:])).with_suffix(".py")
        if source.exists():
            text = source.read_text()
            assert "fastapi" not in text and "uvicorn" not in text, module


def _self_fields(path: Path) -> set[str]:
    """The attributes `path`'s methods set on `self`."""
    return {
        node.attr
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


@pytest.mark.fast
def test_a_job_returns_its_results():
    """A job's results come back from `run_on_rank` as a `RankResult`: neither the runtime nor
    the LoRA patcher keeps a field for the last job."""
    for relative in ("backend/runtime/engine.py", "backend/lora/patch.py"):
        left = {name for name in _self_fields(ROOT / relative) if name.startswith("last")}
        assert not left, (relative, left)


@pytest.mark.fast
def test_no_test_copies_the_job_sequence():
    """A test that runs the pipeline to the latents and then decodes them with the family's
    tiles carries a copy of the job sequence: it calls `runtime.job.run_on_rank` instead
    (`tests/image_jobs.py`)."""
    for path in sorted((ROOT / "tests").glob("*.py")):
        if path.name == Path(__file__).name:
            continue
        text = path.read_text()
        decodes = "tiled_decode(" in text or "decode_tiles(" in text
        assert not ('output_type="latent"' in text and decodes), path.name
