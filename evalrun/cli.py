"""The ``evalrun`` command line. ``evalrun FILE`` is short for ``evalrun run FILE``."""

from __future__ import annotations

import importlib
import sys
import typing
from pathlib import Path
from typing import Any

import typer

from evalrun.hardening import make_undumpable

HELP = (
    "Run LLM evaluation files: YAML cases, graders in any language, a loopback judge proxy.\n\n"
    "`evalrun FILE [OPTIONS]` is short for `evalrun run FILE [OPTIONS]`; options may come "
    "before or after the file (`evalrun --target mock FILE`)."
)

app = typer.Typer(
    no_args_is_help=True,
    help=HELP,
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
    "sdk",
    "calibrate",
)

#: Options of ``evalrun`` itself; anything else in front of the file belongs to ``run``.
ROOT_OPTIONS = ("--help", "--version", "--install-completion", "--show-completion")


def _register_all() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"evalrun.commands.{name}").register(app)


def route(args: list[str], commands: set[str]) -> list[str]:
    """Put ``run`` in front unless the first word is a command or an option of evalrun itself,
    so ``evalrun FILE -q``, ``evalrun -q FILE`` and ``evalrun --target mock FILE`` all run."""
    if not args or args[0] in commands or args[0] in ROOT_OPTIONS:
        return args
    return ["run", *args]


#: Value placeholders by annotation, for options that name none (typer would print the type).
_METAVARS = {int: "N", float: "NUMBER", str: "TEXT", Path: "PATH"}


def tidy_help(command: Any, ctx: Any) -> None:
    """Help that reads like other command-line tools: flags show no ``<bool>`` value, values
    show a placeholder (``N``, ``PATH``) rather than a Python type, choices are listed, and
    arguments are written ``FILE`` (typer 0.2x prints ``{file}`` otherwise)."""
    for param in command.get_params(ctx):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
        elif getattr(param, "param_type_name", "") == "option" and param.metavar is None:
            descriptor = getattr(param, "type_descriptor", None)
            annotation = getattr(descriptor, "annotation", None)
            for element in typing.get_args(annotation) or (annotation,):
                if element in _METAVARS and not getattr(descriptor, "is_choice", False):
                    param.metavar = _METAVARS[element]
        elif getattr(param, "param_type_name", "") == "argument" and param.metavar is None:
            label = param.name.upper()
            param.metavar = label
            descriptor = getattr(param, "type_descriptor", None)
            if descriptor is not None and not getattr(descriptor, "is_choice", False):
                param.display_type_rich = lambda ctx: None  # the label says it already
            suffix = "..." if param.nargs != 1 else ""
            if param.required:
                param._usage_display_name = lambda label=label, suffix=suffix: label + suffix
            else:
                param._usage_display_name = lambda label=label, suffix=suffix: f"[{label}{suffix}]"
    for name, sub in getattr(command, "commands", {}).items():
        tidy_help(sub, type(ctx)(sub, info_name=name, parent=ctx))


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    make_undumpable()
    _register_all()
    commands = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    command = typer.main.get_command(app)
    context_class = getattr(command, "context_class", None)
    if context_class is not None:
        tidy_help(command, context_class(command, info_name="evalrun"))
    command.main(args=route(args, commands), prog_name="evalrun")
