"""A target's concurrency limit: adaptive, and not bound to one event loop.

A target is shared by the runner and the judge proxy; the proxy serves in the runner's event
loop (docs/architecture.md), so in a run every call waits on this limit from that one loop.
Unlike ``asyncio.Semaphore``, which binds to the first loop that waits on it, the limit keeps
its state under a thread lock and wakes each waiter on the waiter's own loop, so a target (whose
HTTP clients are kept per loop too) stays usable by a caller that drives it from several loops
or threads, one ``asyncio.run`` after another or at once.

The limit adapts to the provider's 429 *rate*, not to each 429 (docs/targets.md,
"Concurrency"): outcomes are counted in windows of at least ``WINDOW`` calls (and at least one
round trip); a window whose 429 rate is significantly above the rate seen at lower concurrency
(the reference) means load and cuts the limit; a window within that band grows it (doubling
until the first load, then one per window). A cut is checked by the next window: if the rate
did not fall at the lower limit, the 429s were not load and the limit is restored. It never
exceeds ``ceiling``. Every change is recorded with its reason and the rates it saw.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Any

#: calls per window (at least; a window also spans the limit, about one round trip)
WINDOW = 32
#: how far above the reference a window's 429 rate may be before it counts as load: the larger
#: of this and ``Z`` standard errors of the difference of the two rates
MARGIN = 0.05
Z = 2.5
#: outcomes kept per level (older ones count half), so the rates follow the provider
LEVEL_CALLS = 256
#: decisions kept for the summary (the latest; the total is counted)
DECISIONS_KEPT = 100


@dataclass
class _Counts:
    calls: int = 0
    throttled: int = 0

    @property
    def rate(self) -> float:
        return self.throttled / self.calls if self.calls else 0.0

    def add(self, other: _Counts) -> None:
        self.calls += other.calls
        self.throttled += other.throttled


def _significantly_above(high: _Counts, low: _Counts) -> bool:
    """Whether ``high``'s 429 rate exceeds ``low``'s by more than noise explains (a one-sided
    test on the difference of two binomial rates, with a floor of ``MARGIN``)."""
    pooled = (high.throttled + low.throttled) / (high.calls + low.calls)
    spread = 1 / high.calls + (1 / low.calls if low.calls else 0.0)
    tolerance = max(MARGIN, Z * math.sqrt(pooled * (1 - pooled) * spread))
    return high.rate - low.rate > tolerance


class ConcurrencyLimit:
    def __init__(self, start: int, ceiling: int | None = None) -> None:
        self.ceiling = max(1, ceiling if ceiling is not None else start)
        self.limit = self.start = min(max(1, start), self.ceiling)
        self.peak_limit = self.low_limit = self.limit
        self.peak_active = 0
        self.rate_limited = 0
        self._slow_start = True
        self._window = _Counts()
        self._window_retry_after = 0.0
        #: outcomes per limit they were seen at: the rates at lower concurrency
        self._levels: dict[int, _Counts] = {}
        #: the limit before the last cut and the window that made it, until the next window
        #: says whether the cut lowered the 429 rate
        self._cut_from: tuple[int, _Counts] | None = None
        self._decisions: deque[dict[str, Any]] = deque(maxlen=DECISIONS_KEPT)
        self._decided = 0
        self._outcomes = 0
        self._resume_at = 0.0
        self._active = 0
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    @property
    def active(self) -> int:
        return self._active

    def stats(self) -> dict[str, Any]:
        """What the run summary records per target."""
        with self._lock:
            return {
                "concurrency_start": self.start,
                "concurrency_reached": self.peak_active,
                "concurrency_limit_peak": self.peak_limit,
                "concurrency_limit_low": self.low_limit,
                "concurrency_limit_end": self.limit,
                "max_concurrency": self.ceiling,
                "rate_limited": self.rate_limited,
                "concurrency_changes": self._decided,
                "concurrency_decisions": list(self._decisions),
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
        """A call went through."""
        with self._lock:
            self._count(throttled=False)

    def throttled(self, retry_after: float | None) -> None:
        """The provider said 429. The call itself waits out its Retry-After before its retry
        (evalrun/targets/managed.py); new calls wait only if this window's rate says load."""
        with self._lock:
            self.rate_limited += 1
            if retry_after:
                self._window_retry_after = max(self._window_retry_after, retry_after)
            self._count(throttled=True)

    def _count(self, *, throttled: bool) -> None:
        self._outcomes += 1
        self._window.calls += 1
        self._window.throttled += throttled
        if self._window.calls >= max(WINDOW, self.limit):
            window, retry_after = self._window, self._window_retry_after
            self._window, self._window_retry_after = _Counts(), 0.0
            self._decide(window, retry_after)

    def _decide(self, window: _Counts, retry_after: float) -> None:
        """One decision per window (called with the lock held)."""
        level = self.limit
        below = self._below(level)
        self._remember(level, window)
        if self._cut_from is not None:
            before, above = self._cut_from
            self._cut_from = None
            # did the cut bring the rate down to the rate at lower concurrency (load), or does
            # it stay where it was (noise)? Whichever it is nearer to.
            fell = abs(window.rate - below.rate) <= abs(window.rate - above.rate)
            if not _significantly_above(window, below):
                if fell:
                    self._slow_start = False
                    return
                reason = "not load: the 429 rate did not fall at lower concurrency"
                self._change(before, reason, window, below)
                return
        loaded = _significantly_above(window, below)
        if loaded and level > 1:
            excess = window.rate - below.rate
            cut = min(level - 1, max(level // 2, math.floor(level * (1 - excess)), 1))
            self._cut_from = (level, window)
            reason = "load: the 429 rate rose above the rate at lower concurrency"
            if not below.calls:
                reason = "load or noise: 429s with no lower concurrency to compare; stepping down"
            self._change(cut, reason, window, below)
            if retry_after:
                self._resume_at = max(self._resume_at, time.monotonic() + retry_after)
        elif not loaded and level < self.ceiling:
            grown = level * 2 if self._slow_start else level + 1
            self._change(
                min(grown, self.ceiling), "grow: the 429 rate is within noise", window, below
            )

    def _below(self, level: int) -> _Counts:
        """The reference: outcomes seen at lower concurrency (from half this level up)."""
        pooled = _Counts()
        for seen, counts in self._levels.items():
            if level / 2 <= seen < level:
                pooled.add(counts)
        return pooled

    def _remember(self, level: int, window: _Counts) -> None:
        counts = self._levels.setdefault(level, _Counts())
        counts.add(window)
        if counts.calls > LEVEL_CALLS:  # follow a provider whose behaviour changes
            counts.calls //= 2
            counts.throttled //= 2

    def _change(self, limit: int, reason: str, window: _Counts, below: _Counts) -> None:
        self._decided += 1
        self._decisions.append(
            {
                "call": self._outcomes,
                "from": self.limit,
                "to": limit,
                "reason": reason,
                "rate_429": round(window.rate, 4),
                "reference_429": round(below.rate, 4) if below.calls else None,
            }
        )
        self.limit = limit
        self.peak_limit = max(self.peak_limit, limit)
        self.low_limit = min(self.low_limit, limit)
        self._wake()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
