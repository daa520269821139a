"""What every target gets regardless of provider: defaults, a concurrency limit shared by the
runner and the proxy, retries with backoff that honour Retry-After, per-attempt timeouts derived
from the target's latency, the response cache, the record/replay cassette, and cost accounting."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from types import TracebackType
from typing import Any, Protocol

from evalrun.safetext import repair, repair_json
from evalrun.targets.base import (
    CompletionRequest,
    CompletionResponse,
    Target,
    TargetError,
    TargetTimeout,
)
from evalrun.targets.config import TargetConfig
from evalrun.targets.limit import ConcurrencyLimit
from evalrun.targets.registry import ToolsUnsupported, kinds
from evalrun.targets.tails import AttemptTimeouts

MAX_BACKOFF_S = 30.0
#: a longer Retry-After (a spent daily quota) fails at once instead of stalling the run
MAX_RETRY_AFTER_S = 120.0
#: a 429 retried under the adaptive limit is the limit working, not the call failing
RATE_LIMIT_RETRIES = 10
#: the most output tokens a request may ask of a target without a ``max_tokens`` of its own
MAX_TOKENS_CAP = 8192
#: how often an attempt looks again at the derived timeout while none is known yet, so a call
#: that hung before there were enough answers is still cut once there are
RECHECK_S = 0.25


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

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


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
        #: a hung attempt is cut and sent again only to provider APIs (the cached kinds: an
        #: agent's run is not repeated for being slow) whose ``timeout`` the user left unset
        derive = kind is not None and kind.cached and "timeout" not in config.model_fields_set
        self._timeouts = AttemptTimeouts(config.timeout, derive=derive)
        #: copies sent by hedging (counted in ``calls`` too), and how many answered first
        self.hedged = 0
        self.hedge_wins = 0

    @property
    def kind(self) -> str:
        """Named in the proxy's ``tools_unsupported`` refusal (proxy/routes.py)."""
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
                    response, copies = await self._attempt(request, started)
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
            elapsed = time.perf_counter() - started
            self._timeouts.observe(elapsed)
            response.latency_ms = elapsed * 1000
            # a copy that lost was sent too: it is charged like the one that answered
            response.cost_usd = self._cost(response, copies)
            return response

    async def _attempt(
        self, request: CompletionRequest, started: float
    ) -> tuple[CompletionResponse, int]:
        """One attempt and how many copies of it went out: cut when it outlasts the derived
        timeout, and sent a second time when hedging says so (docs/targets.md, "Tails"); the
        provider's own ``timeout`` bounds every copy in any case."""
        assert self.provider is not None  # a replayed target never gets here
        hedge_after = self._hedge_after(request)
        if not self._timeouts.derive and hedge_after is None:
            return await self.provider.complete(request), 1
        first = asyncio.ensure_future(self.provider.complete(request))
        copies, sent = [first], 1
        try:
            while True:
                limit = self._timeouts.current()
                now = time.perf_counter()
                wake = [now + RECHECK_S if limit is None else started + limit]
                if hedge_after is not None:
                    wake.append(started + hedge_after)
                done, _ = await asyncio.wait(
                    copies, timeout=max(min(wake) - now, 0.0), return_when=asyncio.FIRST_COMPLETED
                )
                for copy in done:
                    copies.remove(copy)
                    if copy.exception() is not None and copies:
                        continue  # the other copy may still answer
                    self.hedge_wins += copy is not first and copy.exception() is None
                    return copy.result(), sent
                elapsed = time.perf_counter() - started
                if limit is not None and elapsed >= limit:
                    self._timeouts.cut += 1
                    raise TargetTimeout(
                        f"target '{self.name}': no answer within {limit:.2f}s, the timeout "
                        "derived from its latency (docs/targets.md, 'Tails')",
                        target=self.name,
                    )
                if hedge_after is not None and elapsed >= hedge_after:
                    hedge_after = None  # one look: a copy goes now or never
                    if not self._hedge_room():
                        continue
                    copies.append(asyncio.ensure_future(self.provider.complete(request)))
                    sent += 1
                    self.calls += 1
                    self.hedged += 1
        finally:
            for copy in copies:
                copy.cancel()

    def _hedge_after(self, request: CompletionRequest) -> float | None:
        """When a copy of this attempt goes out: only for deterministic requests (temperature 0
        or unset, whose copies are interchangeable), once the latency is known."""
        hedge = self.config.hedge
        if hedge is None or (request.temperature or 0.0) != 0.0:
            return None
        return self._timeouts.quantile(hedge.quantile)

    def _hedge_room(self) -> bool:
        """Whether one more copy keeps the copies within ``max_share`` of all calls sent."""
        assert self.config.hedge is not None
        return self.hedged + 1 <= self.config.hedge.max_share * (self.calls + 1)

    @staticmethod
    def _backoff(attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), MAX_RETRY_AFTER_S)
        base = min(0.5 * (2**attempt), MAX_BACKOFF_S)
        return base / 2 + random.uniform(0, base / 2)

    def _free(self) -> float | None:
        return 0.0 if self.config.price is not None else None

    def _cost(self, response: CompletionResponse, copies: int) -> float | None:
        price = self.config.price
        if price is None:
            return response.cost_usd  # what the provider reported, if it did (docs/agents.md)
        usage = response.usage
        one = (usage.input_tokens * price.input + usage.output_tokens * price.output) / 1e6
        return one * copies

    def stats(self) -> dict[str, Any]:
        """Calls made and how the concurrency limit moved, for the run summary."""
        limit = self._adaptive.stats() if self._adaptive is not None else {}
        hedging = {"hedged": self.hedged, "hedge_wins": self.hedge_wins}
        return {"calls": self.calls, **limit, **self._timeouts.stats(), **hedging}

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
