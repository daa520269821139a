"""A started ``JudgeProxy`` over fake targets that count, stall or fail on demand."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx

from evalrun.targets.base import CompletionRequest, CompletionResponse, TokenUsage
from proxy import JudgeProxy

T = TypeVar("T")


class FakeTarget:
    """Records every request; optionally sleeps, raises, or echoes the prompt back."""

    def __init__(
        self,
        name: str,
        *,
        text: str = "fake answer",
        delay: float = 0.0,
        error: Exception | None = None,
        echo: bool = False,
    ) -> None:
        self.name = name
        self.text = text
        self.delay = delay
        self.error = error
        self.echo = echo
        self.calls = 0
        self.cancelled = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.requests: list[CompletionRequest] = []
        self._started: asyncio.Event | None = None

    @property
    def started(self) -> asyncio.Event:
        if self._started is None:
            self._started = asyncio.Event()
        return self._started

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.calls += 1
        self.requests.append(request)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        self.started.set()
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1
        if self.error is not None:
            raise self.error
        text = request.prompt_text if self.echo else self.text
        return CompletionResponse(
            text=text, usage=TokenUsage(3, 2), finish_reason="stop", cost_usd=0.001
        )

    async def aclose(self) -> None:
        return None


@asynccontextmanager
async def serve(
    *targets: Any, secrets: tuple[str, ...] = (), max_body_bytes: int = 1_000_000
) -> AsyncIterator[JudgeProxy]:
    by_name = {t.name: t for t in targets}
    proxy = JudgeProxy(
        by_name.__getitem__, list(by_name), secrets=list(secrets), max_body_bytes=max_body_bytes
    )
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()


def client(proxy: JudgeProxy, token: str | None = None, **kwargs: Any) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    kwargs.setdefault("timeout", 10)
    return httpx.AsyncClient(base_url=proxy.url, headers=headers, **kwargs)


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(scenario())  # type: ignore[arg-type]


def error_body(reply: httpx.Response | bytes, path: str | None = None) -> dict[str, Any]:
    """An error answer as ``{"code", "message", ...}``, checked to have its route's shape:
    AgentV's flat ``{"error": "<message>", "code": ..., ...}`` on ``/invoke``, ``/invokeBatch``,
    ``/info``; OpenAI's nested ``{"error": {"code", "message", ...}}`` under ``/v1``."""
    import json

    if isinstance(reply, httpx.Response):
        path = path or reply.request.url.path
        payload = json.loads(reply.content)
    else:
        payload = json.loads(reply)
    if (path or "").startswith("/v1/"):
        assert isinstance(payload.get("error"), dict), payload
        return payload["error"]
    assert isinstance(payload.get("error"), str), payload
    assert isinstance(payload.get("code"), str), payload
    return {**payload, "message": payload["error"]}
