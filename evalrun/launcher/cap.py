"""The run's cap on the processes of the graders an eval file brings (docs/performance.md,
"Process cap"): stream-mode workers and one-process-per-case runs together, whatever
``--workers`` is and however many such graders the eval has.

A case that needs a process when the cap is reached takes an idle worker of its own grader, or
has an idle worker of a grader holding more than its share killed to make room, or waits until
a process ends or a worker goes idle. A process counts from its start to its exit.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Protocol, TypeVar

#: a Python grader holds ~6 MB of its own (docs/performance.md, "Memory at width"): 64 of them
#: fit the 400 MB aim beside evalrun; a machine with more cores may hold more
PER_CORE = 8
AT_LEAST = 64

T = TypeVar("T")


def default_max_processes(cores: int | None = None) -> int:
    return max(AT_LEAST, PER_CORE * (cores if cores is not None else os.cpu_count() or 1))


class Idle(Protocol):
    """A worker standing idle in its pool, which the cap may end to make room."""

    async def kill(self) -> None: ...


class Holder(Protocol):
    """Whatever holds places under the cap: a pool, or the one-process-per-case runs."""

    @property
    def live(self) -> int: ...

    def give_up_idle(self) -> Idle | None: ...


class ProcessCap:
    """At most ``limit`` processes at once among its holders."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = max(1, limit if limit is not None else default_max_processes())
        self.live = 0
        #: the most processes alive at once (the run's summary and the tests read it)
        self.most = 0
        self._holders: list[Holder] = []
        self._waiting: set[asyncio.Future[None]] = set()

    def join(self, holder: Holder) -> None:
        self._holders.append(holder)

    async def take(self, holder: Holder, reuse: Callable[[], T | None]) -> T | None:
        """What ``reuse`` finds (an idle worker of the holder's own), else None once a place is
        taken for a new process, which must be given back with :meth:`release` when it ends."""
        while True:
            found = reuse()
            if found is not None:
                return found
            if self.live < self.limit:
                self.live += 1
                self.most = max(self.most, self.live)
                return None
            victim = self._victim(holder)
            if victim is not None:
                await victim.kill()  # its exit gives its place back
                continue
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.add(waiter)
            try:
                await waiter
            finally:
                self._waiting.discard(waiter)

    def _victim(self, holder: Holder) -> Idle | None:
        """An idle worker of the holder with the most processes, while ``holder`` has fewer than
        its share: a holder at its share waits for its own, so two graders do not take turns
        killing each other's workers."""
        active = {id(h) for h in self._holders if h.live} | {id(holder)}
        if holder.live >= max(1, self.limit // len(active)):
            return None
        for other in sorted(self._holders, key=lambda h: h.live, reverse=True):
            if other is not holder and (idle := other.give_up_idle()) is not None:
                return idle
        return None

    def release(self) -> None:
        self.live -= 1
        self.changed()

    def changed(self) -> None:
        """A place was given back or a worker went idle: every waiting case looks again."""
        for waiter in self._waiting:
            if not waiter.done():
                waiter.set_result(None)


class OneShot:
    """The graders that run one process per case: places under the cap, never an idle worker."""

    def __init__(self, cap: ProcessCap) -> None:
        self.cap = cap
        self.live = 0
        cap.join(self)

    def give_up_idle(self) -> Idle | None:
        return None

    @asynccontextmanager
    async def place(self) -> AsyncIterator[None]:
        """Held while the process runs, until it has exited."""
        await self.cap.take(self, lambda: None)
        self.live += 1
        try:
            yield
        finally:
            self.live -= 1
            self.cap.release()
