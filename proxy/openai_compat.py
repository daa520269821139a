"""The proxy's OpenAI surface (docs/proxy.md, "OpenAI clients"): an OpenAI chat request as a
provider-neutral ``CompletionRequest``, and an answer back as a chat completion or a one-shot
event stream of chunks (the models of ``proxy.wire``; errors: ``proxy.replies``)."""

from __future__ import annotations

import secrets
import time
from typing import Any

from evalrun.targets import CompletionRequest, CompletionResponse
from proxy.replies import body
from proxy.wire import (
    ChatChoice,
    ChatChoiceMessage,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatMessage,
    ChatUsage,
    ChunkChoice,
    ChunkDelta,
    FinishReason,
    ModelEntry,
    ModelList,
)

#: provider finish reasons in OpenAI's words; anything else is ``stop``
FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "STOP": "stop",
    "length": "length",
    "max_tokens": "length",
    "MAX_TOKENS": "length",
    "tool_calls": "tool_calls",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "SAFETY": "content_filter",
}


def _content(message: ChatMessage) -> str | list[dict[str, Any]] | None:
    """Text parts joined into one string; content with other parts kept as parts."""
    content = message.content
    if content is None or isinstance(content, str):
        return content
    parts = [part.model_dump(exclude_none=True) for part in content]
    if all(part["type"] == "text" for part in parts):
        return "\n".join(str(part.get("text") or "") for part in parts)
    return parts


def _text(content: str | list[dict[str, Any]] | None) -> str:
    if isinstance(content, list):
        return "\n".join(str(part.get("text") or "") for part in content if part.get("text"))
    return content or ""


def completion_request(chat: ChatCompletionRequest) -> tuple[CompletionRequest, str]:
    """The neutral request and the question to record (the last user text). System and
    developer messages become the system prompt; tool turns and tool calls pass unchanged."""
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    for message in chat.messages:
        content = _content(message)
        if message.role in ("system", "developer"):
            system.append(_text(content))
            continue
        item: dict[str, Any] = {"role": message.role, "content": content}
        for key in ("name", "tool_calls", "tool_call_id"):
            value = getattr(message, key)
            if value is not None:
                item[key] = value
        if item["content"] is None and not message.tool_calls:
            item["content"] = ""
        messages.append(item)
    if not messages:
        messages.append({"role": "user", "content": system.pop()})
    question = next(
        (_text(m["content"]) for m in reversed(messages) if m["role"] == "user"),
        _text(messages[-1]["content"]),
    )
    request = CompletionRequest(
        messages=messages,
        system_prompt="\n\n".join(system) if system else None,
        temperature=chat.temperature,
        max_tokens=chat.max_completion_tokens or chat.max_tokens,
        response_format=chat.response_format,
        task=chat.task,
        tools=chat.tools,
        tool_choice=chat.tool_choice,
        parallel_tool_calls=chat.parallel_tool_calls,
        options=dict(chat.model_extra or {}),
    )
    return request, question


def finish_reason(response: CompletionResponse) -> FinishReason:
    """The provider's finish reason as stop, length, tool_calls or content_filter (also what
    the /invoke routes send as ``finishReason``); case is ignored."""
    if response.tool_calls:
        return "tool_calls"
    given = response.finish_reason or ""
    return FINISH_REASONS.get(given, FINISH_REASONS.get(given.lower(), "stop"))


def _usage(response: CompletionResponse) -> ChatUsage:
    usage = response.usage
    return ChatUsage(
        prompt_tokens=usage.input_tokens,
        completion_tokens=usage.output_tokens,
        total_tokens=usage.input_tokens + usage.output_tokens,
    )


def _completion_id() -> str:
    return f"chatcmpl-{secrets.token_hex(12)}"


def completion(name: str, response: CompletionResponse) -> ChatCompletionResponse:
    """A ``chat.completion``: content is null when the answer is only tool calls or only a
    refusal, as OpenAI's own."""
    message = ChatChoiceMessage(
        content=response.text if response.text or not _withheld(response) else None,
        refusal=response.refusal,
        tool_calls=response.tool_calls or None,
    )
    choice = ChatChoice(
        index=0, message=message, finish_reason=finish_reason(response), logprobs=response.logprobs
    )
    return ChatCompletionResponse(
        id=_completion_id(),
        created=int(time.time()),
        model=name,
        choices=[choice],
        usage=_usage(response),
    )


def _withheld(response: CompletionResponse) -> bool:
    return bool(response.tool_calls) or response.refusal is not None


def event_stream(name: str, response: CompletionResponse, *, include_usage: bool) -> bytes:
    """The whole answer as ``chat.completion.chunk`` events (one-shot chunking: the upstream
    call is not streamed), ending with ``data: [DONE]``."""
    chunk_id, created = _completion_id(), int(time.time())
    omit = None if include_usage else {"usage"}

    def chunk(delta: ChunkDelta, finish: str | None = None) -> ChatCompletionChunk:
        choice = ChunkChoice(delta=delta, finish_reason=finish)
        return ChatCompletionChunk(id=chunk_id, created=created, model=name, choices=[choice])

    chunks = [chunk(ChunkDelta(role="assistant", content=""))]
    if response.text:
        chunks.append(chunk(ChunkDelta(content=response.text)))
    if response.refusal is not None:
        chunks.append(chunk(ChunkDelta(refusal=response.refusal)))
    if response.tool_calls:
        calls = [{"index": i, **call} for i, call in enumerate(response.tool_calls)]
        chunks.append(chunk(ChunkDelta(tool_calls=calls)))
    chunks.append(chunk(ChunkDelta(), finish_reason(response)))
    if include_usage:
        chunks.append(
            ChatCompletionChunk(
                id=chunk_id, created=created, model=name, choices=[], usage=_usage(response)
            )
        )
    events = [b"data: " + body(c, exclude=omit) + b"\n\n" for c in chunks]
    return b"".join(events) + b"data: [DONE]\n\n"


def model_list(names: list[str]) -> ModelList:
    return ModelList(data=[ModelEntry(id=name) for name in names])
