"""The ``gemini`` target: Google's Gemini API (``generateContent``), as the current
``google-genai`` SDK speaks it (docs/targets.md): ``/v1`` (configurable), JSON schemas as
``responseJsonSchema``, OpenAI tools as ``functionDeclarations`` and ``functionCall`` parts."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from evalrun.targets.base import (
    CompletionRequest,
    CompletionResponse,
    TargetError,
    TokenUsage,
    UnsupportedByTarget,
    is_tool_result,
)
from evalrun.targets.config import TargetConfig
from evalrun.targets.providers.http import HttpTarget, iter_dicts, text_of, wants_json
from evalrun.targets.providers.tools import (
    Block,
    call_arguments,
    call_name,
    function_tools,
    split_blocks,
    tool_call,
    tool_choice_of,
)

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
#: finish reasons that mean the answer was withheld rather than cut short
_BLOCKED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE", "OTHER"}


DEFAULT_API_VERSION = "v1"
#: OpenAI request options with a Gemini ``generationConfig`` equivalent
_OPTIONS = {
    "seed": "seed",
    "top_p": "topP",
    "logprobs": "responseLogprobs",
    "top_logprobs": "logprobs",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
}
#: where Gemini's thought signature of a function call rides in an OpenAI tool call
_SIGNATURE = ("extra_content", "google", "thought_signature")


def _signature(call: dict[str, Any]) -> str | None:
    value: Any = call
    for key in _SIGNATURE:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) else None


def _function_response(text: str) -> dict[str, Any]:
    """A tool result as the object Gemini wants: the result's own JSON object, else wrapped."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"result": text}


def _parts_of(request: CompletionRequest) -> Any:
    names = {
        call.get("id"): call_name(call)
        for message in request.messages
        for call in iter_dicts(message.get("tool_calls"))
    }

    def parts(message: dict[str, Any]) -> tuple[str, list[Block]]:
        role = message.get("role")
        text = text_of(message.get("content"))
        if is_tool_result(message):
            name = names.get(message.get("tool_call_id")) or str(message.get("name") or "")
            if not name:
                raise UnsupportedByTarget("a tool message answers no known tool call")
            failed = message.get("is_error") is True  # docs/targets.md, "Tools"
            response = {
                "name": name,
                "response": {"error": text} if failed else _function_response(text),
            }
            return "user", [{"functionResponse": response}]
        if role != "assistant":
            return "user", [{"text": text}]
        calls: list[Block] = []
        for call in iter_dicts(message.get("tool_calls")):
            part: Block = {"functionCall": {"name": call_name(call), "args": call_arguments(call)}}
            signature = _signature(call)
            if signature:
                part["thoughtSignature"] = signature
            calls.append(part)
        return "model", ([{"text": text}] if text or not calls else []) + calls

    return parts


def _merge_text(parts: list[Block]) -> list[Block]:
    """Adjacent text parts of a merged turn become one part."""
    merged: list[Block] = []
    for part in parts:
        if merged and set(part) == {"text"} and set(merged[-1]) == {"text"}:
            merged[-1] = {"text": f"{merged[-1]['text']}\n\n{part['text']}"}
        else:
            merged.append(part)
    return merged


def _tool_fields(request: CompletionRequest) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    tools = function_tools(request)
    if tools:
        declarations = [
            {"name": t.name, "parametersJsonSchema": t.parameters}
            | ({"description": t.description} if t.description else {})
            for t in tools
        ]
        fields["tools"] = [{"functionDeclarations": declarations}]
    mode, forced = tool_choice_of(request)
    if mode is not None:
        config: dict[str, Any] = {"mode": {"auto": "AUTO", "none": "NONE", "required": "ANY"}[mode]}
        if forced is not None:
            config["allowedFunctionNames"] = [forced]
        fields["toolConfig"] = {"functionCallingConfig": config}
    return fields


def generate_body(request: CompletionRequest) -> dict[str, Any]:
    system, turns = split_blocks(request, _parts_of(request))
    if not turns:
        raise TargetError("the request has no user message", status=400)
    body: dict[str, Any] = {
        "contents": [{"parts": _merge_text(parts), "role": role} for role, parts in turns]
    }
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}], "role": "user"}
    generation: dict[str, Any] = {}
    if request.temperature is not None:
        generation["temperature"] = request.temperature
    if request.max_tokens is not None:
        generation["maxOutputTokens"] = request.max_tokens
    if wants_json(request):
        generation["responseMimeType"] = "application/json"
        schema = ((request.response_format or {}).get("json_schema") or {}).get("schema")
        if isinstance(schema, dict):
            generation["responseJsonSchema"] = schema
    stop = request.options.get("stop")
    if stop:
        generation["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    for option, key in _OPTIONS.items():
        if request.options.get(option) is not None:
            generation[key] = request.options[option]
    if generation:
        body["generationConfig"] = generation
    body.update(_tool_fields(request))
    return body


def parse_generate(data: dict[str, Any]) -> CompletionResponse:
    candidates = data.get("candidates") or []
    if not candidates:
        reason = (data.get("promptFeedback") or {}).get("blockReason")
        if reason:
            raise TargetError(f"the prompt was blocked (blockReason={reason})", status=400)
        raise ValueError("no candidates")
    candidate = candidates[0]
    finish = candidate.get("finishReason")
    parts = list(iter_dicts((candidate.get("content") or {}).get("parts")))
    text = "".join(str(part.get("text") or "") for part in parts if not part.get("thought"))
    calls = []
    for part in parts:
        call = part.get("functionCall")
        if isinstance(call, dict):
            openai_call = tool_call(str(call["name"]), call.get("args") or {}, call.get("id"))
            if isinstance(part.get("thoughtSignature"), str):
                openai_call[_SIGNATURE[0]] = {"google": {_SIGNATURE[2]: part["thoughtSignature"]}}
            calls.append(openai_call)
    if not text and not calls and finish in _BLOCKED:
        raise TargetError(f"the answer was withheld (finishReason={finish})", status=400)
    refusal = None
    if not text and not calls and finish in ("MAX_TOKENS", "MALFORMED_FUNCTION_CALL"):
        refusal = f"the answer has no text (finishReason={finish})"
    usage = data.get("usageMetadata") or {}
    output = int(usage.get("candidatesTokenCount") or 0) + int(usage.get("thoughtsTokenCount") or 0)
    return CompletionResponse(
        text=text,
        usage=TokenUsage(int(usage.get("promptTokenCount") or 0), output),
        finish_reason=finish,
        refusal=refusal,
        tool_calls=calls or None,
        model=data.get("modelVersion"),
    )


class GeminiTarget(HttpTarget):
    kind = "gemini"
    default_base_url = DEFAULT_BASE_URL

    def __init__(self, config: TargetConfig, api_key: str | None) -> None:
        super().__init__(config, api_key)
        self.require_key()
        self.model = self.require_model().removeprefix("models/")
        self.api_version = str(config.extra("api_version") or DEFAULT_API_VERSION).strip("/")

    def url(self) -> str:
        model = quote(self.model, safe=".-_")
        return f"{self.base_url}/{self.api_version}/models/{model}:generateContent"

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        body = self.translate(lambda: generate_body(request))
        headers = {"x-goog-api-key": self.require_key()}
        data = await self.post_json(self.url(), body, headers=headers)
        return self.parse(data, parse_generate)
