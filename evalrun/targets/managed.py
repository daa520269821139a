"""What every target gets regardless of provider: defaults, a concurrency limit shared by the
runner and the proxy, retries with backoff that honour Retry-After, the response cache, the
record/replay cassette, and cost accounting."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Protocol

from evalrun.safetext import repair, repair_json
from evalrun.targets.base import (
    CompletionRequest,
    CompletionResponse,
    Target,
    TargetError,
)
from evalrun.targets.config import TargetConfig
from evalrun.targets.limit import ConcurrencyLimit
from evalrun.targets.registry import ToolsUnsupported, kinds

MAX_BACKOFF_S = 30.0
#: a longer Retry-After (a spent daily quota) fails at once instead of stalling the run
MAX_RETRY_AFTER_S = 120.0
#: a 429 retried under the adaptive limit is the limit working, not the call failing
RATE_LIMIT_RETRIES = 10
#: the most output tokens a request may ask of a target without a ``max_tokens`` of its own
MAX_TOKENS_CAP = 8192


class ResponseStore(Protocol):
    """A cache or a cassette: responses keyed by target identity and request."""

    def get(
        self, config: TargetConfig, request: CompletionRequest
    ) -> CompletionResponse | None: ...

    def put(
        self, config: TargetConfig, request: CompletionRequest, response: CompletionResponse
    ) -> None: ...


class AsyncLimit(Protocol):
    async def __aenter__(self) -> None: ...

    async def __aexit__(self, *exc: object) -> None: ...


class ManagedTarget:
    def __init__(
        self,
        provider: Target | None,
        config: TargetConfig,
        *,
        cache: ResponseStore | None = None,
        recorder: ResponseStore | None = None,
        replay: ResponseStore | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        limit: AsyncLimit | None = None,
    ) -> None:
        """``provider`` is None only with ``replay``: a replayed run makes no live call.
        ``limit``: the concurrency limit to hold calls under; by default one of this
        process's own (``max_concurrency``), on a Ray cluster one for the whole cluster."""
        if provider is None and replay is None:
            raise ValueError(f"target '{config.name}': a provider is needed unless replaying")
        self.name = config.name
        self.config = config
        self.provider = provider
        self._cache = cache
        self._recorder = recorder
        self._replay = replay
        self._sleep = sleep
        self._limit: AsyncLimit = limit or ConcurrencyLimit(*config.concurrency_bounds)
        #: the adaptive limit, when calls are held under one of this process's own
        self._adaptive = self._limit if isinstance(self._limit, ConcurrencyLimit) else None
        self.calls = 0
        #: kinds whose answers depend on more than the request, or cost nothing to recompute,
        #: are not cached unless ``cache: true`` (evalrun/targets/providers/__init__.py)
        setting = config.extra("cache")
        kind = kinds().get(config.kind)
        self._cache_enabled = bool(setting) if setting is not None else kind is None or kind.cached

    @property
    def kind(self) -> str:
        """Named in the proxy's ``tools_unsupported`` refusal (proxy/app.py)."""
        return self.config.kind

    @property
    def supports_tools(self) -> bool:
        """A replayed target lets tool requests through to the cassette, which holds only what
        a tool-capable target answered."""
        if self.provider is None:
            return True
        return bool(getattr(self.provider, "supports_tools", False))

    def _with_defaults(self, request: CompletionRequest) -> CompletionRequest:
        """The target's defaults fill what the request leaves out; a requested ``max_tokens``
        is capped at the configured one (else ``MAX_TOKENS_CAP``), so a grader cannot ask for
        an answer of any length, and cost (docs/security.md)."""
        max_tokens = request.max_tokens
        if max_tokens is None:
            max_tokens = self.config.max_tokens
        else:
            max_tokens = min(max_tokens, self.config.max_tokens or MAX_TOKENS_CAP)
        temperature = request.temperature
        if temperature is None:
            temperature = self.config.temperature
        return replace(request, temperature=temperature, max_tokens=max_tokens)

    def _cacheable(self, request: CompletionRequest) -> bool:
        """Only deterministic requests (temperature 0 or unset) of cacheable kinds."""
        return (
            self._cache is not None and self._cache_enabled and (request.temperature or 0.0) == 0.0
        )

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Answer from the replay cassette, else the cache, else the provider (with retries).
        Cache hits and live answers are both recorded; stored answers cost nothing now.
        Whatever the source, the text is made encodable here, where it enters evalrun."""
        if request.uses_tools and not self.supports_tools:
            raise ToolsUnsupported(self.name, self.kind)
        return _encodable(await self._complete(self._with_defaults(request)))

    async def _complete(self, request: CompletionRequest) -> CompletionResponse:
        if self._replay is not None:
            hit = self._replay.get(self.config, request)
            if hit is None:
                raise TargetError(
                    f"replay: the cassette has no recorded response for this call to target "
                    f"'{self.name}' (record it again with --record)",
                    status=502,
                    target=self.name,
                )
            return replace(hit, replayed=True, latency_ms=0.0, cost_usd=self._free())
        if self._cacheable(request):
            assert self._cache is not None
            hit = self._cache.get(self.config, request)
            if hit is not None:
                response = replace(hit, cached=True, latency_ms=0.0, cost_usd=self._free())
                if self._recorder is not None:
                    self._recorder.put(self.config, request, response)
                return response
        response = _encodable(await self._call_with_retries(request))  # before it is stored
        response.cost_usd = self._cost(response)
        if self._cacheable(request):
            assert self._cache is not None
            self._cache.put(self.config, request, response)
        if self._recorder is not None:
            self._recorder.put(self.config, request, response)
        return response

    async def _call_with_retries(self, request: CompletionRequest) -> CompletionResponse:
        attempt = 0
        while True:
            try:
                async with self._limit:
                    self.calls += 1
                    started = time.perf_counter()
                    assert self.provider is not None  # a replayed target never gets here
                    response = await self.provider.complete(request)
            except TargetError as exc:
                exc.target = exc.target or self.name
                throttled = exc.status == 429
                if throttled and self._adaptive is not None:
                    self._adaptive.throttled(exc.retry_after)
                retries = max(self.config.max_retries, RATE_LIMIT_RETRIES) if throttled else None
                if not exc.retryable or attempt >= (retries or self.config.max_retries):
                    if attempt:
                        _amend(exc, f"(gave up after {attempt + 1} attempts)")
                    raise
                if exc.retry_after is not None and exc.retry_after > MAX_RETRY_AFTER_S:
                    _amend(exc, f"(the provider asks to wait {exc.retry_after:.0f}s; not retried)")
                    raise
                await self._sleep(self._backoff(attempt, exc.retry_after))
                attempt += 1
                continue
            except Exception as exc:
                redact = getattr(self.provider, "redact", str)
                raise TargetError(
                    redact(f"target '{self.name}' failed: {type(exc).__name__}: {exc}"),
                    target=self.name,
                ) from exc
            if self._adaptive is not None:
                self._adaptive.succeeded()
            response.latency_ms = (time.perf_counter() - started) * 1000
            return response

    @staticmethod
    def _backoff(attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), MAX_RETRY_AFTER_S)
        base = min(0.5 * (2**attempt), MAX_BACKOFF_S)
        return base / 2 + random.uniform(0, base / 2)

    def _free(self) -> float | None:
        return 0.0 if self.config.price is not None else None

    def _cost(self, response: CompletionResponse) -> float | None:
        price = self.config.price
        if price is None:
            return response.cost_usd  # what the provider reported, if it did (docs/agents.md)
        usage = response.usage
        return (usage.input_tokens * price.input + usage.output_tokens * price.output) / 1e6

    def stats(self) -> dict[str, Any]:
        """Calls made and how the concurrency limit moved, for the run summary."""
        limit = self._adaptive.stats() if self._adaptive is not None else {}
        return {"calls": self.calls, **limit}

    async def aclose(self) -> None:
        if self.provider is not None:
            await self.provider.aclose()


def _encodable(response: CompletionResponse) -> CompletionResponse:
    """Lone surrogates replaced in every text of the answer, and counted."""
    text, in_text = repair(response.text)
    refusal, in_refusal = repair_json(response.refusal)
    tool_calls, in_calls = repair_json(response.tool_calls)
    logprobs, in_logprobs = repair_json(response.logprobs)
    panel, in_panel = repair_json(response.panel)
    replaced = in_text + in_refusal + in_calls + in_logprobs + in_panel
    if not replaced:
        return response
    return replace(
        response,
        text=text,
        refusal=refusal,
        tool_calls=tool_calls,
        logprobs=logprobs,
        panel=panel,
        repaired=response.repaired + replaced,
    )


def _amend(exc: TargetError, note: str) -> None:
    exc.message = f"{exc.message} {note}"
    exc.args = (exc.message,)
