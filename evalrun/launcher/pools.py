"""The long-lived grader processes of one run: a stream-mode pool per grader an eval file brings
(``serve.py``), and host pools shared by evalrun's built-in graders (``hosts.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from evalrun.launcher.cap import OneShot, ProcessCap
from evalrun.launcher.hosts import HostPool, host_argv
from evalrun.launcher.sandbox import ProxyRoute, Sandbox
from evalrun.launcher.serve import ServePool


class GraderPools:
    """The stream-mode pools of one run, one per grader (argv, folder, environment), and the
    host pools of its built-in graders, one per folder, environment and sandbox. The processes
    of the graders an eval file brings, served or one per case, share one cap (``cap.py``);
    the hosts have their own (``hosts.host_count``)."""

    def __init__(self, size: int, max_processes: int | None = None) -> None:
        self.size = max(1, size)
        self.cap = ProcessCap(max_processes)
        self.one_shot = OneShot(self.cap)
        self._pools: dict[tuple[Any, ...], ServePool] = {}
        self._hosts: dict[tuple[Any, ...], HostPool] = {}

    def pool(
        self,
        argv: list[str],
        cwd: Path,
        allow: list[str],
        env: Callable[[], Mapping[str, str]],
        *,
        sandbox: Sandbox,
        route: ProxyRoute | None,
    ) -> ServePool:
        """The pool of this grader; ``env`` makes its workers' environment on first use. Each
        worker runs in a sandbox of its own (a ``strict`` one: its own private temp folder,
        shared by the cases that worker serves)."""
        key = (tuple(argv), str(cwd), tuple(allow), sandbox.level, route)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = ServePool(
                lambda: sandbox.wrap(argv, cwd, route),
                cwd,
                env(),
                self.size,
                sandbox.exit_status,
                self.cap,
            )
        return pool

    def hosts(
        self,
        cwd: Path,
        allow: list[str],
        env: Callable[[], Mapping[str, str]],
        *,
        sandbox: Sandbox,
        route: ProxyRoute | None,
    ) -> HostPool:
        """The hosts that serve every built-in grader run with this folder, environment and
        sandbox; each host runs in one sandbox of its own, for all the cases it grades."""
        key = (str(cwd), tuple(allow), sandbox.level, route)
        pool = self._hosts.get(key)
        if pool is None:
            pool = self._hosts[key] = HostPool(
                lambda slots: sandbox.wrap(host_argv(slots), cwd, route),
                cwd,
                env(),
                self.size,
                sandbox.exit_status,
            )
        return pool

    @property
    def workers_started(self) -> int:
        return sum(p.started for p in self._pools.values()) + sum(
            p.started for p in self._hosts.values()
        )

    async def close(self) -> None:
        pools: list[ServePool | HostPool] = [*self._pools.values(), *self._hosts.values()]
        self._pools, self._hosts = {}, {}
        await asyncio.gather(*(p.close() for p in pools), return_exceptions=True)
