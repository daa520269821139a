"""``JudgeProxy``: the loopback server the runner starts once per run and stops on every exit.

uvicorn runs as a task in the caller's event loop (so grants, targets and the runner share one
loop), on a socket this class binds itself: a bind failure is an ordinary ``OSError`` here
instead of uvicorn's ``sys.exit``, and the port is known before the first request.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn

from evalrun.targets import Target
from proxy.app import create_app
from proxy.grants import Grant, GrantRegistry


class _Server(uvicorn.Server):
    """uvicorn without signal handling (the runner owns Ctrl-C) that stops when told to, not
    at its next 0.1 s tick (the proxy sets no date header and no request limit, which is all
    the tick does)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.stop_requested = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def install_signal_handlers(self) -> None:  # older uvicorn versions call this
        return None

    async def main_loop(self) -> None:
        await self.on_tick(0)  # sets the default headers once
        await self.stop_requested.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Without connections or requests left (the end of a run: every grader has exited)
        there is nothing to drain, so no 0.1 s grace for them either."""
        if self.server_state.connections or self.server_state.tasks:
            await super().shutdown(sockets)
            return
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for server in self.servers:
            await server.wait_closed()


def _loopback(host: str) -> str:
    if host == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"the judge proxy binds a loopback IP only, not {host!r}") from None
    if not address.is_loopback:
        raise ValueError(f"the judge proxy binds a loopback IP only, not {host!r}")
    return str(address)


def _unix_listener(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        sock.listen(512)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class JudgeProxy:
    def __init__(
        self,
        resolve_target: Callable[[str], Target],
        target_names: Iterable[str],
        *,
        secrets: Iterable[str] = (),
        host: str = "127.0.0.1",
        max_body_bytes: int = 1_000_000,
        shutdown_timeout: float = 5.0,
        unix_socket: Path | None = None,
    ) -> None:
        """``unix_socket``: also listen there, for graders in a network namespace of their own
        (the ``strict`` sandbox, docs/security.md); the path's folder should be private."""
        self.host = _loopback(host)
        self.unix_socket = unix_socket
        self.target_names = list(target_names)
        self.registry = GrantRegistry(secrets)
        self.app = create_app(
            self.registry, resolve_target, self.target_names, max_body_bytes=max_body_bytes
        )
        self._shutdown_timeout = shutdown_timeout
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("the judge proxy is not started")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("the judge proxy is already started")
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only when the
        # protocol says TCP, and without it small responses wait ~40 ms for delayed ACKs.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.bind((self.host, 0))
            sock.listen(512)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._socket = sock
        self.port = sock.getsockname()[1]
        sockets = [sock]
        if self.unix_socket is not None:
            sockets.append(_unix_listener(self.unix_socket))
        config = uvicorn.Config(
            self.app,
            # h11 caps request headers (16 KiB); uvicorn's httptools parser buffers them unbounded.
            http="h11",
            ws="none",
            interface="asgi3",
            lifespan="off",
            access_log=False,
            log_config=None,
            log_level="error",
            proxy_headers=False,
            server_header=False,
            date_header=False,
            # uvicorn annotates int but hands it to asyncio.wait_for, which takes float seconds
            timeout_graceful_shutdown=self._shutdown_timeout,  # type: ignore[arg-type]
            timeout_keep_alive=30,
        )
        self._server = _Server(config)
        self.registry.closing = False
        self._task = asyncio.create_task(self._server.serve(sockets=sockets), name="judge-proxy")
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError("the judge proxy stopped during startup")
            await asyncio.sleep(0.001)

    def grant(
        self,
        default_target: str,
        max_calls: int,
        allowed: Iterable[str] | None = None,
        *,
        grader: str = "",
        case_id: str = "",
    ) -> Grant:
        """A fresh token for one grader run. ``allowed=None`` means every configured target."""
        names = self.target_names if allowed is None else list(allowed)
        for name in [default_target, *names]:
            if name not in self.target_names:
                raise ValueError(f"unknown target '{name}'")
        return self.registry.issue(default_target, max_calls, names, grader=grader, case_id=case_id)

    def revoke(self, grant: Grant) -> None:
        self.registry.revoke(grant)

    def redact(self, value: Any, token: str) -> Any:
        """``value`` (text or JSON-like data) without ``token`` or any key of the targets."""
        return self.registry.redactor.any(value, token)

    async def stop(self) -> None:
        """Cancel calls in flight (they answer 503), close every connection, free the port."""
        task, server, sock = self._task, self._server, self._socket
        self._task = self._server = self._socket = None
        self.registry.closing = True
        self.registry.cancel_all()
        try:
            if task is not None and server is not None:
                server.should_exit = True
                server.stop_requested.set()
                done, _ = await asyncio.wait({task}, timeout=self._shutdown_timeout + 2)
                if not done:
                    server.force_exit = True
                    task.cancel()
                    await asyncio.wait({task})
                if not task.cancelled():
                    task.exception()  # retrieved so a failed server does not warn at exit
        finally:
            if sock is not None:
                sock.close()
            if self.unix_socket is not None:
                self.unix_socket.unlink(missing_ok=True)

    async def __aenter__(self) -> JudgeProxy:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
