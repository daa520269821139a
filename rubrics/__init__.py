"""YAML rubrics and judge definitions, shipped as package data so installed copies find them."""

from __future__ import annotations

from pathlib import Path

#: Files in this folder that define judges (prompts and scales), not weighted rubrics.
JUDGE_DEFINITIONS: tuple[str, ...] = ("quality", "pattern", "prompt_standard")


def rubrics_dir() -> Path:
    """The folder holding the bundled ``*.yaml`` files (works for editable and normal installs)."""
    return Path(__file__).resolve().parent


def bundled(name: str) -> Path:
    """Path of a bundled YAML file by stem, e.g. ``bundled("quality")``."""
    return rubrics_dir() / f"{name}.yaml"
