"""A concurrency limit that holds across event loops and threads.

``asyncio.Semaphore`` binds to one loop. A target is shared by the runner and the judge proxy,
which may serve from its own thread and loop, and ``max_concurrency`` must hold for both.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from types import TracebackType


class ConcurrencyLimit:
    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._active = 0
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    @property
    def active(self) -> int:
        return self._active

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._active < self.limit and not self._waiters:
                self._active += 1
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

    def release(self) -> None:
        """Give the slot to the oldest waiter (on its own loop), or free it."""
        with self._lock:
            while self._waiters:
                loop, waiter = self._waiters.popleft()
                if loop.is_closed():
                    continue
                loop.call_soon_threadsafe(self._hand_over, waiter)
                return
            self._active -= 1

    def _hand_over(self, waiter: asyncio.Future[None]) -> None:
        if waiter.done():
            self.release()
        else:
            waiter.set_result(None)

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
