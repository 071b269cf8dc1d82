"""The Gradio Blocks app, built by `build_ui(client, output_dir)` around one backend client.

Nothing lives at module level: the client, the output store and the per-session job table
belong to the app that `build_ui` returns, so several apps (tests, several backends) can run
in one process. Events:

- `generate` (named API): takes the `POST /v1/jobs` fields, submits one backend job and
  streams its progress (queue position, step i of N, elapsed, time left), then its outputs.
  Leaving the event (Gradio cancel, closed page) cancels the backend job.
- `cancel` (named API): cancels the backend jobs this browser session is waiting on.
- `job` (named API): a finished job's outputs, by id (the history tab).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from ..backend.client.http import BackendError, Client
from ..backend.contract import FINAL_STATES, TASKS
from .forms import CUSTOM, job_body, mode_note, parse_size, pick_seed, size_presets
from .panels import HISTORY_COLUMNS, header_markdown, history_rows, job_choices, status_markdown
from .progress import ProgressClock, idle_html, progress_html
from .store import JobOutputs, OutputStore, Sessions

log = logging.getLogger(__name__)

MAX_SEED = 2**63 - 1
STATUS_REFRESH_S = 10.0
CACHE_CLEANUP = (3600, 86400)
"""Gradio serves copies of the output files from its cache: sweep hourly, drop after a day."""


@dataclass
class Form:
    prompt: gr.Textbox
    negative_prompt: gr.Textbox
    preset: gr.Dropdown
    width: gr.Number
    height: gr.Number
    num_frames: gr.Slider
    num_inference_steps: gr.Slider
    guidance_scale: gr.Slider
    seed: gr.Number
    randomize: gr.Checkbox
    image: gr.Image
    generate: gr.Button
    cancel: gr.Button

    def job_inputs(self) -> list[gr.components.Component]:
        """The `POST /v1/jobs` fields, in the order the generate API takes them."""
        return [
            self.prompt,
            self.negative_prompt,
            self.width,
            self.height,
            self.num_frames,
            self.num_inference_steps,
            self.guidance_scale,
            self.seed,
            self.image,
        ]


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

    def __init__(self, client: Client, info: dict[str, Any], store: OutputStore, poll_s: float):
        self.client = client
        self.limits = info["limits"]
        self.store = store
        self.sessions = Sessions()
        self.poll_s = poll_s

    def generate(
        self,
        prompt: str,
        negative_prompt: str,
        width: float,
        height: float,
        num_frames: float,
        num_inference_steps: float,
        guidance_scale: float,
        seed: float,
        image: str | None = None,
        request: gr.Request | None = None,
    ) -> Iterator[tuple[Any, ...]]:
        """Run one job on the backend: its progress while it runs, then its outputs.

        `image` defaults to None so that API callers may leave it out (text-to-video and
        text-to-image): Gradio marks a parameter optional when its component has no value but
        the function's argument defaults to None.
        """
        try:
            body = job_body(
                prompt=prompt,
                negative_prompt=negative_prompt,
                width=width,
                height=height,
                num_frames=num_frames,
                num_inference_steps=num_inference_steps,
                guidance_scale=guidance_scale,
                seed=seed,
                image=image,
                limits=self.limits,
            )
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

    def status(self) -> str:
        try:
            self.client.health()
            health = "ok"
        except BackendError as exc:
            health = f"unavailable ({exc})"
        try:
            info = self.client.info()
        except BackendError:
            info = None
        return status_markdown(info, health)


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


def _form(info: dict[str, Any]) -> Form:
    limits = info["limits"]
    task = info.get("task", limits["task"])
    gr.Radio(list(TASKS), value=task, label="Mode", interactive=False)
    gr.Markdown(mode_note(info["model"], task))
    prompt = gr.Textbox(label="Prompt", lines=3, placeholder="a red fox running through snow")
    negative = gr.Textbox(label="Negative prompt", lines=1)
    image = gr.Image(
        label="Start image",
        type="filepath",
        sources=["upload", "clipboard"],
        visible=bool(limits["needs_image"]),
    )
    presets = size_presets(limits)
    preset = gr.Dropdown(presets, value=presets[0][1], label="Size")
    size = {
        "minimum": limits["min_size"],
        "maximum": limits["max_size"],
        "step": limits["size_multiple"],
        "precision": 0,
    }
    with gr.Row():
        width = gr.Number(limits["default_width"], label="Width", **size)
        height = gr.Number(limits["default_height"], label="Height", **size)
    video = limits["frame_multiple"] > 0
    frames = gr.Slider(
        1,
        max(2, limits["max_frames"]),
        value=limits["default_frames"],
        step=limits["frame_multiple"] if video else 1,
        precision=0,
        label=f"Frames ({limits['frame_multiple']}k+1)",
        visible=video,
    )
    steps = gr.Slider(
        1, limits["max_steps"], value=limits["default_steps"], step=1, precision=0, label="Steps"
    )
    guidance = gr.Slider(
        0, limits["max_guidance"], value=limits["default_guidance"], step=0.1, label="Guidance"
    )
    with gr.Row():
        seed = gr.Number(-1, label="Seed (-1: random)", precision=0, minimum=-1, maximum=MAX_SEED)
        randomize = gr.Checkbox(True, label="Randomize seed")
    with gr.Row():
        generate = gr.Button("Generate", variant="primary")
        cancel = gr.Button("Cancel", variant="stop")
    return Form(
        prompt,
        negative,
        preset,
        width,
        height,
        frames,
        steps,
        guidance,
        seed,
        randomize,
        image,
        generate,
        cancel,
    )


def _results(with_video: bool) -> Results:
    with gr.Column():
        video = gr.Video(label="Video", interactive=False, visible=with_video)
        gallery = gr.Gallery(label="Frames", columns=8, height=240, interactive=False)
    with gr.Column():
        with gr.Accordion("Job info (plan, timings, seed)", open=False):
            info = gr.JSON(label="Job")
        files = gr.File(label="Downloads", file_count="multiple", interactive=False)
    return Results(video, gallery, info, files)


def build_ui(client: Client, output_dir: str | Path, *, poll_s: float = 0.25) -> gr.Blocks:
    """The app for one backend; each finished job's files go to `output_dir/<job id>/`."""
    info = client.info()
    actions = Actions(client, info, OutputStore(client, output_dir), poll_s)
    with_video = info["limits"]["frame_multiple"] > 0
    with gr.Blocks(
        title=f"paradit · {info['model']}", analytics_enabled=False, delete_cache=CACHE_CLEANUP
    ) as demo:
        gr.Markdown(header_markdown(info))
        with gr.Tab("Generate"), gr.Row():
            with gr.Column():
                form = _form(info)
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
        _wire(actions, form, status, results, table, choice, past)
        private: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
        for trigger in (demo.load, refresh_status.click, gr.Timer(STATUS_REFRESH_S).tick):
            trigger(actions.status, None, panel, **private)
        for trigger in (demo.load, refresh_history.click):
            trigger(actions.history, None, [table, choice], **private)
    return demo


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
    form.preset.input(choose_preset, form.preset, [form.width, form.height], **private)
    for box in (form.width, form.height):
        box.input(lambda: CUSTOM, None, form.preset, **private)
    run = form.generate.click(
        choose_seed, [form.seed, form.randomize], form.seed, queue=False, **private
    ).success(
        actions.generate,
        form.job_inputs(),
        [status, *results.outputs()],
        api_name="generate",
        concurrency_limit=None,
        show_progress="minimal",
    )
    run.then(actions.history, None, [table, choice], **private)
    form.cancel.click(actions.cancel, None, None, api_name="cancel", concurrency_limit=None)
    table.select(pick_history_row, None, choice, **private)
    choice.change(actions.show_job, choice, past.outputs(), api_name="job", concurrency_limit=None)
