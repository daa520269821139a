"""The run's targets: each named target built once (so its connection pool and concurrency
limit are shared by the runner and the proxy), with the run's stores, and closed at the end."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalrun.errors import ConfigError
from evalrun.targets.base import Target
from evalrun.targets.config import TargetConfig, TargetsFile
from evalrun.targets.managed import AsyncLimit, ManagedTarget
from evalrun.targets.registry import ProviderContext, kind_of, missing_extra

#: Builds a target's concurrency limit; a Ray worker's holds the limit for the whole cluster.
LimitFactory = Callable[[TargetConfig], AsyncLimit | None]


def build_provider(
    config: TargetConfig,
    env: Mapping[str, str] | None = None,
    target: Callable[[str], Target] | None = None,
) -> Target:
    """The provider for ``config``, built by its kind's factory (evalrun/targets/registry.py);
    ``target`` resolves other targets by name (a panel's members)."""
    kind = kind_of(config)
    missing = kind.missing_extra(config)
    if missing:
        raise ConfigError(missing)
    return kind.build(ProviderContext(config, os.environ if env is None else env, target or _alone))


def _alone(name: str) -> Target:
    raise ConfigError(f"target '{name}' can only be resolved through a TargetPool")


@dataclass
class StoreOptions:
    """Where responses are cached, recorded and replayed for this run."""

    cache_dir: Path | None = None
    record: Path | None = None
    replay: Path | None = None


class TargetPool:
    def __init__(
        self,
        targets: TargetsFile,
        stores: StoreOptions | None = None,
        env: Mapping[str, str] | None = None,
        *,
        limit_for: LimitFactory | None = None,
    ) -> None:
        self.file = targets
        self._stores = stores or StoreOptions()
        self._env = os.environ if env is None else env
        self._built: dict[str, Target] = {}
        #: builds the concurrency limit of a target (a Ray run holds one for the cluster)
        self.limit_for = limit_for
        self._lock = threading.RLock()
        self._cache = self._recorder = self._replay = None
        if self._stores.cache_dir is not None:
            from evalrun.targets.stores.cache import ResponseCache

            self._cache = ResponseCache(self._stores.cache_dir)
        if self._stores.record is not None:
            from evalrun.targets.stores.cassette import Cassette

            self._recorder = Cassette.for_recording(self._stores.record)
        if self._stores.replay is not None:
            from evalrun.targets.stores.cassette import Cassette

            self._replay = Cassette.for_replay(self._stores.replay)

    @property
    def names(self) -> list[str]:
        return self.file.names

    def check(self, names: list[str]) -> None:
        """Fail before the run if a target is unknown, its key is missing or its extra is
        not installed (a replayed run needs neither key nor extra)."""
        for name in names:
            config = self.file.get(name)
            if self._replay is None:
                config.resolve_secret(self._env)
                missing = missing_extra(config)
                if missing:
                    raise ConfigError(missing)

    def get(self, name: str) -> Target:
        """The one target for ``name``, built by its kind's factory and wrapped in a
        ``ManagedTarget`` unless the kind says otherwise (a panel's members already are).
        Locked, since the runner builds the judge target in a thread while graders start
        (evalrun/runner/case_grader.py); re-entrant, since a panel's factory asks for its members here."""
        with self._lock:
            if name not in self._built:
                config = self.file.get(name)
                kind = kind_of(config)
                if not kind.managed:
                    self._built[name] = build_provider(config, self._env, self.get)
                    return self._built[name]
                replaying = self._replay is not None
                provider = None if replaying else build_provider(config, self._env, self.get)
                self._built[name] = ManagedTarget(
                    provider,
                    config,
                    cache=self._cache,
                    recorder=self._recorder,
                    replay=self._replay,
                    limit=self.limit_for(config) if self.limit_for else None,
                )
            return self._built[name]

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per target used in this run: calls, concurrency reached, 429s seen. A judge panel has
        no limit of its own; its members are listed under their own names."""
        with self._lock:
            built = list(self._built.items())
        return {name: t.stats() for name, t in built if isinstance(t, ManagedTarget)}

    def secret_env_names(self) -> set[str]:
        names: set[str] = set()
        for target in self.file.targets:
            names.update(target.secret_env_names())
        return names

    async def aclose(self) -> None:
        for target in self._built.values():
            await target.aclose()
        self._built.clear()
        for store in (self._cache, self._recorder):
            close = getattr(store, "close", None)
            if close is not None:
                close()
