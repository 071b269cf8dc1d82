"""Builders of the tiny presets' components, one module per family (`presets.py` lists them).

Each module's `PRESETS` maps a preset name to its pipeline class name and its component
builders, each with its own seed; `PIPELINE_CONFIG` holds a pipeline's own settings."""
