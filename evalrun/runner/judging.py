"""The judge proxy of a run (or of ``evalrun proxy``), built in one place with everything it
must redact: every key the configured targets could use (docs/security.md)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from evalrun.targets import ConfigError, TargetPool
from proxy import JudgeProxy


def key_values(pool: TargetPool) -> list[str]:
    """The key of each configured target that has one set, so call records never show it."""
    values = []
    for config in pool.file.targets:
        with contextlib.suppress(ConfigError):
            if value := config.resolve_secret():
                values.append(value)
    return values


def judge_proxy(pool: TargetPool, *, unix_socket: Path | None = None) -> JudgeProxy:
    """Not started yet; ``unix_socket``: also listen there, for ``strict`` graders."""
    return JudgeProxy(pool.get, pool.names, secrets=key_values(pool), unix_socket=unix_socket)
