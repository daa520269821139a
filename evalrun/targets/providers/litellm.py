"""The ``litellm`` target: every provider litellm knows (Bedrock, Vertex AI, Mistral, Cohere,
Groq, ...) under litellm's own model names and credentials, through the optional dependency
``[litellm]`` (docs/targets.md).

The request goes in OpenAI's shape (litellm's own), and the answer comes back in it, so the
OpenAI target's message building and response reading are reused. evalrun keeps the retries:
litellm's are switched off.
"""

from __future__ import annotations

import os
from typing import Any

from evalrun.errors import ConfigError
from evalrun.targets.base import CompletionRequest, CompletionResponse, TargetError, TargetTimeout
from evalrun.targets.config import TargetConfig
from evalrun.targets.providers.http import REDACTED
from evalrun.targets.providers.openai import chat_messages, parse_chat_completion
from evalrun.targets.registry import missing_extra

#: litellm exception classes that are worth another attempt
_RETRYABLE = (
    "RateLimitError",
    "APIConnectionError",
    "InternalServerError",
    "ServiceUnavailableError",
)


def _litellm() -> Any:
    """Import litellm without its start-up download of a price list (a run makes no network
    calls it was not asked for)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


class LiteLLMTarget:
    kind = "litellm"
    supports_tools = True

    def __init__(self, config: TargetConfig, api_key: str | None) -> None:
        if not config.model:
            raise ConfigError(
                f"target '{config.name}' (litellm) needs 'model', in litellm's naming "
                "(e.g. bedrock/anthropic.claude-3-5-haiku-20241022-v1:0)"
            )
        missing = missing_extra(config)
        if missing:
            raise ConfigError(missing)
        params = config.extra("litellm_params") or {}
        if not isinstance(params, dict):
            raise ConfigError(
                f"target '{config.name}' (litellm): 'litellm_params' must be a mapping"
            )
        self.name = config.name
        self.config = config
        self._api_key = api_key
        self._params: dict[str, Any] = dict(params)
        self._litellm = _litellm()

    def redact(self, text: str) -> str:
        if self._api_key and len(self._api_key) >= 4:
            text = text.replace(self._api_key, REDACTED)
        return text

    def arguments(self, request: CompletionRequest) -> dict[str, Any]:
        """``litellm.acompletion`` keyword arguments: OpenAI's fields, then the target's own
        ``litellm_params`` (region, project, ``drop_params``, ...)."""
        arguments: dict[str, Any] = {
            **request.options,
            "model": self.config.model,
            "messages": chat_messages(request),
            "timeout": self.config.timeout,
            "num_retries": 0,
            "max_retries": 0,
        }
        fields = {
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "response_format": request.response_format,
            "tools": request.tools,
            "tool_choice": request.tool_choice,
            "parallel_tool_calls": request.parallel_tool_calls,
            "api_base": self.config.base_url,
            "api_key": self._api_key,
        }
        arguments.update({k: v for k, v in fields.items() if v is not None})
        arguments.update(self._params)
        return arguments

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        try:
            response = await self._litellm.acompletion(**self.arguments(request))
        except Exception as exc:
            raise self._error(exc) from None
        data = response.model_dump() if hasattr(response, "model_dump") else dict(response)
        try:
            return parse_chat_completion(data)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise TargetError(
                f"litellm target '{self.name}': unexpected response shape ({exc})",
                retryable=True,
                target=self.name,
            ) from None

    def _error(self, exc: Exception) -> TargetError:
        status = getattr(exc, "status_code", None)
        status = status if isinstance(status, int) else None
        kind = type(exc).__name__
        message = self.redact(f"litellm target '{self.name}': {kind}: {exc}")[:1000]
        if kind == "Timeout":
            return TargetTimeout(message, status=status, target=self.name)
        retryable = kind in _RETRYABLE or status in (408, 429) or (status or 0) >= 500
        return TargetError(message, status=status, retryable=retryable, target=self.name)

    async def aclose(self) -> None:
        return None
