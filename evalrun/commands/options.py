"""Command-line options several commands share, declared once so their help stays the same."""

from __future__ import annotations

import typer

_LOOKUP = (
    "targets.yaml or evals/targets.yaml here, then .evalrun/targets.yaml here or upward; "
    "docs/targets.md)."
)

#: ``--targets`` for a command that reads an eval file (the file's folder is looked in first)
TARGETS_FOR_EVAL = typer.Option(
    None,
    "--targets",
    metavar="FILE",
    dir_okay=False,
    help=f"targets.yaml to use (default: beside the eval file, then {_LOOKUP}",
)

#: ``--targets`` for a command without an eval file
TARGETS = typer.Option(
    None,
    "--targets",
    metavar="FILE",
    dir_okay=False,
    help=f"targets.yaml to use (default: {_LOOKUP}",
)
