"""The ``evalrun`` command line. ``evalrun FILE`` is short for ``evalrun run FILE``."""

from __future__ import annotations

from evalrun import say_interrupted

# The `evalrun` script imports this module before it calls `entry`, and typer takes a while to
# load: a Ctrl-C meanwhile exits 130 with one line too (docs/results.md, exit codes).
try:
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
except KeyboardInterrupt:
    raise SystemExit(say_interrupted()) from None

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
    "view": "view",
    "proxy": "proxy",
    "grader": "grader",
    "sdk": "sdk",
    "calibrate": "calibrate",
    "init": "init",
    "cache": "cache",
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
        elif getattr(param, "param_type_name", "") == "argument" and getattr(
            param, "hidden", False
        ):
            param._usage_display_name = lambda: ""  # an old spelling kept working, not shown
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


def _why_one_value(name: str | None) -> str:
    """Why an option takes one value, where "it takes one value" is not the whole story."""
    if name == "target":  # `validate`: a run takes several (docs/results.md, "A matrix run")
        return "validate checks with one target at a time"
    if name == "judge":
        return "one judge per run; for a panel give the eval file `judge: [a, b]` (docs/judges.md)"
    return "it takes one value"


def refuse_repeats(command: Any) -> None:
    """An option that takes one value, given twice, is a usage error (exit 2), never the last
    one kept without a word as click does (docs/results.md, "Exit codes"). Flags with no
    opposite (``-q -q``) and repeatable options (``--filter``) are left alone."""
    make_parser = command.make_parser

    def checked_parser(ctx: Any) -> Any:
        parser = make_parser(ctx)
        parse = parser.parse_args

        def parse_args(args: list[str]) -> Any:
            opts, rest, order = parse(args=args)
            if not ctx.resilient_parsing:
                _once_each(order)
            return opts, rest, order

        parser.parse_args = parse_args
        return parser

    command.make_parser = checked_parser
    for sub in getattr(command, "commands", {}).values():
        refuse_repeats(sub)


def _once_each(order: list[Any]) -> None:
    """``order``: the parameters as the parser met them, once per time each was given."""
    seen = [p for p in order if p.param_type_name == "option" and _one_value(p)]
    for param in dict.fromkeys(seen):
        times = seen.count(param)
        if times > 1:
            name = max(param.opts, key=len)
            why = _why_one_value(param.name)
            from evalrun.commands.failing import fail  # only when refusing

            raise fail(f"{name} was given {times} times: {why}")  # nothing ran (docs/results.md)


def _one_value(param: Any) -> bool:
    """Whether a repeat of the option would lose a value: not repeatable, not a count, and not
    a flag without an opposite (``--x`` twice says the same thing)."""
    if param.multiple or param.count:
        return False
    return not param.is_flag or bool(param.secondary_opts)


def main(argv: list[str] | None = None) -> None:
    args = route(list(sys.argv[1:] if argv is None else argv), set(COMMANDS))
    make_undumpable()
    # the command asked for, or all of them (for --help, and for the error on an unknown one)
    register([COMMANDS[args[0]]] if args and args[0] in COMMANDS else COMMANDS.values())
    command = typer.main.get_command(app)
    context_class = getattr(command, "context_class", None)
    if context_class is not None:
        tidy_help(command, context_class(command, info_name="evalrun"))
    refuse_repeats(command)
    defaults, project = _project_defaults(args)
    # ``obj``: the project's defaults and their sources, which ``run -v`` prints
    command.main(args=args, prog_name="evalrun", default_map=defaults, obj=project)


#: The commands whose option defaults come from the project (docs/config.md), by their words
#: on the command line, and which options (None: all, and the eval files of ``evals``).
PROJECT_OPTIONS: dict[tuple[str, ...], tuple[str, ...] | None] = {
    ("run",): None,
    ("validate",): ("target", "judge", "targets", "files"),
    ("cache", "clear"): ("cache_dir",),
    ("calibrate",): ("cache_dir", "targets"),
}


def _project_defaults(args: list[str]) -> tuple[dict[str, Any] | None, Any]:
    """click's ``default_map`` for the command ``args`` start with: the project's defaults
    (config file, ``.env``, ``EVALRUN_*``), which a flag overrides; a bad one is a usage error
    (exit 2)."""
    words = next((w for w in PROJECT_OPTIONS if tuple(args[: len(w)]) == w), None)
    if words is None or "--help" in args:  # help needs no project, so a broken one cannot block it
        return None, None
    from evalrun.projectconfig import ProjectConfigError, project_defaults

    try:
        found = project_defaults(Path.cwd(), os.environ)
    except ProjectConfigError as exc:  # before click runs a command, so exit here
        from evalrun.commands.failing import fail

        raise SystemExit(fail(exc).exit_code) from None
    values = dict(found.values())
    if found.evals:
        values["files"] = found.evals
    names = PROJECT_OPTIONS[words]
    default_map: dict[str, Any] = {k: v for k, v in values.items() if names is None or k in names}
    if words == ("run",) and isinstance(default_map.get("target"), str):  # run's is repeatable
        default_map["target"] = [default_map["target"]]
    for word in reversed(words):
        default_map = {word: default_map}
    return default_map, found


def entry() -> None:
    """The ``evalrun`` program: ``main``, then an exit without the interpreter's teardown.

    Freeing every object and module one by one takes ~40 ms at the end of each run and changes
    nothing on disk: the bundle's files are closed by then, the ``atexit`` hooks still run (a
    Ray cluster the run started stops in one) and stdout and stderr are flushed here."""
    code = 0
    try:
        main()
    except KeyboardInterrupt:  # while the command line loads, before a command runs
        code = say_interrupted()
    except SystemExit as exc:
        if _by_ctrl_c(exc):
            code = say_interrupted()
        elif exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:  # what the interpreter does with any other exit value
            print(exc.code, file=sys.stderr)
            code = 1
    except Exception as exc:  # noqa: BLE001 (re-raised unless a Ctrl-C caused it)
        # Python 3.11 wraps an exception raised in ``__set_name__`` (a pydantic model's fields,
        # while a command's module loads) in a RuntimeError whose cause is the interrupt
        if not _by_ctrl_c(exc):
            raise
        code = say_interrupted()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`evalrun ... | head`) or stream
            code = code or 1
    os._exit(code)


def _by_ctrl_c(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is in the exception's cause or context (one a command printed
    and suppressed is not): typer ends a command that one stopped with a silent exit 130, and
    Python wraps one raised while a class is made."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    return False
