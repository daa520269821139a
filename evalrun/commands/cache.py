"""``evalrun cache clear``: empty the response cache of this project, and with ``--user``
evalrun's user-level cache (docs/config.md, "Caches")."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import typer

from evalrun.safetext import printable
from evalrun.targets import clear_response_cache
from evalrun.userdirs import user_cache_dir


def clear(
    cache_dir: Path = typer.Option(
        Path(".evalrun/cache"),
        "--cache-dir",
        metavar="DIR",
        help="The response cache to empty (as `evalrun run --cache-dir`).",
    ),
    user: bool = typer.Option(
        False, "--user", help="Also remove evalrun's user cache (grader bytecode)."
    ),
) -> None:
    """Delete cached target and judge responses, so the next run asks the providers again."""
    removed = clear_response_cache(cache_dir)
    if removed:
        typer.echo(f"removed the response cache in {printable(str(cache_dir))}")
    else:
        typer.echo(f"no response cache in {printable(str(cache_dir))}")
    if cache_dir.is_dir() and not any(cache_dir.iterdir()):
        cache_dir.rmdir()
    if user:
        folder = user_cache_dir(os.environ)
        if folder.is_dir():
            shutil.rmtree(folder)
            typer.echo(f"removed the user cache {printable(str(folder))}")
        else:
            typer.echo(f"no user cache at {printable(str(folder))}")


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="evalrun's caches (docs/config.md).", no_args_is_help=True)
    group.command("clear")(clear)
    app.add_typer(group, name="cache")
