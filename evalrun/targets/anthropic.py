"""The ``anthropic`` target: Anthropic's Messages API."""

from __future__ import annotations

from typing import Any

from evalrun.targets.base import CompletionRequest, CompletionResponse, TargetError, TokenUsage
from evalrun.targets.config import ConfigError, TargetConfig
from evalrun.targets.http import HttpTarget, iter_dicts, split_turns

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024


def messages_body(model: str, request: CompletionRequest) -> dict[str, Any]:
    """``max_tokens`` is required by this API; the system prompt is its own field."""
    system, turns = split_turns(request)
    if not turns:
        raise TargetError("the request has no user message", status=400)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
        "messages": [{"role": role, "content": text} for role, text in turns],
    }
    if system:
        body["system"] = system
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def parse_message(data: dict[str, Any]) -> CompletionResponse:
    blocks = data["content"]
    if not isinstance(blocks, list):
        raise TypeError("content is not a list")
    text = "".join(
        str(block.get("text") or "") for block in iter_dicts(blocks) if block.get("type") == "text"
    )
    usage = data.get("usage") or {}
    return CompletionResponse(
        text=text,
        usage=TokenUsage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)),
        finish_reason=data.get("stop_reason"),
        model=data.get("model"),
    )


class AnthropicTarget(HttpTarget):
    kind = "anthropic"

    def __init__(self, config: TargetConfig, api_key: str | None) -> None:
        super().__init__(config, api_key)
        self.require_key()
        if not config.model:
            raise ConfigError(f"target '{config.name}' (anthropic) needs 'model'")
        self.model = config.model
        self.base_url = (config.base_url or DEFAULT_BASE_URL).rstrip("/")

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        try:
            body = messages_body(self.model, request)
        except TargetError as exc:
            raise self.error(exc.message, status=exc.status) from None
        headers = {
            "x-api-key": self.require_key(),
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
        }
        data = await self.post_json(f"{self.base_url}/v1/messages", body, headers=headers)
        return self.parse(data, parse_message)
