"""The proxy's JSON wire format (docs/proxy.md): camelCase out, camelCase or snake_case in.

These models are the proxy's only edge with graders, and the one description of each answer's
shape (``proxy.replies`` serialises them, ``proxy.declared`` documents them). On AgentV's routes
a request key the proxy does not know is ignored and recorded, as AgentV's proxy ignores it,
unless it would choose the target, its endpoint or credentials (``refused_key``): that one is
refused with 400, so a misspelt selector never falls back to the default target unnoticed. The OpenAI route takes OpenAI's own request fields beside the declared
ones and refuses any other key (a transport or credential field such as ``api_base``) with 400.
"""

from __future__ import annotations

import functools
import re
from typing import Annotated, Any, Literal, Protocol

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    model_validator,
)
from pydantic.alias_generators import to_camel

from evalrun.targets import OPTION_FIELDS


class ErrorLike(Protocol):
    """What an error answer carries (``proxy.replies.ErrorReply``)."""

    status: int
    code: str
    message: str
    extra: dict[str, Any]


#: the OpenAI surface's routes start so, and answer errors in its shape (docs/proxy.md)
OPENAI_PREFIX = "/v1/"


def _json_number(value: Any) -> Any:
    """Numbers must be JSON numbers: no ``true`` for 1, no ``"0.5"`` for 0.5."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ValueError("must be a JSON number")
    return value


Temperature = Annotated[float, Field(ge=0, le=2), BeforeValidator(_json_number)]
MaxTokens = Annotated[int, Field(ge=1), BeforeValidator(_json_number)]


class WireModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        serialize_by_alias=True,
    )


#: Request keys AgentV's routes refuse rather than ignore, in any case, words joined by ``_``,
#: ``-`` or nothing: a key that would name where a call goes or with what credentials. Ignoring
#: one would let a grader believe its judge call went elsewhere, or a target selector of another
#: API take (docs/security.md, "Unknown request keys"). The names, then the endings.
_REFUSED_NAMES = (
    "model", "target name", "target label", "provider label", "provider name", "api base",
    "api version", "custom llm provider", "timeout", "organization", "project", "deployment",
    "deployment id", "authorization", "proxy", "extra query", "extra body",
)  # fmt: skip
_REFUSED_ENDINGS = (
    "key", "token", "secret", "password", "credential", "credentials", "url", "header", "headers",
    "endpoint",
)  # fmt: skip


def _words(phrase: str) -> str:
    return "[_-]?".join(phrase.split())


_REFUSED_PATTERN = (
    f"^(?:{'|'.join(_words(name) for name in _REFUSED_NAMES)})$|(?:{'|'.join(_REFUSED_ENDINGS)})$"
)
_REFUSED = re.compile(_REFUSED_PATTERN, re.IGNORECASE)
#: the same pattern for the OpenAPI document, whose regexes have no case flag
REFUSED_KEY_SCHEMA = {
    "not": {"pattern": re.sub(r"[a-z]", lambda m: f"[{m[0]}{m[0].upper()}]", _REFUSED_PATTERN)}
}


def refused_key(key: str) -> bool:
    """A key that would choose the target, its endpoint or credentials (``api_base``,
    ``apiKey``, ``extra_headers``, ``model``, ...), which AgentV's routes refuse."""
    return _REFUSED.search(key) is not None


class LenientWireModel(WireModel):
    """AgentV's request bodies: as AgentV's proxy does, a key that is not a field is ignored,
    and named in the call's record (``ignored_keys``), unless :func:`refused_key` says it
    would redirect the call; that one is refused (400) naming it and the known fields."""

    _ignored: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _unknown_keys(cls, data: Any, handler: Any) -> Any:
        unknown: list[str] = []
        if isinstance(data, dict):
            known = _known_keys(cls)
            unknown = sorted(str(key) for key in data if key not in known)
            refused = [key for key in unknown if refused_key(key)]
            if refused:
                allowed = ", ".join(sorted(to_camel(name) for name in cls.model_fields))
                raise ValueError(
                    f"field {', '.join(repr(k[:50]) for k in refused[:5])} is refused: it would "
                    f"choose the target, its endpoint or its credentials, which come from "
                    f"targets.yaml (known: {allowed})"
                )
        model = handler(data)
        model._ignored = unknown
        return model

    @property
    def ignored_keys(self) -> list[str]:
        """The unknown keys the request carried (ignored, as AgentV's proxy ignores them)."""
        return self._ignored


@functools.cache
def _known_keys(model: type[BaseModel]) -> frozenset[str]:
    """A model's field names in both spellings (worked out once: every request is checked)."""
    return frozenset(key for name in model.model_fields for key in (name, to_camel(name)))


def _refused_keys(schema: dict[str, Any]) -> None:
    schema["propertyNames"] = REFUSED_KEY_SCHEMA


def _one_selector(schema: dict[str, Any]) -> None:
    _refused_keys(schema)
    schema["not"] = {
        "required": ["target", "provider"],
        "properties": {"target": {"type": "string"}, "provider": {"type": "string"}},
    }


class InvokeBody(LenientWireModel):
    """The body of ``/invoke`` (and each request of a batch). ``provider`` (AgentV's current
    SDK) and ``target`` (AgentV 4.x) are the same selector; send one. ``evalCaseId`` and
    ``attempt`` are AgentV's bookkeeping, accepted and ignored."""

    model_config = ConfigDict(**WireModel.model_config, json_schema_extra=_one_selector)

    question: str
    system_prompt: str | None = None
    target: str | None = None
    provider: str | None = Field(None, description="synonym of target")
    temperature: Temperature | None = None
    max_tokens: MaxTokens | None = None
    response_format: dict[str, Any] | None = None
    task: dict[str, Any] | None = None
    eval_case_id: Any = Field(None, description="AgentV's bookkeeping; ignored")
    attempt: Any = Field(None, description="AgentV's bookkeeping; ignored")

    @model_validator(mode="after")
    def _selector(self) -> InvokeBody:
        if self.provider is not None:
            if self.target is not None:
                raise ValueError("send 'target' or its synonym 'provider', not both")
            self.target = self.provider
        return self

    @property
    def selector(self) -> str:
        """The key the client named its target with, for the words of an unknown-target error."""
        return "provider" if self.provider is not None else "target"


class InvokeBatchRequest(LenientWireModel):
    model_config = ConfigDict(**WireModel.model_config, json_schema_extra=_refused_keys)

    requests: list[InvokeBody]


class OutputMessage(WireModel):
    role: Literal["assistant"] = "assistant"
    content: str


class TokenUsageWire(WireModel):
    input: int
    output: int
    total: int


FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]


class InvokeResponse(WireModel):
    """``finishReason`` normalised across providers; ``refusal`` is the provider's refusal
    message when it declined instead of answering (docs/proxy.md)."""

    output: list[OutputMessage]
    raw_text: str
    token_usage: TokenUsageWire
    target: str
    cached: bool
    latency_ms: float
    finish_reason: FinishReason
    refusal: str | None


class InvokeItemError(WireModel):
    """A request of a batch that was not answered: AgentV's ``{output: [], rawText: "Error:
    <message>"}``, with the error's ``error`` (message), ``code``, ``status``, its ``index``
    and extra fields (``allowed``) beside it, so evalrun's SDKs raise it as they would on
    ``/invoke`` (docs/proxy.md)."""

    model_config = ConfigDict(**{**WireModel.model_config, "extra": "allow"})

    output: list[OutputMessage]
    raw_text: str
    error: str
    code: str
    status: int
    index: int

    @classmethod
    def of(cls, error: ErrorLike, index: int) -> InvokeItemError:
        fields = {"output": [], "rawText": f"Error: {error.message}", "error": error.message}
        return cls.model_validate(
            {**fields, "code": error.code, "status": error.status, "index": index, **error.extra}
        )


class InvokeBatchResponse(WireModel):
    """The answers in request order: an answer, or that request's error in its place."""

    responses: list[InvokeResponse | InvokeItemError]


class InfoResponse(WireModel):
    """AgentV 4.x names (``targetName``, ``availableTargets``) and current ones (``providerLabel``,
    ``availableProviderLabels``) carry the same values."""

    target_name: str
    provider_label: str
    call_count: int
    max_calls: int
    available_targets: list[str]
    available_provider_labels: list[str]
    #: budget units one request to the default target costs (a judge panel: one per upstream call)
    calls_per_request: int = 1


class AgentVErrorResponse(BaseModel):
    """The error of AgentV's routes (``/invoke``, ``/invokeBatch``, ``/info``): the message is a
    string, as AgentV's proxy sends it; ``code`` and any extra keys sit beside it."""

    model_config = ConfigDict(extra="allow")

    error: str
    code: str


# OpenAI-compatible routes: snake_case is OpenAI's own wire format, so no aliasing here.


class ContentPart(BaseModel):
    """One part of a message's content (``text``, ``image_url``, ...); non-text parts reach
    OpenAI-kind targets only."""

    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: StrictBool | None = None


def _openai_fields_only(schema: dict[str, Any]) -> None:
    """The schema says what the route accepts: the declared fields and OpenAI's other request
    fields (any value: OpenAI-kind targets forward them), no other key."""
    schema["additionalProperties"] = False
    for name in sorted(OPTION_FIELDS - schema["properties"].keys()):
        schema["properties"][name] = {"description": "an OpenAI request field, passed on"}


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat request. The fields evalrun reads are declared; OpenAI's other request
    fields are kept (``model_extra``) and forwarded to OpenAI-kind targets, and any other key is
    refused when the request is built (``evalrun.targets.base.OPTION_FIELDS``, docs/proxy.md).

    ``task`` is an evalrun extension (send it with ``extra_body``) for non-LLM judges.
    """

    model_config = ConfigDict(extra="allow", json_schema_extra=_openai_fields_only)

    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    temperature: Temperature | None = None
    max_tokens: MaxTokens | None = None
    max_completion_tokens: MaxTokens | None = None
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: StrictBool | None = None
    stream: StrictBool | None = Field(default=None, description="one-shot chunked event stream")
    stream_options: StreamOptions | None = None
    n: Literal[1] | None = Field(default=None, description="one choice only")
    task: dict[str, Any] | None = None


def _sent_when_set() -> Any:
    """A field that is left out of the answer while it is None (as OpenAI leaves it out)."""
    return Field(default=None, exclude_if=lambda value: value is None)


class ChatChoiceMessage(BaseModel):
    """``content`` is null when the answer is only tool calls or only a refusal, as OpenAI's."""

    role: Literal["assistant"] = "assistant"
    content: str | None
    refusal: str | None = None
    tool_calls: list[dict[str, Any]] | None = _sent_when_set()


class ChatChoice(BaseModel):
    index: int
    message: ChatChoiceMessage
    finish_reason: str
    logprobs: dict[str, Any] | None = None


class ChunkDelta(BaseModel):
    """What one ``chat.completion.chunk`` adds; fields without a value are left out."""

    role: Literal["assistant"] | None = _sent_when_set()
    content: str | None = _sent_when_set()
    refusal: str | None = _sent_when_set()
    tool_calls: list[dict[str, Any]] | None = _sent_when_set()


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    logprobs: dict[str, Any] | None = None
    finish_reason: str | None = None


class ChatUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: ChatUsage


class ChatCompletionChunk(BaseModel):
    """One server-sent event of a streamed answer. ``usage`` is sent (null until the last
    chunk) only when the request asked for it (``stream_options.include_usage``)."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: ChatUsage | None = None


class ModelEntry(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "evalrun"


class OpenAIErrorBody(BaseModel):
    """OpenAI's error object; ``code`` is the contract code (docs/proxy.md)."""

    model_config = ConfigDict(extra="allow")

    message: str
    type: str
    param: str | None = None
    code: str


class OpenAIErrorResponse(BaseModel):
    error: OpenAIErrorBody


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelEntry]
