"""Serving the viewer: a socket on 127.0.0.1 only (the port the OS picks unless one is asked
for) and uvicorn on it until Ctrl-C (docs/viewer.md)."""

from __future__ import annotations

import socket
from pathlib import Path

import uvicorn

from evalrun.viewer.app import create_app

HOST = "127.0.0.1"


def bind(port: int = 0) -> socket.socket:
    """A listening socket on the loopback address; ``port`` 0 lets the OS pick a free one.
    Raises ``OSError`` when the port is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def url_of(sock: socket.socket) -> str:
    return f"http://{HOST}:{sock.getsockname()[1]}/"


def server(index: Path) -> uvicorn.Server:
    """A uvicorn server of the viewer over ``index``; ``serve(sockets=[...])`` runs it.

    The h11 parser caps request headers, as the proxy's does (docs/security.md)."""
    config = uvicorn.Config(
        create_app(index),
        http="h11",
        ws="none",
        lifespan="off",
        log_level="warning",
        access_log=False,
        server_header=False,
    )
    return uvicorn.Server(config)
