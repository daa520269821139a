"""The ``anthropic`` target: Anthropic's Messages API, as the current ``anthropic`` SDK speaks
it (docs/targets.md): bearer auth, a configurable ``anthropic-version``, no ``temperature``,
OpenAI tools translated to ``tool_use``/``tool_result`` blocks, ``json_schema`` response
formats sent as ``output_config.format``."""

from __future__ import annotations

from typing import Any

from evalrun.errors import ConfigError
from evalrun.targets.base import (
    CompletionRequest,
    CompletionResponse,
    TargetError,
    TokenUsage,
    is_tool_result,
)
from evalrun.targets.config import TargetConfig
from evalrun.targets.providers.http import HttpTarget, iter_dicts, text_of
from evalrun.targets.providers.tools import (
    Block,
    call_arguments,
    call_name,
    function_tools,
    split_blocks,
    tool_call,
    tool_choice_of,
)

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_API_VERSION = "2026-10-21"
DEFAULT_MAX_TOKENS = 1024
AUTH_SCHEMES = ("bearer", "x-api-key")


def _blocks(message: dict[str, Any]) -> tuple[str, list[Block]]:
    role = message.get("role")
    text = text_of(message.get("content"))
    if is_tool_result(message):
        result: Block = {"type": "tool_result", "tool_use_id": str(message["tool_call_id"])}
        if message.get("is_error") is True:  # a failed tool (docs/targets.md, "Tools")
            result["is_error"] = True
        return "user", [{**result, "content": text}]
    calls = [
        {"type": "tool_use", "id": call.get("id"), "name": call_name(call)}
        | {"input": call_arguments(call)}
        for call in iter_dicts(message.get("tool_calls"))
    ]
    if role == "assistant":
        return "assistant", ([{"type": "text", "text": text}] if text or not calls else []) + calls
    return "user", [{"type": "text", "text": text}]


def _content(blocks: list[Block]) -> str | list[Block]:
    """Text-only turns as one string (what the SDK sends for a plain message)."""
    if all(block["type"] == "text" for block in blocks):
        return "\n\n".join(block["text"] for block in blocks)
    return blocks


def _tool_fields(request: CompletionRequest) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    tools = function_tools(request)
    if tools:
        fields["tools"] = [
            {"name": t.name, "input_schema": t.parameters}
            | ({"description": t.description} if t.description else {})
            for t in tools
        ]
    mode, forced = tool_choice_of(request)
    choice: dict[str, Any] | None = None
    if forced is not None:
        choice = {"type": "tool", "name": forced}
    elif mode is not None:
        choice = {"type": {"auto": "auto", "none": "none", "required": "any"}[mode]}
    if request.parallel_tool_calls is False and tools:
        choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
    if choice is not None:
        fields["tool_choice"] = choice
    return fields


def messages_body(model: str, request: CompletionRequest) -> dict[str, Any]:
    """``max_tokens`` is required by this API; the system prompt is its own field."""
    system, turns = split_blocks(request, _blocks)
    if not turns:
        raise TargetError("the request has no user message", status=400)
    body: dict[str, Any] = {
        "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
        "messages": [{"role": role, "content": _content(blocks)} for role, blocks in turns],
        "model": model,
    }
    if system:
        body["system"] = system
    body.update(_tool_fields(request))
    response_format = request.response_format or {}
    schema = (response_format.get("json_schema") or {}).get("schema")
    if response_format.get("type") == "json_schema" and isinstance(schema, dict):
        body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
    stop = request.options.get("stop")
    if stop:
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    return body


def parse_message(data: dict[str, Any]) -> CompletionResponse:
    blocks = data["content"]
    if not isinstance(blocks, list):
        raise TypeError("content is not a list")
    text = "".join(
        str(block.get("text") or "") for block in iter_dicts(blocks) if block.get("type") == "text"
    )
    calls = [
        tool_call(str(block["name"]), block.get("input") or {}, block.get("id"))
        for block in iter_dicts(blocks)
        if block.get("type") == "tool_use"
    ]
    stop = data.get("stop_reason")
    refusal = None
    if stop == "refusal":
        refusal = "the model declined to answer (stop_reason=refusal)"
    elif stop == "max_tokens" and not text and not calls:
        refusal = "the answer was cut off at max_tokens before any text (stop_reason=max_tokens)"
    usage = data.get("usage") or {}
    return CompletionResponse(
        text=text,
        usage=TokenUsage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)),
        finish_reason=stop,
        refusal=refusal,
        tool_calls=calls or None,
        model=data.get("model"),
    )


class AnthropicTarget(HttpTarget):
    kind = "anthropic"
    default_base_url = DEFAULT_BASE_URL

    def __init__(self, config: TargetConfig, api_key: str | None) -> None:
        super().__init__(config, api_key)
        self.require_key()
        self.model = self.require_model()
        self.api_version = str(config.extra("api_version") or DEFAULT_API_VERSION)
        self.auth_scheme = str(config.extra("auth_scheme") or "bearer")
        if self.auth_scheme not in AUTH_SCHEMES:
            raise ConfigError(
                f"target '{config.name}' (anthropic): auth_scheme must be one of "
                f"{', '.join(AUTH_SCHEMES)}"
            )

    def headers(self) -> dict[str, str]:
        key = self.require_key()
        auth = {"Authorization": f"Bearer {key}"} if self.auth_scheme == "bearer" else {}
        return {**(auth or {"x-api-key": key}), "anthropic-version": self.api_version}

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        body = self.translate(lambda: messages_body(self.model, request))
        data = await self.post_json(f"{self.base_url}/v1/messages", body, headers=self.headers())
        return self.parse(data, parse_message)
