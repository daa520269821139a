"""A small real HTTP/1.1 server on 127.0.0.1 for provider tests.

It records every request (method, path, query, headers, JSON body) and answers from a handler,
which can also stall, or cut the connection mid-response. It runs in the test's event loop
(``async with FakeServer(handler)``) or in its own thread (``with FakeServer(handler)``) for code
that starts its own loop, such as the CLI.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from evalrun.targets import TargetConfig
from evalrun.targets.config import TargetsFile

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable",
            529: "Overloaded"}  # fmt: skip


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    #: send the headers and this many body bytes, then drop the connection
    cut_after: int | None = None
    #: never answer (until the server stops)
    stall: bool = False


Handler = Callable[[Seen], "Reply | Awaitable[Reply]"]


class FakeServer:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.seen: list[Seen] = []
        self.active = 0
        self.max_active = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def count(self) -> int:
        return len(self.seen)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> FakeServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def __enter__(self) -> FakeServer:
        started = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.start())
            started.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self.stop())
            self._loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        parts = urlsplit(target)
        seen = Seen(method, parts.path, parse_qs(parts.query), headers, body)
        self.seen.append(seen)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            reply = self.handler(seen)
            if not isinstance(reply, Reply):
                reply = await reply
        finally:
            self.active -= 1
        if reply.stall:
            await asyncio.Event().wait()
        payload = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
        reason = _REASONS.get(reply.status, "Status")
        out = [f"HTTP/1.1 {reply.status} {reason}", f"Content-Length: {len(payload)}"]
        if reply.raw is None:
            out.append("Content-Type: application/json")
        out += [f"{k}: {v}" for k, v in reply.headers.items()]
        writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
        if reply.cut_after is not None:
            writer.write(payload[: reply.cut_after])
            await writer.drain()
            return False
        writer.write(payload)
        await writer.drain()
        return True


def config(name: str = "t", kind: str = "openai", **values: Any) -> TargetConfig:
    return TargetConfig.model_validate({"name": name, "kind": kind, **values})


def targets_file(*configs: dict[str, Any]) -> TargetsFile:
    return TargetsFile.model_validate({"targets": list(configs)})


class Sleeps:
    """An injectable ``sleep`` that records the requested delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def openai_reply(text: str, prompt_tokens: int = 11, completion_tokens: int = 3) -> Reply:
    return Reply(
        body={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


def openai_error(status: int, message: str, kind: str, code: str | None = None) -> Reply:
    return Reply(
        status=status,
        body={"error": {"message": message, "type": kind, "param": None, "code": code}},
    )
