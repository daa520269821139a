"""The ``openai`` target: OpenAI's Chat Completions API and every server that copies it
(Ollama, vLLM, LM Studio, llama.cpp) through ``base_url``.

The body/response mapping here is shared with the ``azure`` target.
"""

from __future__ import annotations

from typing import Any

from evalrun.targets.base import CompletionRequest, CompletionResponse, TokenUsage
from evalrun.targets.config import ConfigError, TargetConfig
from evalrun.targets.http import HttpTarget, text_of

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_ROLES = ("system", "developer", "user", "assistant")


def chat_messages(request: CompletionRequest) -> list[dict[str, str]]:
    """System prompt first, then the conversation as plain role/content pairs (extra keys such
    as evalrun's tool-call records are not OpenAI message fields, so they are dropped)."""
    messages = (
        [{"role": "system", "content": request.system_prompt}] if request.system_prompt else []
    )
    for message in request.messages:
        role = str(message.get("role") or "user")
        messages.append(
            {"role": role if role in _ROLES else "user", "content": text_of(message.get("content"))}
        )
    return messages


def chat_body(
    config: TargetConfig, request: CompletionRequest, *, model: str | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model} if model else {}
    body["messages"] = chat_messages(request)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body[config.extra("max_tokens_field") or "max_tokens"] = request.max_tokens
    if request.response_format is not None:
        body["response_format"] = request.response_format
    return body


def parse_chat_completion(data: dict[str, Any]) -> CompletionResponse:
    choice = data["choices"][0]
    message = choice["message"]
    content = message.get("content")
    text = text_of(content) if content is not None else str(message.get("refusal") or "")
    usage = data.get("usage") or {}
    return CompletionResponse(
        text=text,
        usage=TokenUsage(
            int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        ),
        finish_reason=choice.get("finish_reason"),
        model=data.get("model"),
    )


class OpenAITarget(HttpTarget):
    kind = "openai"

    def __init__(self, config: TargetConfig, api_key: str | None) -> None:
        super().__init__(config, api_key)
        if not config.model:
            raise ConfigError(f"target '{config.name}' (openai) needs 'model'")
        self.base_url = (config.base_url or DEFAULT_BASE_URL).rstrip("/")

    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def headers(self) -> dict[str, str]:
        """Bearer auth, or none at all for keyless local servers."""
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def params(self) -> dict[str, str] | None:
        return None

    def body(self, request: CompletionRequest) -> dict[str, Any]:
        return chat_body(self.config, request, model=self.config.model)

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        data = await self.post_json(
            self.url(), self.body(request), headers=self.headers(), params=self.params()
        )
        return self.parse(data, parse_chat_completion)
