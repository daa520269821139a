"""The ``openai`` target: OpenAI's Chat Completions API and every server that copies it
(Ollama, vLLM, LM Studio, llama.cpp) through ``base_url``.

The body/response mapping here is shared with the ``azure`` target.
"""

from __future__ import annotations

from typing import Any

from evalrun.targets.base import (
    CompletionRequest,
    CompletionResponse,
    TokenUsage,
    is_tool_result,
)
from evalrun.targets.config import TargetConfig
from evalrun.targets.providers.http import HttpTarget, text_of

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_ROLES = ("system", "developer", "user", "assistant", "tool")
#: message keys OpenAI knows besides role and content; anything else (evalrun's own records)
#: is not sent
_MESSAGE_KEYS = ("name", "tool_calls", "tool_call_id", "refusal")


def chat_messages(request: CompletionRequest) -> list[dict[str, Any]]:
    """System prompt first, then the conversation. Tool turns, tool calls and content parts
    pass unchanged; unknown roles, and ``tool`` turns that answer no call id, become ``user``."""
    messages: list[dict[str, Any]] = (
        [{"role": "system", "content": request.system_prompt}] if request.system_prompt else []
    )
    for message in request.messages:
        role = str(message.get("role") or "user")
        content = message.get("content")
        if not isinstance(content, list) and not (content is None and message.get("tool_calls")):
            content = text_of(content)
        if role not in _ROLES or (role == "tool" and not is_tool_result(message)):
            role = "user"
        out: dict[str, Any] = {"role": role, "content": content}
        out.update({k: message[k] for k in _MESSAGE_KEYS if message.get(k) is not None})
        messages.append(out)
    return messages


def chat_body(
    config: TargetConfig, request: CompletionRequest, *, model: str | None, max_tokens_field: str
) -> dict[str, Any]:
    """The Chat Completions body; ``options`` (other OpenAI fields a client sent) are added
    without overriding the fields evalrun sets itself."""
    body: dict[str, Any] = {"model": model} if model else {}
    body["messages"] = chat_messages(request)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body[config.extra("max_tokens_field") or max_tokens_field] = request.max_tokens
    if request.response_format is not None:
        body["response_format"] = request.response_format
    if request.tools is not None:
        body["tools"] = request.tools
    if request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    if request.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = request.parallel_tool_calls
    for key, value in request.options.items():
        body.setdefault(key, value)
    return body


def parse_chat_completion(data: dict[str, Any]) -> CompletionResponse:
    choice = data["choices"][0]
    message = choice["message"]
    finish = choice.get("finish_reason")
    text = text_of(message.get("content"))
    tool_calls = message.get("tool_calls") or None
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise TypeError("tool_calls is not a list")
    refusal = message.get("refusal") or None
    if refusal is None and finish == "content_filter":
        refusal = "the provider's content filter stopped the answer (finish_reason=content_filter)"
    elif refusal is None and finish == "length" and not text and not tool_calls:
        refusal = "the answer was cut off at the token limit before any text (finish_reason=length)"
    usage = data.get("usage") or {}
    logprobs = choice.get("logprobs")
    return CompletionResponse(
        text=text,
        usage=TokenUsage(
            int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        ),
        finish_reason=finish,
        refusal=str(refusal) if refusal is not None else None,
        tool_calls=tool_calls,
        logprobs=logprobs if isinstance(logprobs, dict) else None,
        model=data.get("model"),
    )


class ChatCompletionsTarget(HttpTarget):
    """What the ``openai`` and ``azure`` targets share: the Chat Completions body and response.
    A subclass sets ``model_name`` and says where the request goes."""

    #: the ``model`` field of the body (Azure: the deployment)
    model_name: str | None

    def url(self) -> str:
        raise NotImplementedError

    def headers(self) -> dict[str, str]:
        raise NotImplementedError

    def params(self) -> dict[str, str] | None:
        return None

    def body(self, request: CompletionRequest) -> dict[str, Any]:
        """The token limit goes in ``max_completion_tokens`` (the current API's name) unless
        ``max_tokens_field`` names another, for servers that know only ``max_tokens``."""
        return chat_body(
            self.config, request, model=self.model_name, max_tokens_field="max_completion_tokens"
        )

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        data = await self.post_json(
            self.url(), self.body(request), headers=self.headers(), params=self.params()
        )
        return self.parse(data, parse_chat_completion)


class OpenAITarget(ChatCompletionsTarget):
    kind = "openai"
    default_base_url = DEFAULT_BASE_URL

    def __init__(self, config: TargetConfig, api_key: str | None) -> None:
        super().__init__(config, api_key)
        self.model_name = self.require_model()

    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def headers(self) -> dict[str, str]:
        """Bearer auth, or none at all for keyless local servers."""
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
