"""Targets: the providers that answer cases and judge calls, behind one interface.

The core (interface, managed wrapper, limit, pool, stores) lives here; each provider is a
plug-in under ``providers/`` and the offline embedding judge is ``local/``
(docs/architecture.md). Other stages import from this module only.
"""

from __future__ import annotations

# registers every kind in the registry's table (which cannot import it: it imports the registry)
import evalrun.targets.providers  # noqa: F401
from evalrun.targets.base import (
    OPTION_FIELDS,
    CompletionRequest,
    CompletionResponse,
    RefusedField,
    Target,
    TargetError,
    TargetTimeout,
    TokenUsage,
    UnsupportedByTarget,
)
from evalrun.targets.config import (
    ConfigError,
    TargetConfig,
    TargetNotConfigured,
    TargetsFile,
    TargetsLookup,
    find_targets_file,
    load_targets,
    locate_targets_file,
)
from evalrun.targets.extras import install_hint
from evalrun.targets.managed import ManagedTarget
from evalrun.targets.pool import StoreOptions, TargetPool, build_provider
from evalrun.targets.registry import ToolsUnsupported, kind_of, kinds, missing_extra

__all__ = [
    "CompletionRequest",
    "CompletionResponse",
    "ConfigError",
    "ManagedTarget",
    "OPTION_FIELDS",
    "RefusedField",
    "Target",
    "TargetConfig",
    "TargetError",
    "TargetPool",
    "TargetTimeout",
    "TargetsFile",
    "TargetsLookup",
    "TargetNotConfigured",
    "TokenUsage",
    "ToolsUnsupported",
    "UnsupportedByTarget",
    "StoreOptions",
    "build_provider",
    "kind_of",
    "kinds",
    "find_targets_file",
    "install_hint",
    "load_targets",
    "locate_targets_file",
    "missing_extra",
]
