"""The layout keeps its promises (docs/architecture.md states them): no import cycles, the
frontends' side (the ComfyUI node module's imports included) torch-free, nothing on a rank
importing rank 0's serving, each folder importing only the floors below it, a job's results
returned rather than left on the runtime, no test with its own copy of the job sequence.

Cost: about 5 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from doc_pages import repo_paths

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("backend", "nodes", "web")


def _module_name(path: Path) -> str:
    parts = ["paradit", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The statements run when the module is imported (`try` blocks included; what runs only
    for type checkers or inside functions not)."""
    out: list[ast.stmt] = []
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Try):
            todo.extend([*node.body, *node.orelse, *node.finalbody])
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            todo.extend([*node.body, *node.orelse])
        else:
            out.append(node)
    return out


def _imports(path: Path, modules: set[str], *, lazy: bool = True) -> set[str]:
    """Every paradit module `path` imports, at module level or (`lazy`) inside functions.
    `from X import name` is an edge to the module `X.name` where it is one (what the import
    needs is that module: its package is already on its way), else to `X` (a name `X`
    defines: `X` must have run to the end)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree) if lazy else _top_level(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            candidates = [
                f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target
                for alias in node.names
            ]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c.startswith("paradit.") and c != name)
    return found


def _graph(*, lazy: bool = True) -> dict[str, set[str]]:
    """Module -> the paradit modules it imports (`lazy`: inside functions too)."""
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {_module_name(p): p for p in files}
    return {
        name: {m for m in _imports(path, set(modules), lazy=lazy) if m in modules}
        for name, path in modules.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of `graph` (its modules in order, the first again at the end), or []
    for none. Every edge counts: function-level imports (they run as a job does, and moving one
    to the top of its file must not break start-up) and a package's `__init__` importing its
    own modules (the family registry)."""
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, trail: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle.extend([*trail[trail.index(nxt) :], nxt])
                return True
            if state.get(nxt) is None and visit(nxt, [*trail, nxt]):
                return True
        state[node] = 2
        return False

    for start in sorted(graph):
        if state.get(start) is None and visit(start, [start]):
            break
    return cycle


@pytest.mark.fast
def test_no_import_cycles():
    cycle = _cycle(_graph())
    assert not cycle, " -> ".join(cycle)


@pytest.mark.fast
def test_the_cycle_check_sees_the_registry_and_function_level_imports():
    """The knot issue 51 untied, put back in a copy of the graph: a driver that reads the
    registry, the registry importing its family folders, a family folder importing the
    driver (as Wan's `single_file.py` would to call `recognise`)."""
    graph = {module: set(imported) for module, imported in _graph().items()}
    families = "paradit.backend.models.families"
    detect = "paradit.backend.models.single_file.detect"
    assert families in _reached(graph, detect)  # the recognitions read the specs
    assert f"{families}.wan" in graph[families]  # the registry's line
    graph[f"{families}.wan.single_file"].add(detect)
    assert _cycle(graph)


def _reached(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every paradit module `start` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for module in graph[todo.pop()] - seen:
            seen.add(module)
            todo.append(module)
    return seen


def test_frontend_side_imports_no_torch():
    """The contract, the config, the client, the presets' names and the frontends' logic load
    without torch: ComfyUI and the web app stay light, and the CLI starts fast. The ComfyUI
    node module itself needs ComfyUI: every paradit module it reaches is imported instead."""
    graph = _graph(lazy=False)  # what importing it runs
    comfy = sorted(_reached(graph, "paradit.nodes.comfy_v3") - {"paradit.nodes.comfy_v3"})
    assert "paradit.backend.models.preset_names" in comfy  # the model choices' table
    code = (
        "import importlib, sys\n"
        "import paradit.backend.contract, paradit.backend.config, paradit.backend.client\n"
        "import paradit.backend.client.connect, paradit.nodes.pool, paradit.nodes.run\n"
        "import paradit.web.forms, paradit.web.progress, paradit.backend.tools.cli\n"
        "import paradit.backend.models.preset_names, paradit.backend.diffusers_internals\n"
        f"for name in {comfy!r}: importlib.import_module(name)\n"
        "print('torch' in sys.modules, 'diffusers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


RANK_PACKAGES = ("runtime", "models", "parallel", "lora", "memory", "processes")
"""The folders whose code runs on every rank (README: where each part lives)."""


@pytest.mark.fast
def test_nothing_on_a_rank_imports_http_or_the_frontends():
    """Nor rank 0's `serving/`: ranks 1..N-1 run none of it (their start-up and worker loop
    are `processes/`'s)."""
    graph = _graph()
    ranks = [m for m in graph if m.startswith(tuple(f"paradit.backend.{p}" for p in RANK_PACKAGES))]
    assert len({m.split(".")[2] for m in ranks}) == len(RANK_PACKAGES)
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
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name == Path(__file__).name:
            continue
        text = path.read_text()
        decodes = "tiled_decode(" in text or "decode_tiles(" in text
        assert not ('output_type="latent"' in text and decodes), path.name


FRONTEND_IMPORTS = (
    "paradit.backend.contract",
    "paradit.backend.request",
    "paradit.backend.config",
    "paradit.backend.cache",
    "paradit.backend.client",
    "paradit.backend.models.preset_names",
    "paradit.backend.models.loading",  # torch-free at import: a folder's index (`index_file`)
)
"""What `nodes/` (ComfyUI) and `web/` (Gradio) may import from the backend: torch-free
(`test_frontend_side_imports_no_torch` imports them)."""


@pytest.mark.fast
def test_frontends_import_only_the_torch_free_backend():
    graph = _graph()
    for module, imported in graph.items():
        if not module.startswith(("paradit.nodes", "paradit.web")):
            continue
        backend = {m for m in imported if m.startswith("paradit.backend.")}
        bad = {m for m in backend if not m.startswith(FRONTEND_IMPORTS)}
        assert not bad, (module, bad)


def _package(module: str) -> str:
    """The backend folder (or top-level module) `module` is in: "models", "contract", ...
    A family folder's files are models, its dry run (`memory.py`) and context-parallel plan
    (`parallel.py`) included: what they need of the floors above is handed to them."""
    parts = module.split(".")
    return parts[2] if parts[1] == "backend" and len(parts) > 2 else parts[1]


FLOORS: dict[str, tuple[str, ...]] = {
    "diffusers_internals": ("*",),
    "contract": ("*",),
    "sampling": (
        "models",
        "parallel",
        "lora",
        "memory",
        "runtime",
        "processes",
        "serving",
        "tools",
        "workflow",
    ),
    "models": ("parallel", "lora", "memory", "runtime", "processes", "serving", "tools"),
    "lora": ("memory", "runtime", "processes", "serving", "tools"),
    "parallel": ("lora", "memory", "runtime", "processes", "serving", "tools"),
    "memory": ("lora", "runtime", "processes", "serving", "tools"),
    "runtime": ("processes", "serving", "tools"),
    "processes": ("serving", "tools"),
    "serving": ("tools",),
    "workflow": ("parallel", "lora", "memory", "runtime", "processes", "serving", "tools"),
}
"""What each backend folder must not import (`*`: no other paradit module): the floors,
bottom up. The diffusers-compatibility table and the contract stand alone; a job's sampler
and scheduler (`sampling/`) stand on the contract alone; the models
(loading, reading each rank's rows included) know nothing of parallelism, LoRAs or memory
plans; parallelism nothing of LoRAs; a rank's job (`runtime/`) nothing of how its process
started (`processes/`), which knows nothing of rank 0's serving; a workflow read as a job
(`workflow/`) knows the models' files but nothing of how a job runs. None imports the command
line, the client or the frontends (checked above)."""


@pytest.mark.fast
def test_each_floor_imports_only_the_floors_below():
    graph = _graph()
    for module, imported in graph.items():
        forbidden = FLOORS.get(_package(module))
        if forbidden is None:
            continue
        others = {m for m in imported if _package(m) != _package(module)}
        others.discard("paradit.backend")
        bad = others if forbidden == ("*",) else {m for m in others if _package(m) in forbidden}
        assert not bad, (module, bad)


ARCHITECTURE = ROOT / "docs" / "architecture.md"


@pytest.mark.fast
def test_architecture_names_every_part():
    """docs/architecture.md gives every backend folder and top-level module, and each
    frontend, its line (that the paths it names exist is `test_docs`'s check)."""
    named = set(repo_paths(ARCHITECTURE.read_text()))
    parts = [f"{p.parent.relative_to(ROOT)}/" for p in (ROOT / "backend").glob("*/__init__.py")]
    parts += [str(p.relative_to(ROOT)) for p in (ROOT / "backend").glob("*.py")]
    parts += ["nodes/", "web/"]
    missing = sorted(p for p in parts if p not in named and p != "backend/__init__.py")
    assert not missing, f"docs/architecture.md does not say where these live: {missing}"
