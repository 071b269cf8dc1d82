"""ComfyUI's web page without ComfyUI: its frontend package's built files (the test extra's
`comfyui-frontend-package`, unchanged), the node pack's extension, and a stand-in for the few
server routes the page reads as it starts. Served by tests/frontends/test_comfyui_queue.py
and test_comfyui_templates.py, which drive it with Debian's Chromium through Playwright."""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from paradit.backend.workflow.sockets import SOCKETS, node_definition

REPO = Path(__file__).resolve().parents[1]
EXTENSION = "/extensions/paradit/paradit_queue.js"


def comfyui_page(settings: dict) -> Starlette:
    """ComfyUI's page as its server gives it: the frontend package's files, the pack's
    extension under /extensions/paradit/, and the routes the page reads as it starts
    (`settings` its stored settings; the node definitions generated from paradit's knowledge
    of each node, backend/workflow/sockets.py)."""
    from comfyui_frontend_package import __file__ as package  # the test extra: fails without

    static = Path(package).parent / "static"
    stats = {"system": {"os": "posix", "comfyui_version": "0", "argv": []}, "devices": []}
    replies = {
        "users": {"storage": "server", "migrated": True},
        "extensions": [EXTENSION],
        "object_info": {name: node_definition(s) for name, s in SOCKETS.items()},
        "system_stats": stats,
        "embeddings": [],
        "features": {},
        "i18n": {},
        "workflow_templates": {},
        "userdata": [],
    }

    async def api(request: Request) -> Response:
        path = request.path_params["path"]
        if path == "settings":
            return JSONResponse(settings)
        if path.startswith("settings/"):
            if request.method == "POST":
                settings[path.removeprefix("settings/")] = await request.json()
            return JSONResponse(settings.get(path.removeprefix("settings/")))
        if path in replies:
            return JSONResponse(replies[path])
        return Response(status_code=404)

    return Starlette(
        routes=[
            Route("/api/{path:path}", api, methods=["GET", "POST"]),
            Mount("/extensions/paradit", StaticFiles(directory=REPO / "nodes/js")),
            Mount("/", StaticFiles(directory=static, html=True)),
        ]
    )
