"""``evalrun view``: serve the viewer on 127.0.0.1 and print its URL (docs/viewer.md)."""

from __future__ import annotations

import asyncio
import os
import sys
import webbrowser
from pathlib import Path

import typer

from evalrun.results.index import DEFAULT_INDEX
from evalrun.safetext import printable


def view(
    port: int = typer.Option(
        0, "--port", min=0, max=65535, help="Port on 127.0.0.1 (default: a free one)."
    ),
    no_open: bool = typer.Option(False, "--no-open", help="Do not open a browser."),
    index: Path = typer.Option(DEFAULT_INDEX, "--index", metavar="PATH", help="The index to read."),
) -> None:
    """Browse past runs in a local web page: list, run, compare, history (127.0.0.1 only)."""
    from evalrun.viewer.server import bind, server, url_of  # FastAPI loads only for this

    try:
        sock = bind(port)
    except OSError as exc:
        typer.echo(f"error: cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})", err=True)
        raise typer.Exit(2) from None
    url = url_of(sock)
    if not index.is_file():
        typer.echo(
            f"note: no run index at {printable(str(index))} yet: the list is empty", err=True
        )
    typer.echo(f"evalrun view: {url}  (Ctrl-C stops it)", err=False)
    if not no_open and _has_desktop():
        webbrowser.open(url)
    try:
        asyncio.run(server(index).serve(sockets=[sock]))
    finally:
        sock.close()


def _has_desktop() -> bool:
    """Whether a browser would open in a window: without a display (ssh, CI) Python's
    ``webbrowser`` falls back to a text browser that would take over the terminal."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def register(app: typer.Typer) -> None:
    app.command("view")(view)
