"""``evalrun rubrics list|show``: the weighted rubrics on the search path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from evalrun.commands.failing import fail
from evalrun.rubric import RubricError, list_rubrics, load_rubric

rubrics_app = typer.Typer(help="Weighted rubrics (see docs/rubrics.md).", no_args_is_help=True)

RubricsDir = Annotated[
    Path | None,
    typer.Option(
        "--rubrics", metavar="DIR", help="Folder searched before ./rubrics and the bundle."
    ),
]


@rubrics_app.command("list")
def list_command(
    rubrics: RubricsDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Name, criteria count and description of every rubric found."""
    entries = list_rubrics(rubrics)
    if as_json:
        rows = [
            {
                "name": e.name,
                "criteria": e.criteria,
                "description": e.description,
                "path": str(e.path),
            }
            for e in entries
        ]
        typer.echo(json.dumps(rows, indent=2))
        return
    if not entries:
        typer.echo("no rubrics found")
        return
    width = max(len(e.name) for e in entries)
    for entry in entries:
        typer.echo(f"{entry.name:<{width}}  {entry.criteria:>2} criteria  {entry.description}")


@rubrics_app.command("show")
def show_command(
    name: Annotated[
        str, typer.Argument(help="Rubric name (see `evalrun rubrics list`) or a YAML path.")
    ],
    rubrics: RubricsDir = None,
) -> None:
    """The criteria of one rubric: weight, range, description."""
    try:
        rubric = load_rubric(name, rubrics_dir=rubrics)
    except RubricError as exc:
        raise fail(exc) from None
    typer.echo(f"{rubric.name}: {rubric.description}")
    total = sum(c.weight for c in rubric.criteria)
    width = max(len(c.name) for c in rubric.criteria)
    for c in rubric.criteria:
        share = c.weight / total
        typer.echo(
            f"  {c.name:<{width}}  weight {c.weight:g} ({share:.0%})  "
            f"range [{c.min_value:g}, {c.max_value:g}]  {c.description}"
        )
    t = rubric.thresholds
    typer.echo(f"thresholds: excellent >= {t.excellent}, pass >= {t.pass_}, warning >= {t.warning}")


def register(app: typer.Typer) -> None:
    app.add_typer(rubrics_app, name="rubrics")
