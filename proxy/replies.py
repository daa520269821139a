"""The proxy's answers as bytes: every response body is one of the models of ``proxy.wire``,
serialised here, so the shape a client receives and the shape ``/openapi.json`` documents come
from the same class (docs/proxy.md, "Routes" and "Errors")."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from evalrun.safetext import repair
from evalrun.targets import CompletionResponse
from proxy.wire import (
    AgentVErrorResponse,
    FinishReason,
    InvokeResponse,
    OpenAIErrorBody,
    OpenAIErrorResponse,
    OutputMessage,
    TokenUsageWire,
)

#: OpenAI's error ``type`` for a status; any other 4xx is ``invalid_request_error``
_OPENAI_ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    429: "insufficient_quota",
    500: "server_error",
    502: "server_error",
    503: "server_error",
    504: "server_error",
}


def dumps(payload: Any) -> bytes:
    """Compact JSON in UTF-8, text as it is (no ``\\u`` escapes)."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode()
    except UnicodeEncodeError:  # targets repair their text; this keeps any other path answering
        return repair(text)[0].encode()


def body(model: BaseModel, **options: Any) -> bytes:
    """A wire model as the bytes of an answer (aliases where the model declares them), by
    pydantic's own encoder: a third of the time of ``json.dumps`` over ``model_dump``. Text it
    cannot encode (a lone surrogate a target did not repair) takes the slow path, repaired."""
    try:
        return model.model_dump_json(by_alias=True, **options).encode()
    except PydanticSerializationError:
        return dumps(model.model_dump(by_alias=True, **options))


class ErrorReply(Exception):
    """An error answer: HTTP status, a contract code, a message and extra fields (docs/proxy.md,
    "Errors"). Raised anywhere below a route, turned into bytes once by :meth:`body`."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def body(self, *, openai: bool = False) -> bytes:
        """AgentV's shape on its routes, ``{"error": "<message>", "code": ..., ...extra}``, so
        AgentV's SDKs show the text; OpenAI's (``{error: {message, type, param, code}}``) on /v1."""
        if openai:
            kind = _OPENAI_ERROR_TYPES.get(self.status, "invalid_request_error")
            fields = {"message": self.message, "type": kind, "param": None, "code": self.code}
            error = OpenAIErrorBody.model_validate({**fields, **self.extra})
            return body(OpenAIErrorResponse(error=error))
        flat = {"error": self.message, "code": self.code, **self.extra}
        return body(AgentVErrorResponse.model_validate(flat))


def error_body(code: str, message: str, *, status: int = 400, openai: bool = False) -> bytes:
    """The bytes of an error answer raised by no route (the gate, FastAPI's 404/405)."""
    return ErrorReply(status, code, message).body(openai=openai)


def invoke_response(
    name: str, response: CompletionResponse, latency_ms: float, finish_reason: FinishReason
) -> InvokeResponse:
    """One answered call on AgentV's routes (``/invoke``, an item of ``/invokeBatch``)."""
    usage = response.usage
    return InvokeResponse(
        output=[OutputMessage(content=response.text)],
        raw_text=response.text,
        token_usage=TokenUsageWire(
            input=usage.input_tokens,
            output=usage.output_tokens,
            total=usage.input_tokens + usage.output_tokens,
        ),
        target=name,
        cached=response.cached or response.replayed,
        latency_ms=round(latency_ms, 3),
        finish_reason=finish_reason,
        refusal=response.refusal or None,
    )
