"""The ``evalrun`` command line. ``evalrun FILE`` is short for ``evalrun run FILE``."""

from __future__ import annotations

import importlib
import sys

import typer

from evalrun.hardening import make_undumpable

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Run LLM evaluation files: YAML cases, graders in any language, a loopback judge proxy.",
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from evalrun import __version__

        typer.echo(f"evalrun {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Run LLM evaluation files: YAML cases, graders in any language, a loopback judge proxy."""


#: Modules under evalrun.commands that add commands to ``app`` (each has ``register(app)``).
COMMAND_MODULES: tuple[str, ...] = (
    "run",
    "score",
    "rubrics",
    "targets",
    "report",
    "proxy",
    "grader",
)


def _register_all() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"evalrun.commands.{name}").register(app)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    make_undumpable()
    _register_all()
    commands = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    if args and args[0] not in commands and not args[0].startswith("-"):
        args.insert(0, "run")
    app(args=args, prog_name="evalrun")
