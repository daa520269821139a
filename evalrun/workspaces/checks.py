"""What a run checks of a workspace before anything starts (docs/agents.md, "Lifecycle"): the
template and the repositories are there, and so are the required programs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from evalrun.spec.workspace import WorkspaceSpec


def workspace_problems(spec: WorkspaceSpec, eval_dir: Path) -> list[tuple[tuple[Any, ...], str]]:
    """(key path below ``workspace``, message) for each thing the workspace needs that is not
    on this machine."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    if spec.template is not None and not (eval_dir / spec.template).is_dir():
        problems.append((("template",), f"{spec.template} is not a folder"))
    for i, repo in enumerate(spec.repos):
        if not (eval_dir / repo.source).exists():
            problems.append((("repos", i, "source"), f"{repo.source} does not exist"))
    for name in spec.required_commands:
        if shutil.which(name) is None:
            problems.append((("required_commands",), f"{name} is not on PATH"))
    return problems
