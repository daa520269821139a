"""How every command stops on an error: the problem on stderr, then the exit code that
``evalrun.errors`` gives it (docs/results.md, "Exit codes")."""

from __future__ import annotations

from collections.abc import Iterable

import typer

from evalrun.errors import ExitCode, UserError
from evalrun.safetext import printable


def fail(
    message: str | UserError, *, problems: Iterable[str] = (), code: int | None = None
) -> typer.Exit:
    """Print ``problems`` (one a line, as found) and ``error: message``; the exit to raise.

    The code is ``code`` when given, else the error's own (:class:`UserError`: 2), else 2: a
    command that stops before it did its work has run nothing."""
    for problem in problems:
        typer.echo(printable(problem, multiline=True), err=True)
    typer.echo(f"error: {printable(str(message), multiline=True)}", err=True)
    if code is None:
        code = message.exit_code if isinstance(message, UserError) else ExitCode.USAGE
    return typer.Exit(code)
