"""The ``gemini`` target: Google's Gemini API (``generateContent``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from evalrun.targets.base import CompletionRequest, CompletionResponse, TargetError, TokenUsage
from evalrun.targets.config import ConfigError, TargetConfig
from evalrun.targets.http import HttpTarget, iter_dicts, split_turns, wants_json

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
#: finish reasons that mean the answer was withheld rather than cut short
_BLOCKED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE", "OTHER"}


def generate_body(request: CompletionRequest) -> dict[str, Any]:
    system, turns = split_turns(request)
    if not turns:
        raise TargetError("the request has no user message", status=400)
    body: dict[str, Any] = {
        "contents": [
            {"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}
            for role, text in turns
        ]
    }
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    generation: dict[str, Any] = {}
    if request.temperature is not None:
        generation["temperature"] = request.temperature
    if request.max_tokens is not None:
        generation["maxOutputTokens"] = request.max_tokens
    if wants_json(request):
        generation["responseMimeType"] = "application/json"
    if generation:
        body["generationConfig"] = generation
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
    parts = (candidate.get("content") or {}).get("parts") or []
    text = "".join(
        str(part.get("text") or "") for part in iter_dicts(parts) if not part.get("thought")
    )
    if not text and finish in _BLOCKED:
        raise TargetError(f"the answer was withheld (finishReason={finish})", status=400)
    usage = data.get("usageMetadata") or {}
    output = int(usage.get("candidatesTokenCount") or 0) + int(usage.get("thoughtsTokenCount") or 0)
    return CompletionResponse(
        text=text,
        usage=TokenUsage(int(usage.get("promptTokenCount") or 0), output),
        finish_reason=finish,
        model=data.get("modelVersion"),
    )


class GeminiTarget(HttpTarget):
    kind = "gemini"

    def __init__(self, config: TargetConfig, api_key: str | None) -> None:
        super().__init__(config, api_key)
        self.require_key()
        if not config.model:
            raise ConfigError(f"target '{config.name}' (gemini) needs 'model'")
        self.model = config.model.removeprefix("models/")
        self.base_url = (config.base_url or DEFAULT_BASE_URL).rstrip("/")

    def url(self) -> str:
        return f"{self.base_url}/v1beta/models/{quote(self.model, safe='.-_')}:generateContent"

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        try:
            body = generate_body(request)
        except TargetError as exc:
            raise self.error(exc.message, status=exc.status) from None
        headers = {"x-goog-api-key": self.require_key()}
        data = await self.post_json(self.url(), body, headers=headers)
        return self.parse(data, parse_generate)
