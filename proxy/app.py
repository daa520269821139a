"""The proxy's ASGI app: the gate's transport checks, the body read under its cap, then the
route (``proxy.routes``), all in one raw ASGI layer since every judge call passes through here.
Anything else (``/openapi.json``, 404/405 answers) goes to the same routes declared to FastAPI
(``proxy.declared``), built on first use: most runs never import FastAPI.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from evalrun.targets import Target
from proxy.gate import GrantGate, RequestHead, too_large, transport_refusal
from proxy.grants import GrantRegistry
from proxy.replies import ErrorReply
from proxy.routes import AGENTV_PATHS, JSON, ProxyRoutes
from proxy.wire import OPENAI_PREFIX

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: every error answer is final (budget spent, evalrun's own retries done): OpenAI's SDKs
#: honour this header and do not repeat the request (docs/proxy.md)
_NO_RETRY_HEADER = (b"x-should-retry", b"false")
#: the one route that needs no token: the OpenAPI document (docs/proxy.md, "Routes")
_PUBLIC_PATHS = frozenset({"/openapi.json"})


async def _send(
    send: Send, status: int, body: bytes, *, close: bool = False, content_type: bytes = JSON
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if status >= 400:
        headers.append(_NO_RETRY_HEADER)
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _unless_disconnected(
    work: Awaitable[tuple[int, bytes, bytes]], receive: Receive
) -> tuple[int, bytes, bytes] | None:
    """``work``'s reply, or None when the client hung up first: then ``work`` is cancelled,
    and with it every upstream call it still had running or queued."""
    task = asyncio.ensure_future(work)

    async def hung_up() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    watch = asyncio.ensure_future(hung_up())
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()
    if task.cancelled() or not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None
    return task.result()


class ProxyApp:
    """The proxy's gate and fast path, in front of FastAPI for everything else."""

    def __init__(self, routes: ProxyRoutes, target_names: list[str], max_body_bytes: int) -> None:
        self.routes = routes
        self.target_names = target_names
        self.max_body_bytes = max_body_bytes
        self._declared: ASGIApp | None = None

    @property
    def declared(self) -> ASGIApp:
        """The FastAPI app of the same routes, built on first use."""
        if self._declared is None:
            from proxy.declared import build_fastapi

            self._declared = build_fastapi(self.routes, self.target_names)
        return self._declared

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.declared(scope, receive, send)
            return
        head = RequestHead.read(scope["headers"])
        path, method = scope["path"], scope["method"]
        openai = path.startswith(OPENAI_PREFIX)
        refusal = transport_refusal(head, self.max_body_bytes)
        if refusal is not None:
            error = refusal.error
            await _send(send, error.status, error.body(openai=openai), close=refusal.close)
            return
        try:
            body = await self._read_body(receive)
        except ErrorReply as error:  # over the cap
            await _send(send, error.status, error.body(openai=openai))
            return
        if body is None:  # the client left while sending
            return
        if method == "OPTIONS" and path in AGENTV_PATHS:
            # AgentV answers a preflight 204; with no Access-Control-* header, a browser page
            # still may not call the proxy (docs/security.md, "Host and Origin check, no CORS")
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return

        handler = self.routes.lookup(method, path)
        if handler is not None:
            reply = await _unless_disconnected(
                self.routes.run(handler, head.authorization, body, openai=openai), receive
            )
            if reply is not None:
                status, payload, content_type = reply
                await _send(send, status, payload, content_type=content_type)
            return
        if path not in _PUBLIC_PATHS:
            # no route says whether it exists to a caller without a live token
            # (docs/security.md, "Unknown routes answer 401 without a token")
            try:
                self.routes.gate.authorize(head.authorization)
            except ErrorReply as error:
                await _send(send, error.status, error.body(openai=openai))
                return
        await self.declared(scope, self._replay(body, receive), send)

    async def _read_body(self, receive: Receive) -> bytes | None:
        """The whole body, or None if the client left first; 413 once it passes the cap
        (checked as it arrives, so a chunked body cannot get around it)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise too_large(self.max_body_bytes)
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    @staticmethod
    def _replay(body: bytes, receive: Receive) -> Callable[[], Awaitable[Message]]:
        """``receive`` for FastAPI, giving it first the body already read."""
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay


def create_app(
    registry: GrantRegistry,
    resolve_target: Callable[[str], Target],
    target_names: list[str],
    *,
    max_body_bytes: int = 1_000_000,
) -> ProxyApp:
    """Build the proxy app. ``resolve_target`` maps a configured name to its (shared) target."""
    names = list(target_names)
    routes = ProxyRoutes(GrantGate(registry), resolve_target, names)
    return ProxyApp(routes, names, max_body_bytes)
