"""The request table drives every frontend: a field declared once shows up everywhere.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from paradit.backend import request as table
from paradit.backend.client.http import BackendError
from paradit.backend.config import frontend_settings
from paradit.backend.contract import TASKS, TEXT_TO_IMAGE, TEXT_TO_VIDEO, Limits
from paradit.backend.request import JobRequest, RequestField, docs_table, request_fields
from paradit.backend.serving.schema import job_body_model
from paradit.backend.tools.cli import build_parser, job_body
from paradit.nodes.params import BACKEND_PARAMS, TASK_NODES
from paradit.nodes.run import build_request

pytestmark = pytest.mark.fast
ROOT = Path(__file__).resolve().parents[2]
LIMITS = Limits(TEXT_TO_VIDEO, 16, 16, 256, 4, 33)
CACHED = dataclasses.replace(LIMITS, step_cache=True)
"""A model with a step cache (`Limits.step_cache`)."""
MADE_UP = RequestField(
    "sharpness",
    "float",
    "How sharp (a field made up by the test).",
    0.5,
    low=0,
    high=1,
    cli="--sharpness",
    widget="sharpness",
    step=0.05,
)


def _generate_help() -> str:
    parser = build_parser()
    return parser._subparsers._group_actions[0].choices["generate"].format_help()


def test_a_made_up_field_reaches_every_frontend(monkeypatch):
    monkeypatch.setattr(table, "REQUEST_FIELDS", (*table.REQUEST_FIELDS, MADE_UP))
    # the HTTP schema, with its bounds and help
    schema = job_body_model().model_json_schema()["properties"]["sharpness"]
    assert (schema["type"], schema["minimum"], schema["maximum"]) == ("number", 0, 1)
    assert schema["description"] == MADE_UP.help
    # the command line: help, parsing, the body it sends
    assert "--sharpness SHARPNESS" in _generate_help() and "How sharp" in _generate_help()
    args = build_parser().parse_args(["generate", "x", "--out", "o", "--sharpness", "0.25"])
    assert job_body(args, "x")["sharpness"] == 0.25
    # the nodes' widgets (appended after the seed, optional) and the body they build
    for node in TASK_NODES:
        param = node.params[-1]
        assert (param.name, param.kind, param.default, param.optional) == (
            "sharpness",
            "float",
            0.5,
            True,
        )
    values = {"prompt": "x", "width": 32, "height": 32, "frames": 5, "steps": 2}
    values |= {"guidance": 1.0, "seed": 1, "negative_prompt": "", "sharpness": 0.75}
    assert build_request(TASK_NODES[0], values)["sharpness"] == 0.75
    # the request, job.json's `request`, its bounds
    request = JobRequest.from_body({"prompt": "x", "sharpness": 0.125}, LIMITS)
    assert request.sharpness == 0.125
    assert request.to_dict(with_image=False)["sharpness"] == 0.125
    assert JobRequest.from_body({"prompt": "x"}, LIMITS).to_dict()["sharpness"] == 0.5
    with pytest.raises(ValueError, match="sharpness must be between 0 and 1, got 2"):
        JobRequest.from_body({"prompt": "x", "sharpness": 2}, LIMITS)
    # the docs table
    assert "| `sharpness` | float | 0.5 | `--sharpness SHARPNESS`" in docs_table()


class _RecordingClient:
    """A backend client for building the app: info, and a submit that keeps the body."""

    url = "http://backend.invalid"

    def __init__(self, limits: Limits):
        self.limits, self.bodies = limits, []

    def info(self) -> dict:
        limits = dataclasses.asdict(self.limits)
        return {"model": "m", "task": limits["task"], "world_size": 1, "device": "cpu",
                "limits": limits, "plan": {}, "ranks": []}  # fmt: skip

    def submit(self, body: dict) -> str:
        self.bodies.append(body)
        raise BackendError("recorded, not run")


def test_a_made_up_field_reaches_the_web_form_and_body(monkeypatch, tmp_path):
    import gradio as gr

    from paradit.web.ui import build_ui

    monkeypatch.setattr(table, "REQUEST_FIELDS", (*table.REQUEST_FIELDS, MADE_UP))
    client = _RecordingClient(LIMITS)
    demo = build_ui(client, tmp_path)
    # the form shows it: a slider over the table's bounds, its default, help and label
    boxes = [b for b in demo.blocks.values() if getattr(b, "label", None) == "Sharpness"]
    assert len(boxes) == 1 and isinstance(boxes[0], gr.Slider)
    box = boxes[0]
    assert (box.minimum, box.maximum, box.step, box.value) == (0, 1, 0.05, 0.5)
    assert box.visible is True and box.info == MADE_UP.help
    # the generate API takes it, last, as it takes the other fields of POST /v1/jobs
    api = demo.get_api_info()["named_endpoints"]["/generate"]["parameters"]
    assert [p["parameter_name"] for p in api] == [f.name for f in request_fields()]
    assert (api[-1]["parameter_name"], api[-1]["parameter_default"]) == ("sharpness", 0.5)
    # and the body the app sends carries it
    generate = next(fn for fn in demo.fns.values() if fn.api_name == "generate")
    assert generate.inputs[-1] is box
    values = {"prompt": "x", "width": 32, "height": 32, "num_frames": 5, "seed": 3}
    values |= {"num_inference_steps": 2, "guidance_scale": 1.0, "sharpness": 0.75}
    with pytest.raises(gr.Error, match="recorded, not run"):
        next(generate.fn(*(values.get(f.name) for f in request_fields())))  # as Gradio calls
    assert client.bodies == [{**values, "negative_prompt": "", "guidance_scale": 1.0}]
    assert client.bodies[0]["sharpness"] == 0.75


def test_the_web_form_shows_what_the_task_reads():
    from paradit.web.forms import form_fields

    for task in TASKS:
        names = [f.name for f in form_fields(task)]
        shown = [f for f in request_fields() if f.form and task in f.tasks]
        assert names == [f.name for f in shown if not f.needs]  # no model: none that needs one
        every = {"samplers": ["euler"], "two_experts": True, "last_frame": True}
        assert [f.name for f in form_fields(task, every)] == [f.name for f in shown]
    assert "num_frames" not in [f.name for f in form_fields(TEXT_TO_IMAGE)]
    assert "loras" not in [f.name for f in form_fields(TEXT_TO_VIDEO)]  # form=False


def test_the_made_up_field_is_gone_again():
    assert "sharpness" not in job_body_model().model_json_schema()["properties"]
    assert "--sharpness" not in _generate_help()
    assert all(p.name != "sharpness" for node in TASK_NODES for p in node.params)


def test_no_frontend_drifts_from_the_table():
    fields = request_fields()
    assert list(job_body_model().model_json_schema()["properties"]) == [f.name for f in fields]
    help_text = _generate_help()
    assert all(f.cli in help_text for f in fields if f.cli)
    for node in TASK_NODES:
        expected = [f.widget for f in fields if f.widget and node.task in f.tasks]
        assert [p.name for p in node.params] == expected
        assert [p.field for p in node.params] == [f.name for f in fields if f.widget in expected]
    assert all(set(f.tasks) <= set(TASKS) for f in fields)
    settings = {s.widget for s in frontend_settings()}
    assert settings - {"gpus"} <= {p.name for p in BACKEND_PARAMS}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert any(docs_table() in page.read_text() for page in pages), (
        "no page of README.md and docs/ has the field table: paste docs_table() into docs/api.md"
    )


def test_loras_and_cache_are_checked_by_their_own_rules():
    with pytest.raises(ValueError, match="cache method must be one of"):  # supported: its rule
        JobRequest.from_body({"prompt": "x", "cache": {"method": "x"}}, LIMITS)
    cached = JobRequest.from_body({"prompt": "x", "cache": {"method": "first-block"}}, CACHED)
    assert cached.cache == {"method": "first-block", "threshold": 0.05}  # the default filled in
    # a model without a step cache refuses the field at submit (nothing reaches the ranks)
    with pytest.raises(ValueError, match="this model has no step cache: leave `cache` out"):
        JobRequest.from_body({"prompt": "x", "cache": {"method": "first-block"}}, LIMITS)
    assert JobRequest.from_body({"prompt": "x"}, LIMITS).cache is None
    loras = [{"name": "a", "strength": 1}, {"name": "b"}, {"name": "c", "high": 0.5}]
    request = JobRequest.from_body({"prompt": "x", "loras": loras}, LIMITS)
    assert request.loras == [
        {"name": "a", "strength": 1.0},
        {"name": "b", "strength": 1.0},
        {"name": "c", "high": 0.5, "low": 1.0},
    ]
    args = build_parser().parse_args(
        ["generate", "x", "--out", "o", "--lora", "a:0.5", "--lora", "b", "--cache", "tea:0.1"]
    )
    body = job_body(args, "x")
    assert body["loras"] == [{"name": "a", "strength": 0.5}, {"name": "b", "strength": 1.0}]
    assert body["cache"] == {"method": "tea", "threshold": 0.1}
