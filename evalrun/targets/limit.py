"""A target's concurrency limit: adaptive, and not bound to one event loop.

A target is shared by the runner and the judge proxy; the proxy serves in the runner's event
loop (docs/architecture.md), so in a run every call waits on this limit from that one loop.
Unlike ``asyncio.Semaphore``, which binds to the first loop that waits on it, the limit keeps
its state under a thread lock and wakes each waiter on the waiter's own loop, so a target (whose
HTTP clients are kept per loop too) stays usable by a caller that drives it from several loops
or threads, one ``asyncio.run`` after another or at once.

The limit adapts to the provider (docs/targets.md, "Concurrency"): it starts at ``start`` and,
while calls succeed, grows by one per success (doubling per round trip) until the first 429,
then by one per window of successes; a 429 halves it (once per window of calls in flight) and
holds every new call until the provider's Retry-After has passed. It never exceeds ``ceiling``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from types import TracebackType
from typing import Any


class ConcurrencyLimit:
    def __init__(self, start: int, ceiling: int | None = None) -> None:
        self.ceiling = max(1, ceiling if ceiling is not None else start)
        self.limit = self.start = min(max(1, start), self.ceiling)
        self.peak_limit = self.limit
        self.peak_active = 0
        self.rate_limited = 0
        self._growth = 0.0
        self._slow_start = True
        self._calls_since_cut = self.limit  # the first 429 always cuts
        self._resume_at = 0.0
        self._active = 0
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    @property
    def active(self) -> int:
        return self._active

    def stats(self) -> dict[str, Any]:
        """What the run summary records per target."""
        return {
            "concurrency_start": self.start,
            "concurrency_reached": self.peak_active,
            "concurrency_limit_peak": self.peak_limit,
            "concurrency_limit_end": self.limit,
            "max_concurrency": self.ceiling,
            "rate_limited": self.rate_limited,
        }

    async def acquire(self) -> None:
        await self._wait_out_pause()
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._active < self.limit and not self._waiters:
                self._take()
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            with self._lock:
                queued = (loop, waiter) in self._waiters
                if queued:
                    self._waiters.remove((loop, waiter))
            # A slot handed over just before the cancel must be passed on; if the waiter itself
            # was cancelled, _hand_over sees that and passes the slot on instead.
            if not queued and not waiter.cancelled():
                self.release()
            raise

    async def _wait_out_pause(self) -> None:
        while (delay := self._resume_at - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def _take(self) -> None:
        self._active += 1
        self.peak_active = max(self.peak_active, self._active)

    def release(self) -> None:
        """Give the slot to the oldest waiter (on its own loop), or free it."""
        with self._lock:
            self._active -= 1
            self._wake()

    def _wake(self) -> None:
        """Hand free slots to waiters, in order (called with the lock held)."""
        while self._waiters and self._active < self.limit:
            loop, waiter = self._waiters.popleft()
            if loop.is_closed():
                continue
            self._take()
            loop.call_soon_threadsafe(self._hand_over, waiter)

    def _hand_over(self, waiter: asyncio.Future[None]) -> None:
        if waiter.done():
            self.release()
        else:
            waiter.set_result(None)

    def succeeded(self) -> None:
        """A call went through: grow the limit (slow start, then one per window)."""
        with self._lock:
            self._calls_since_cut += 1
            if self.limit >= self.ceiling:
                return
            self._growth += 1.0 if self._slow_start else 1.0 / self.limit
            if self._growth >= 1.0:
                self._growth -= 1.0
                self.limit += 1
                self.peak_limit = max(self.peak_limit, self.limit)
                self._wake()

    def throttled(self, retry_after: float | None) -> None:
        """The provider said 429: halve the limit once per window and pause new calls."""
        with self._lock:
            self.rate_limited += 1
            self._slow_start = False
            self._calls_since_cut += 1
            if self._calls_since_cut >= self.limit // 2:
                self.limit = max(1, self.limit // 2)
                self._calls_since_cut = 0
                self._growth = 0.0
            if retry_after:
                self._resume_at = max(self._resume_at, time.monotonic() + retry_after)

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
