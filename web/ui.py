"""The Gradio Blocks app, built by `build_ui(client, output_dir)` around one backend client.

Nothing lives at module level: the client, the output store and the per-session job table
belong to the app that `build_ui` returns, so several apps (tests, several backends) can run
in one process. Events:

- `generate` (named API): takes the `POST /v1/jobs` fields (the request table's, in order,
  each optional), submits one backend job and streams its progress (queue position, step i
  of N, elapsed, time left), then its outputs. Leaving the event (Gradio cancel, closed
  page) cancels the backend job. The form's inputs are derived from the same table.
- `cancel` (named API): cancels the backend jobs this browser session is waiting on.
- `job` (named API): a finished job's outputs, by id (the history tab).
- `apply_settings` (named API, only when the app started its backend): restarts it with the
  serve settings of the Backend tab (`backend/config.py`, `frontend_settings`), by widget name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from ..backend.client.connect import Connection
from ..backend.client.http import BackendError, Client
from ..backend.client.summary import backend_summary
from ..backend.config import config_overrides, frontend_settings
from ..backend.contract import FINAL_STATES, TASKS
from ..backend.request import LORA_EXPERTS, RequestField, request_fields
from .forms import (
    CACHE,
    CACHE_METHODS,
    CACHE_OFF,
    CUSTOM,
    FROM_IMAGE,
    LORAS,
    SIZE_FIELDS,
    add_lora,
    cache_value,
    field_choices,
    form_fields,
    image_label,
    job_body,
    label,
    mode_note,
    number_input,
    parse_size,
    pick_seed,
    size_presets,
)
from .panels import HISTORY_COLUMNS, header_markdown, history_rows, job_choices, status_markdown
from .progress import ProgressClock, idle_html, progress_html
from .settings import (
    EDITABLE_NOTE,
    READ_ONLY_NOTE,
    fill_in,
    settings_inputs,
    values_from_config,
    values_from_info,
)
from .signature import with_parameters
from .store import JobOutputs, OutputStore, Sessions

log = logging.getLogger(__name__)

MAX_SEED = 2**63 - 1
STATUS_REFRESH_S = 10.0
CACHE_CLEANUP = (3600, 86400)
"""Gradio serves copies of the output files from its cache: sweep hourly, drop after a day."""


@dataclass
class Form:
    inputs: dict[str, gr.components.Component]
    """Every request field's input by name; hidden where the form does not show the field (the
    model's task does not read it, or it is not marked `form`), so the API still takes it."""
    preset: gr.Dropdown | None
    randomize: gr.Checkbox | None
    """The seed's "randomize" box (None when the form shows no seed)."""
    generate: gr.Button
    cancel: gr.Button

    def job_inputs(self) -> list[gr.components.Component]:
        """The `POST /v1/jobs` fields, in the order the generate API takes them."""
        return [self.inputs[f.name] for f in request_fields()]

    @property
    def seed(self) -> gr.components.Component | None:
        return next((self.inputs[f.name] for f in request_fields() if f.random), None)


@dataclass
class Results:
    video: gr.Video
    gallery: gr.Gallery
    info: gr.JSON
    files: gr.File

    def outputs(self) -> list[gr.components.Component]:
        return [self.video, self.gallery, self.info, self.files]


def _result_values(outputs: JobOutputs) -> tuple[Any, ...]:
    info = {**outputs.record, "output_folder": str(outputs.folder)}
    return (
        str(outputs.video) if outputs.video else None,
        [str(f) for f in outputs.frames],
        info,
        [str(f) for f in outputs.downloads],
    )


EMPTY_RESULTS: tuple[Any, ...] = (None, [], None, None)


class Actions:
    """The event handlers; one instance per app."""

    def __init__(
        self,
        client: Client,
        info: dict[str, Any],
        store: OutputStore,
        poll_s: float,
        connection: Connection | None = None,
    ):
        self.client = client
        self.limits = info["limits"]
        self.store = store
        self.sessions = Sessions()
        self.poll_s = poll_s
        self.connection = connection
        """Set when this app started its backend: it can restart it with other settings."""

    @property
    def can_restart(self) -> bool:
        return self.connection is not None and self.connection.config is not None

    def use(self, client: Client) -> None:
        """Talk to `client` from now on (the backend was restarted)."""
        self.client = client
        self.store.client = client
        self.limits = client.info()["limits"]

    def generate_handler(self) -> Callable[..., Iterator[tuple[Any, ...]]]:
        """The generate event's function: one parameter per request field, in table order,
        each optional (a field left out is left out of the body: the model's default), and
        Gradio's request."""
        names = [f.name for f in request_fields()]

        def generate(*values: Any) -> Iterator[tuple[Any, ...]]:
            request = values[len(names)] if len(values) > len(names) else None
            yield from self.generate(dict(zip(names, values, strict=False)), request)

        return with_parameters(generate, names, request=True)

    def generate(
        self, values: dict[str, Any], request: gr.Request | None = None
    ) -> Iterator[tuple[Any, ...]]:
        """Run one job on the backend: its progress while it runs, then its outputs."""
        try:
            body = job_body(limits=self.limits, **values)
            job_id = self.client.submit(body)
        except (ValueError, BackendError) as exc:
            raise gr.Error(str(exc), print_exception=False) from None
        log.info("submitted job %s", job_id)
        session = request.session_hash if request is not None else None
        job, status = yield from self._follow(job_id, session or "")
        summary = {k: v for k, v in job.items() if k != "files"}
        if job["status"] == "cancelled":
            yield (status, None, [], summary, None)
            return
        if job["status"] == "failed":
            yield (status, None, [], summary, None)
            raise gr.Error(f"job {job_id} failed: {job.get('error')}", print_exception=False)
        try:
            outputs = self.store.fetch(job)
        except (BackendError, OSError, ValueError) as exc:
            raise gr.Error(
                f"job {job_id} finished, but its outputs did not arrive: {exc}"
            ) from None
        yield (status, *_result_values(outputs))

    def _follow(
        self, job_id: str, session: str
    ) -> Generator[tuple[Any, ...], None, tuple[dict[str, Any], str]]:
        """Poll the job, yielding the status panel, until it ends; returns (job, status html).

        If the caller stops early (Gradio cancelled the event, the page went away) the job
        is cancelled on the backend too.
        """
        clock = ProgressClock(time.monotonic())
        job: dict[str, Any] = {"id": job_id, "status": "queued"}
        self.sessions.add(session, job_id)
        try:
            yield (progress_html(job, clock, clock.started), *EMPTY_RESULTS)  # clear the last
            while True:
                job = self.client.job(job_id)
                status = progress_html(job, clock, time.monotonic())
                if job["status"] in FINAL_STATES:
                    return job, status
                yield (status, gr.skip(), gr.skip(), gr.skip(), gr.skip())
                time.sleep(self.poll_s)
        except BackendError as exc:
            raise gr.Error(f"lost track of job {job_id}: {exc}") from None
        finally:
            self.sessions.remove(session, job_id)
            if job["status"] not in FINAL_STATES:
                self._cancel_quietly(job_id)

    def _cancel_quietly(self, job_id: str) -> None:
        try:
            self.client.cancel(job_id)
            log.info("cancelled job %s: its browser event ended", job_id)
        except BackendError as exc:
            log.warning("could not cancel job %s: %s", job_id, exc)

    def cancel(self, request: gr.Request | None = None) -> None:
        """Cancel, on the backend, the jobs this browser session is waiting on."""
        session = request.session_hash if request is not None else None
        job_ids = self.sessions.jobs(session or "")
        if not job_ids:
            gr.Info("Nothing to cancel: this page has no job running.")
        for job_id in job_ids:
            try:
                self.client.cancel(job_id)
            except BackendError as exc:
                raise gr.Error(f"could not cancel job {job_id}: {exc}") from None
            gr.Info(f"Cancelling job {job_id}: it stops at the next step.")

    def history(self) -> tuple[Any, Any]:
        try:
            jobs = self.client.jobs()
        except BackendError as exc:
            gr.Warning(f"could not list jobs: {exc}")
            return gr.skip(), gr.skip()
        return history_rows(jobs), gr.Dropdown(choices=job_choices(jobs))

    def show_job(self, job_id: str | None) -> tuple[Any, ...]:
        """A backend job's outputs (fetched into the output folder), or its state if unfinished."""
        if not job_id:
            return EMPTY_RESULTS
        try:
            self.store.folder(job_id)
            job = self.client.job(job_id)
            if job["status"] != "succeeded":
                return (None, [], job, None)
            return _result_values(self.store.fetch(job))
        except (ValueError, BackendError, OSError) as exc:
            raise gr.Error(str(exc), print_exception=False) from None

    def status(self) -> tuple[str, str]:
        """The backend panel and the memory plan's decision."""
        try:
            self.client.health()
            health = "ok"
        except BackendError as exc:
            health = f"unavailable ({exc})"
        try:
            info = self.client.info()
        except BackendError:
            return status_markdown(None, health), "(the backend did not answer GET /v1/info)"
        return status_markdown(info, health), backend_summary(info)

    def settings_handler(self) -> Callable[..., tuple[str, str]]:
        """The apply event's function: one parameter per frontend setting, by widget name
        (each optional: one left out stays as it is)."""
        names = [s.widget for s in frontend_settings()]

        def apply_settings(*values: Any) -> tuple[str, str]:
            return self.apply_settings(dict(zip(names, values, strict=True)))

        return with_parameters(apply_settings, names)

    def apply_settings(self, values: dict[str, Any]) -> tuple[str, str]:
        """Restart the backend this app started with the settings' widget values."""
        if self.connection is None or self.connection.config is None:
            raise gr.Error(READ_ONLY_NOTE.replace("**", ""), print_exception=False)
        chosen = fill_in(values, values_from_config(self.connection.config))
        try:
            client = self.connection.restart(**config_overrides(chosen))
        except ValueError as exc:
            raise gr.Error(str(exc), print_exception=False) from None
        except BackendError as exc:
            self.use(self.connection.client)  # the old settings run again
            raise gr.Error(
                f"the backend did not start with these settings, so it runs with the previous "
                f"ones again: {exc}",
                print_exception=False,
            ) from None
        self.use(client)
        gr.Info("The backend restarted with the new settings.")
        return self.status()


def choose_seed(seed: float | None, randomize: bool) -> int:
    try:
        return pick_seed(seed, randomize)
    except ValueError as exc:
        raise gr.Error(str(exc), print_exception=False) from None


def choose_preset(value: str) -> tuple[Any, Any]:
    if value == CUSTOM:
        return gr.skip(), gr.skip()
    return parse_size(value)


def pick_history_row(event: gr.SelectData) -> str:
    return event.row_value[0]


# -- layout ----------------------------------------------------------------------------------


def _form(info: dict[str, Any], lora_names: list[str]) -> Form:
    """The mode, then an input per request field (REQUEST_FIELDS, in order): shown for the
    fields marked `form` that the model's task reads, hidden (still an API parameter) for the
    others; the LoRA picker when the backend has a LoRA folder."""
    limits = info["limits"]
    task = info.get("task", limits["task"])
    gr.Radio(list(TASKS), value=task, label="Mode", interactive=False)
    gr.Markdown(mode_note(info["model"], task))
    shown = {f.name for f in form_fields(task, limits)}
    inputs: dict[str, gr.components.Component] = {}
    preset = randomize = None
    for f in request_fields():
        if f.name in inputs:
            continue
        if f.name == LORAS and (info.get(LORAS) or {}).get("folders"):
            inputs[f.name] = _lora_picker(f, lora_names, len(info[LORAS]["experts"]) > 1)
        elif f.name == CACHE:
            inputs[f.name] = _cache_picker(f)
        elif f.name not in shown:
            inputs[f.name] = _hidden_input(f)
        elif f.form_group:
            group = [g for g in request_fields() if g.form_group == f.form_group]
            with gr.Accordion(f.form_group, open=False):
                for g in group:
                    shows = g.name in shown
                    inputs[g.name] = _field_input(g, limits) if shows else _hidden_input(g)
        elif f.name in SIZE_FIELDS:
            preset, sizes = _size_inputs(
                [g for g in request_fields() if g.name in SIZE_FIELDS], limits
            )
            inputs |= sizes
        elif f.random:
            with gr.Row():
                inputs[f.name] = gr.Number(
                    -1, label=f"{label(f)} (-1: random)", info=f.help, precision=0,
                    minimum=-1, maximum=MAX_SEED,
                )  # fmt: skip
                randomize = gr.Checkbox(True, label=f"Randomize {label(f).lower()}")
        else:
            inputs[f.name] = _field_input(f, limits)
    with gr.Row():
        generate = gr.Button("Generate", variant="primary")
        cancel = gr.Button("Cancel", variant="stop")
    return Form(inputs, preset, randomize, generate, cancel)


def _lora_picker(f: RequestField, names: list[str], two_experts: bool) -> gr.JSON:
    """Pick a LoRA of the backend's list and a strength, Add (repeat to stack them), Clear.
    The list they build is the `loras` field (what API callers give directly)."""
    private: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
    with gr.Accordion(f"LoRAs ({len(names)} on the backend)", open=False):
        with gr.Row():
            name = gr.Dropdown(names, value=None, label="LoRA", allow_custom_value=True)
            strength = gr.Number(1.0, label="Strength", minimum=-100, maximum=100, step=0.05)
            expert = gr.Radio(
                list(LORA_EXPERTS), value="both", label="Wan 2.2 expert", visible=two_experts
            )
        chosen = gr.JSON([], label="Applied in order")
        with gr.Row():
            add = gr.Button("Add LoRA", size="sm")
            clear = gr.Button("Clear", size="sm")

    def added(current: Any, picked: str | None, value: float | None, which: str) -> list:
        try:
            return add_lora(current, picked, value, which)
        except ValueError as exc:
            raise gr.Error(str(exc)) from None

    add.click(added, [chosen, name, strength, expert], chosen, **private)
    clear.click(lambda: [], None, chosen, **private)
    return chosen


def _cache_picker(f: RequestField) -> gr.JSON:
    """The step cache: a method (or off) and its threshold; the value they make is the
    `cache` field (what API callers give directly). Off sends none: the backend's default."""
    private: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
    methods = [CACHE_OFF, *CACHE_METHODS]
    with gr.Accordion("Step cache", open=False):
        with gr.Row():
            method = gr.Dropdown(methods, value=CACHE_OFF, label="Method", info=f.help)
            threshold = gr.Slider(0.01, 1.0, value=0.05, step=0.01, label="Threshold")
        chosen = gr.JSON(None, label="Sent as cache")

    def picked(name: str | None, value: float | None) -> dict[str, Any] | None:
        try:
            return cache_value(name, value)
        except ValueError as exc:
            raise gr.Error(str(exc)) from None

    for control in (method, threshold):
        control.change(picked, [method, threshold], chosen, **private)
    return chosen


def _hidden_input(f: RequestField) -> gr.components.Component:
    """A field the form does not show: empty, so the body leaves it out unless an API caller
    gives it."""
    if f.kind == "image":
        return gr.Image(label=label(f), type="filepath", visible=False)
    if f.kind == "images":
        return gr.File(label=label(f), file_count="multiple", type="filepath", visible=False)
    if f.kind == "json":
        return gr.JSON(None, label=label(f), visible=False)
    if f.kind == "text":
        return gr.Textbox("", label=label(f), visible=False)
    return gr.Number(None, label=label(f), visible=False)


def _field_input(f: RequestField, limits: dict[str, Any]) -> gr.components.Component:
    """A shown field's input: text box, start image, slider (bounded number) or number box;
    a dropdown for named choices, an empty box for a number the model decides when unset."""
    if f.choices:
        return gr.Dropdown(
            field_choices(f, limits), value=f.widget_unset, label=label(f), info=f.help
        )
    if f.widget_unset is not None and f.number:
        return gr.Number(
            None, label=f"{label(f)} (empty: the model's)", info=f.help,
            precision=0 if f.kind == "int" else None, minimum=f.low,
        )  # fmt: skip
    if f.kind == "text":
        return gr.Textbox(label=label(f), placeholder=f.help, lines=3 if f.required else 1)
    if f.kind == "image":
        return gr.Image(
            label=image_label(limits["task"]), type="filepath", sources=["upload", "clipboard"]
        )
    if f.kind == "images":
        return gr.File(
            label=f"More reference images (at most {limits.get('max_images', 1) - 1})",
            file_count="multiple", type="filepath", file_types=["image"],
        )  # fmt: skip
    if f.kind == "json":
        return gr.JSON(None, label=label(f))
    box = number_input(f, limits)
    precision = 0 if f.kind == "int" else None
    if box.low is not None and box.high is not None:
        return gr.Slider(
            box.low, box.high, value=box.default, step=box.step, precision=precision,
            label=label(f), info=f.help,
        )  # fmt: skip
    return gr.Number(
        box.default, label=label(f), info=f.help, precision=precision, minimum=box.low,
        maximum=box.high, step=box.step,
    )  # fmt: skip


def _size_inputs(
    fields: list[RequestField], limits: dict[str, Any]
) -> tuple[gr.Dropdown, dict[str, gr.Number]]:
    """The size presets, then the width and height boxes side by side."""
    presets = size_presets(limits)
    preset = gr.Dropdown(presets, value=presets[0][1], label="Size")
    from_image = presets[0][1] == FROM_IMAGE  # empty boxes: the backend sizes the output
    boxes = {}
    with gr.Row():
        for f in fields:
            box = number_input(f, limits)
            boxes[f.name] = gr.Number(
                None if from_image else box.default, label=label(f), minimum=box.low,
                maximum=box.high, step=box.step, precision=0,
            )  # fmt: skip
    return preset, boxes


def _settings(actions: Actions, info: dict[str, Any]) -> tuple[dict[str, Any], gr.Button | None]:
    """The backend's settings (editable when this app started the backend) and Apply."""
    editable = actions.can_restart
    config = actions.connection.config if editable else None
    values = values_from_config(config) if config is not None else values_from_info(info)
    with gr.Accordion("Backend settings", open=False):
        gr.Markdown(EDITABLE_NOTE if editable else READ_ONLY_NOTE)
        inputs = settings_inputs(values, editable)
        apply = gr.Button("Apply (restarts the backend)", variant="primary") if editable else None
    return inputs, apply


def _results(with_video: bool) -> Results:
    with gr.Column():
        video = gr.Video(label="Video", interactive=False, visible=with_video)
        gallery = gr.Gallery(label="Frames", columns=8, height=240, interactive=False)
    with gr.Column():
        with gr.Accordion("Job info (plan, timings, seed)", open=False):
            info = gr.JSON(label="Job")
        files = gr.File(label="Downloads", file_count="multiple", interactive=False)
    return Results(video, gallery, info, files)


def build_ui(
    client: Client,
    output_dir: str | Path,
    *,
    poll_s: float = 0.25,
    connection: Connection | None = None,
) -> gr.Blocks:
    """The app for one backend; each finished job's files go to `output_dir/<job id>/`.

    `connection`: the backend this app started (`connect`), whose settings the Backend tab
    may change; without it the settings are shown read-only."""
    info = client.info()
    actions = Actions(client, info, OutputStore(client, output_dir), poll_s, connection)
    with_video = info["limits"]["frame_multiple"] > 0
    with gr.Blocks(
        title=f"paradit · {info['model']}", analytics_enabled=False, delete_cache=CACHE_CLEANUP
    ) as demo:
        gr.Markdown(header_markdown(info))
        with gr.Tab("Generate"), gr.Row():
            with gr.Column():
                form = _form(info, _lora_names(client, info))
            with gr.Column():
                status = gr.HTML(idle_html("Ready."), label="Progress")
                results = _results(with_video)
        with gr.Tab("History"):
            refresh_history = gr.Button("Refresh", size="sm")
            table = gr.Dataframe(headers=HISTORY_COLUMNS, interactive=False, label="Recent jobs")
            choice = gr.Dropdown(
                [],
                label="Show the outputs of job (pick one or paste an id)",
                value=None,
                allow_custom_value=True,
            )
            with gr.Row():
                past = _results(with_video)
        with gr.Tab("Backend"):
            refresh_status = gr.Button("Refresh", size="sm")
            panel = gr.Markdown(status_markdown(info, "ok"))
            plan = gr.Textbox(
                backend_summary(info),
                label="Memory plan and layout (GET /v1/info: memory, plan)",
                lines=8,
                interactive=False,
            )
            settings, apply = _settings(actions, info)
        _wire(actions, form, status, results, table, choice, past)
        private: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
        for trigger in (demo.load, refresh_status.click, gr.Timer(STATUS_REFRESH_S).tick):
            trigger(actions.status, None, [panel, plan], **private)
        for trigger in (demo.load, refresh_history.click):
            trigger(actions.history, None, [table, choice], **private)
        if apply is not None:
            apply.click(
                actions.settings_handler(),
                list(settings.values()),
                [panel, plan],
                api_name="apply_settings",
                concurrency_limit=1,
            )
    return demo


def _lora_names(client: Client, info: dict[str, Any]) -> list[str]:
    """The backend's LoRAs (`GET /v1/loras`); none from a backend without a LoRA folder."""
    if not (info.get(LORAS) or {}).get("folders"):
        return []
    try:
        return client.loras()
    except BackendError as exc:
        log.warning("no LoRA list from the backend: %s", exc)
        return []


def _wire(
    actions: Actions,
    form: Form,
    status: gr.HTML,
    results: Results,
    table: gr.Dataframe,
    choice: gr.Dropdown,
    past: Results,
) -> None:
    private: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
    if form.preset is not None:
        sizes = [form.inputs[name] for name in SIZE_FIELDS]
        form.preset.input(choose_preset, form.preset, sizes, **private)
        for box in sizes:
            box.input(lambda: CUSTOM, None, form.preset, **private)
    generate: dict[str, Any] = {
        "fn": actions.generate_handler(),
        "inputs": form.job_inputs(),
        "outputs": [status, *results.outputs()],
        "api_name": "generate",
        "concurrency_limit": None,
        "show_progress": "minimal",
    }
    if form.seed is not None and form.randomize is not None:
        seed = [form.seed, form.randomize]
        run = form.generate.click(choose_seed, seed, form.seed, queue=False, **private)
        run = run.success(**generate)
    else:
        run = form.generate.click(**generate)
    run.then(actions.history, None, [table, choice], **private)
    form.cancel.click(actions.cancel, None, None, api_name="cancel", concurrency_limit=None)
    table.select(pick_history_row, None, choice, **private)
    choice.change(actions.show_job, choice, past.outputs(), api_name="job", concurrency_limit=None)
