"""``evalrun sdk path js``: where the installed package keeps a grader SDK, so a project outside
this repository can use it (``npm install "$(evalrun sdk path js)"``, docs/grader-protocol.md)."""

from __future__ import annotations

import enum
from pathlib import Path

import typer


class Language(str, enum.Enum):
    js = "js"
    python = "python"


def sdk_folder(language: Language) -> Path:
    import grader_sdk

    root = Path(grader_sdk.__file__).resolve().parent
    return root / "js" if language is Language.js else root


def path_command(
    language: Language = typer.Argument(
        ..., help="Which SDK: js (an npm package folder) or python."
    ),
) -> None:
    """Print the folder of a packaged grader SDK (js: `npm install "$(evalrun sdk path js)"`)."""
    typer.echo(str(sdk_folder(language)))


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="The grader SDKs that ship with evalrun.", no_args_is_help=True)
    group.command("path")(path_command)
    app.add_typer(group, name="sdk")
