"""The run's targets: each named target built once (so its connection pool and concurrency
limit are shared by the runner and the proxy), with the run's stores, and closed at the end."""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalrun.targets.base import CompletionRequest, CompletionResponse, Target, TargetError
from evalrun.targets.config import ConfigError, TargetConfig, TargetsFile, missing_extra
from evalrun.targets.managed import AsyncLimit, ManagedTarget
from evalrun.targets.panel import PanelTarget

#: kind -> "module:Class"; imported only when a target of that kind is used.
PROVIDERS: dict[str, str] = {
    "mock": "evalrun.targets.providers.mock:MockTarget",
    "openai": "evalrun.targets.providers.openai:OpenAITarget",
    "azure": "evalrun.targets.providers.azure:AzureOpenAITarget",
    "anthropic": "evalrun.targets.providers.anthropic:AnthropicTarget",
    "gemini": "evalrun.targets.providers.gemini:GeminiTarget",
    "cli": "evalrun.targets.providers.cli:CliTarget",
    "local": "evalrun.targets.local.target:LocalTarget",
    "litellm": "evalrun.targets.providers.litellm:LiteLLMTarget",
}


def build_provider(config: TargetConfig, env: Mapping[str, str] | None = None) -> Target:
    """Instantiate the provider class for ``config.kind``; providers take (config, api_key)."""
    spec = PROVIDERS.get(config.kind)
    if spec is None:
        raise ConfigError(f"target '{config.name}': unknown kind '{config.kind}'")
    missing = missing_extra(config)
    if missing:
        raise ConfigError(missing)
    module_name, class_name = spec.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if config.kind in ("mock", "local", "cli"):
        return cls(config)
    return cls(config, config.resolve_secret(env))


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
    ) -> None:
        self.file = targets
        self._stores = stores or StoreOptions()
        self._env = os.environ if env is None else env
        self._built: dict[str, ManagedTarget | PanelTarget] = {}
        #: builds the concurrency limit of a target (a Ray run holds one for the cluster)
        self.limit_for: Callable[[TargetConfig], AsyncLimit] | None = None
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

    def get(self, name: str) -> ManagedTarget | PanelTarget:
        """The one target for ``name`` (locked: the proxy may ask from its own thread). A panel
        is built from its members' own managed targets (docs/judges.md)."""
        with self._lock:
            if name not in self._built:
                config = self.file.get(name)
                if config.kind == "panel":
                    members = [self.get(m) for m in config.extra("members") or []]
                    self._built[name] = PanelTarget(config, members)
                    return self._built[name]
                provider = (
                    _ReplayOnly(config)
                    if self._replay is not None
                    else build_provider(config, self._env)
                )
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


class _ReplayOnly:
    """Stands in for a provider during --replay: it must never be called. Tool requests are
    let through to the cassette, which holds only what a tool-capable target answered."""

    supports_tools = True

    def __init__(self, config: TargetConfig) -> None:
        self.name = config.name

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        raise TargetError(f"replay: target '{self.name}' may not make live calls", status=502)

    async def aclose(self) -> None:
        return None
