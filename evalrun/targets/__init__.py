"""Targets: the providers that answer cases and judge calls, behind one interface.

The core (interface, managed wrapper, limit, pool, stores) lives here; each provider is a
plug-in under ``providers/`` and the offline embedding judge is ``local/``
(docs/architecture.md). Other stages import from this module only.
"""

from __future__ import annotations

from pathlib import Path

# registers every kind in the registry's table (which cannot import it: it imports the registry)
import evalrun.targets.providers  # noqa: F401
from evalrun.errors import ConfigError  # raised by the targets; defined with the others
from evalrun.targets.base import (
    OPTION_FIELDS,
    AgentPlace,
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
from evalrun.targets.pool import LimitFactory, StoreOptions, TargetPool, build_provider
from evalrun.targets.registry import ToolsUnsupported, kind_of, kinds, missing_extra
from evalrun.targets.toolloop import ToolLoopError, run_tool_loop
from evalrun.targets.toolmocks import MockedResult, MockTool, Toolbox

__all__ = [
    "AgentPlace",
    "CompletionRequest",
    "CompletionResponse",
    "ConfigError",
    "LimitFactory",
    "ManagedTarget",
    "MockTool",
    "MockedResult",
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
    "ToolLoopError",
    "Toolbox",
    "ToolsUnsupported",
    "UnsupportedByTarget",
    "StoreOptions",
    "build_provider",
    "clear_response_cache",
    "kind_of",
    "kinds",
    "find_targets_file",
    "install_hint",
    "load_targets",
    "locate_targets_file",
    "missing_extra",
    "run_tool_loop",
]


def clear_response_cache(directory: Path) -> list[Path]:
    """Delete the response cache kept in ``directory`` (``evalrun cache clear``); the files
    removed. Imported on use: a run that does not clear pays nothing for it."""
    from evalrun.targets.stores.cache import clear

    return clear(directory)
