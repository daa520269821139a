"""The ``evalrun`` command line. ``evalrun FILE`` is short for ``evalrun run FILE``."""

from __future__ import annotations

import atexit
import importlib
import os
import sys
import typing
from collections.abc import Iterable
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


#: Every command, and the module under evalrun.commands that adds it to ``app`` (each has
#: ``register(app)``): a run imports its own module only.
COMMANDS: dict[str, str] = {
    "run": "run",
    "validate": "run",
    "schema": "run",
    "score": "score",
    "rubrics": "rubrics",
    "targets": "targets",
    "report": "report",
    "merge": "report",
    "compare": "report",
    "runs": "runs",
    "proxy": "proxy",
    "grader": "grader",
    "sdk": "sdk",
    "calibrate": "calibrate",
}

#: Options of ``evalrun`` itself; anything else in front of the file belongs to ``run``.
ROOT_OPTIONS = ("--help", "--version", "--install-completion", "--show-completion")


def register(modules: Iterable[str]) -> None:
    for name in dict.fromkeys(modules):
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
    args = route(list(sys.argv[1:] if argv is None else argv), set(COMMANDS))
    make_undumpable()
    # the command asked for, or all of them (for --help, and for the error on an unknown one)
    register([COMMANDS[args[0]]] if args and args[0] in COMMANDS else COMMANDS.values())
    command = typer.main.get_command(app)
    context_class = getattr(command, "context_class", None)
    if context_class is not None:
        tidy_help(command, context_class(command, info_name="evalrun"))
    command.main(args=args, prog_name="evalrun")


def entry() -> None:
    """The ``evalrun`` program: ``main``, then an exit without the interpreter's teardown.

    Freeing every object and module one by one takes ~40 ms at the end of each run and changes
    nothing on disk: the bundle's files are closed by then, the ``atexit`` hooks still run (a
    Ray cluster the run started stops in one) and stdout and stderr are flushed here."""
    code = 0
    try:
        main()
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:  # what the interpreter does with any other exit value
            print(exc.code, file=sys.stderr)
            code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`evalrun ... | head`) or stream
            code = code or 1
    os._exit(code)
