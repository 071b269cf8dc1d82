"""The Backend tab's settings: the serve settings a frontend sets, from the same table as the
ParaDiTBackend node (`backend/config.py`: `frontend_settings`, `config_overrides`).

When the app started its backend (`paradit ui --model M`) they are editable, and "Apply"
restarts that backend with them. When it was given a URL (`--server`) they show what that
backend reports in `GET /v1/info`, read-only: the app cannot restart someone else's backend.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from ..backend.config import FrontendSetting, ServeConfig, frontend_settings

EDITABLE_NOTE = (
    "This app started its backend: **Apply** restarts it with these settings (jobs running or "
    "queued on it are lost; the model loads again). Each setting is the `paradit serve` flag "
    "of the same name; 0 or empty lets the memory plan decide."
)
READ_ONLY_NOTE = (
    "**Read-only:** this app is connected to a backend it did not start (`--server URL`), so it "
    "cannot restart it; these are the settings that backend reports. Change them where it "
    "runs (`paradit serve` flags), or start the app with `--model M` to let it run its own."
)


def values_from_config(config: ServeConfig) -> dict[str, Any]:
    """Each setting's widget value for a backend this app starts, by widget name."""
    return {s.widget: s.widget_value(config) for s in frontend_settings()}


def values_from_info(info: dict[str, Any]) -> dict[str, Any]:
    """Each setting's widget value as a running backend reports it (`GET /v1/info`: its
    memory settings, world size and parallel plan as resolved), by widget name."""
    sources = ((info.get("memory") or {}).get("settings") or {}, info, info.get("plan") or {})
    values = {}
    for s in frontend_settings():
        value = next((source[s.name] for source in sources if s.name in source), None)
        if isinstance(value, dict):  # reported with how it resolved (`attention`): the asked
            value = value.get("asked")
        if value is None:
            values[s.widget] = s.default
        else:
            values[s.widget] = (not value) if s.inverted else value
    return values


def fill_in(values: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """`values` with the ones left out (None: an API caller did not give them) as they are."""
    return {name: current[name] if value is None else value for name, value in values.items()}


def setting_input(setting: FrontendSetting, value: Any, editable: bool) -> gr.components.Component:
    """A setting's input; its label is the widget's name (the API parameter's name too)."""
    common: dict[str, Any] = {
        "label": setting.widget,
        "info": setting.help,
        "interactive": editable,
    }
    if setting.kind == "boolean":
        return gr.Checkbox(bool(value), **common)
    if setting.kind == "combo":
        return gr.Dropdown(list(setting.choices), value=value, **common)
    if setting.kind in ("int", "float"):
        return gr.Number(
            value,
            minimum=setting.low,
            maximum=setting.high,
            step=setting.step,
            precision=0 if setting.kind == "int" else None,
            **common,
        )
    return gr.Textbox("" if value is None else str(value), **common)


def settings_inputs(values: dict[str, Any], editable: bool) -> dict[str, gr.components.Component]:
    """One input per frontend setting, by widget name, in the table's order."""
    return {s.widget: setting_input(s, values[s.widget], editable) for s in frontend_settings()}
