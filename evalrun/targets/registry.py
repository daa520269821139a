"""The one table of target kinds: ``@provider("openai")`` registers how a kind is built.

The table is filled by ``evalrun/targets/providers/__init__.py``, whose loaders import their
provider module only when a target of that kind is built, so listing or validating kinds
imports no SDK (docs/architecture.md, "Adding a provider"). Config validation, the pool, the
``targets`` command and the docs' list of kinds all read this table.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalrun.errors import ConfigError
from evalrun.targets.base import Target, TargetError
from evalrun.targets.extras import install_hint

if TYPE_CHECKING:
    from evalrun.targets.config import TargetConfig


@dataclass(frozen=True)
class ProviderContext:
    """What every factory builds a target from: its config, the environment its key is read
    from, and the pool's other targets (a panel's members)."""

    config: TargetConfig
    env: Mapping[str, str]
    target: Callable[[str], Target]

    @property
    def api_key(self) -> str | None:
        return self.config.resolve_secret(self.env)


#: the one constructor signature of every provider class: (config, api_key)
ProviderClass = Callable[["TargetConfig", "str | None"], Target]
Factory = Callable[[ProviderContext], Target]


@dataclass(frozen=True)
class Kind:
    """One target kind and what the core must know of it without importing it."""

    name: str
    build: Factory
    #: the pip extra it needs and the modules that extra installs
    extra: str | None = None
    modules: tuple[str, ...] = ()
    #: answers depend only on the request, so the response cache is on by default
    cached: bool = True
    #: wrapped in a ManagedTarget (limit, retries, stores); a panel's members already are
    managed: bool = True
    #: answers typed tasks only (docs/proxy.md), not free-text prompts
    typed_only: bool = False
    #: can call tools (its provider class says ``supports_tools``; a test keeps both equal)
    tools: bool = False
    #: imports and returns the provider class (None for a composite kind)
    load: Callable[[], ProviderClass] | None = None
    #: its own keys in targets.yaml and their types; any other key is refused (docs/targets.md)
    keys: Mapping[str, Any] = field(default_factory=dict)
    #: keys of the common model a target of this kind must set
    requires: tuple[str, ...] = ()

    def missing_extra(self, config: TargetConfig) -> str | None:
        """Why ``config`` cannot be built here (its extra is not installed), or None."""
        missing = [m for m in self.modules if importlib.util.find_spec(m) is None]
        if self.extra is None or not missing:
            return None
        return (
            f"target '{config.name}' (kind {self.name}) needs the [{self.extra}] extra, which is "
            f"not installed (missing: {', '.join(missing)}): {install_hint(self.extra)}"
        )


_KINDS: dict[str, Kind] = {}


def provider(
    name: str,
    *,
    extra: str | None = None,
    modules: tuple[str, ...] = (),
    cached: bool = True,
    typed_only: bool = False,
    tools: bool = False,
    keys: Mapping[str, Any] | None = None,
    requires: tuple[str, ...] = (),
) -> Callable[[Callable[[], ProviderClass]], Callable[[], ProviderClass]]:
    """Register kind ``name``: the decorated function imports and returns its provider class,
    which is built as ``cls(config, api_key)`` and wrapped in a ManagedTarget by the pool."""

    def register(load: Callable[[], ProviderClass]) -> Callable[[], ProviderClass]:
        def build(context: ProviderContext) -> Target:
            return load()(context.config, context.api_key)

        _add(
            Kind(
                name,
                build,
                extra,
                modules,
                cached,
                typed_only=typed_only,
                tools=tools,
                load=load,
                keys=keys or {},
                requires=requires,
            )
        )
        return load

    return register


def composite(name: str, keys: Mapping[str, Any] | None = None) -> Callable[[Factory], Factory]:
    """Register kind ``name`` as built from other targets of the pool (a judge panel): the
    factory gets the context, and what it returns is not wrapped again."""

    def register(factory: Factory) -> Factory:
        _add(Kind(name, factory, managed=False, keys=keys or {}))
        return factory

    return register


def _add(kind: Kind) -> None:
    if kind.name in _KINDS:
        raise ValueError(f"target kind '{kind.name}' is registered twice")
    _KINDS[kind.name] = kind


def kinds() -> dict[str, Kind]:
    """Every registered kind, by name, in registration order (``evalrun/targets/__init__.py``
    imports ``providers``, which fills the table, before anyone can call this)."""
    return _KINDS


def kind_of(config: TargetConfig) -> Kind:
    kind = kinds().get(config.kind)
    if kind is None:
        raise ConfigError(
            f"target '{config.name}' has unknown kind '{config.kind}' "
            f"(known kinds: {', '.join(kinds())})"
        )
    return kind


def tool_kinds() -> list[str]:
    return [name for name, kind in kinds().items() if kind.tools]


def missing_extra(config: TargetConfig) -> str | None:
    """Why this target cannot be built in this environment (a missing extra), or None."""
    kind = kinds().get(config.kind)
    return kind.missing_extra(config) if kind is not None else None


class ToolsUnsupported(TargetError):
    """The target cannot call tools (the proxy answers 400 before spending budget)."""

    def __init__(self, target: str, kind: str) -> None:
        *others, last = tool_kinds()
        super().__init__(
            f"target '{target}' ({kind}) cannot call tools; use an {', '.join(others)} or "
            f"{last} target for requests with tools",
            status=400,
            target=target,
        )
