"""The one interface every target (provider) implements, and the types it speaks.

Both the runner (a target answering a case) and the judge proxy (a grader's judge call) reach a
provider only through ``Target.complete``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from evalrun.errors import EvalrunError
from evalrun.transcripts import Transcript


@dataclass
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "input": self.input_tokens,
            "output": self.output_tokens,
            "total": self.total_tokens,
        }


def is_tool_result(message: dict[str, Any]) -> bool:
    """A ``role: "tool"`` turn answering a call by id. A ``tool`` turn without an id (a
    transcript in an eval file) is plain text to every provider."""
    return message.get("role") == "tool" and bool(message.get("tool_call_id"))


#: The request fields of OpenAI's Chat Completions API, read from the official SDK
#: (``openai.types.chat.CompletionCreateParams``, openai 3.57; a test keeps the two equal).
CHAT_FIELDS = frozenset(
    {"audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
     "max_completion_tokens", "max_tokens", "messages", "metadata", "modalities", "model",
     "moderation", "n", "parallel_tool_calls", "prediction", "presence_penalty",
     "prompt_cache_key", "prompt_cache_options", "prompt_cache_retention", "reasoning_effort",
     "response_format", "safety_identifier", "seed", "service_tier", "stop", "store", "stream",
     "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user",
     "verbosity", "web_search_options"}
)  # fmt: skip
#: The fields ``CompletionRequest`` carries itself, or that evalrun decides for every call (the
#: target's model, one unstreamed choice).
_OWN_FIELDS = frozenset(
    {"messages", "model", "n", "stream", "stream_options", "temperature", "max_tokens",
     "max_completion_tokens", "response_format", "tools", "tool_choice", "parallel_tool_calls"}
)  # fmt: skip
#: What ``CompletionRequest.options`` may hold: OpenAI's other request fields, nothing else. No
#: transport or credential field (``api_base``, ``base_url``, ``api_key``, ``headers``,
#: ``extra_headers``, ``extra_body``, ...) is one, so none reaches a provider, litellm's
#: ``acompletion`` included: a target's own endpoint and key always win (docs/security.md).
OPTION_FIELDS = CHAT_FIELDS - _OWN_FIELDS


@dataclass(frozen=True)
class AgentPlace:
    """Where a ``cli`` agent runs for one case (docs/agents.md, "Workspaces"): its working
    folder (the case's workspace, or None for the target's own), ``wrap`` puts its argv in the
    agent's sandbox, and ``files`` are the input files the case gives it (``{files}``)."""

    cwd: Path | None = None
    wrap: Callable[[list[str]], list[str]] | None = None
    files: tuple[str, ...] = ()


@dataclass
class CompletionRequest:
    """A provider-neutral chat request.

    ``messages`` are OpenAI-shaped message dicts without the system prompt, which travels on
    its own because several providers want it in a separate field: ``{"role", "content"}``, plus
    ``tool_calls`` on assistant turns and ``tool_call_id`` on ``role: "tool"`` turns. ``tools``,
    ``tool_choice`` and ``parallel_tool_calls`` are OpenAI's; each provider translates them
    (docs/targets.md). ``options`` holds the other OpenAI request fields a client sent (``seed``,
    ``logprobs``, ``stop``, ...): OpenAI-kind targets forward them as they are, the others map
    the few they have an equivalent for. ``task`` is the optional typed hint (docs/proxy.md)
    that non-LLM judges (mock, local) answer from.
    """

    messages: list[dict[str, Any]]
    system_prompt: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    response_format: dict[str, Any] | None = None
    task: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    options: dict[str, Any] = field(default_factory=dict)
    #: set for a case's agent only; no part of the cache key (``cli`` answers are not cached)
    agent: AgentPlace | None = None

    def __post_init__(self) -> None:
        """Refuse an option that is not one of OpenAI's request fields, whoever built it."""
        refused = sorted(str(key) for key in self.options if key not in OPTION_FIELDS)
        if refused:
            raise RefusedField(refused[0])

    @classmethod
    def from_prompt(cls, prompt: str, **kwargs: Any) -> CompletionRequest:
        return cls(messages=[{"role": "user", "content": prompt}], **kwargs)

    @property
    def prompt_text(self) -> str:
        """System prompt and messages as one text, for regex rules and CLI targets."""
        parts = [self.system_prompt] if self.system_prompt else []
        parts += [str(m.get("content") or "") for m in self.messages]
        return "\n\n".join(parts)

    @property
    def uses_tools(self) -> bool:
        """True when the request offers tools or replays an earlier tool exchange."""
        return bool(self.tools) or any(
            is_tool_result(m) or m.get("tool_calls") for m in self.messages
        )

    def cache_key_material(self) -> dict[str, Any]:
        """The fields that decide the answer. The tool fields and options join only when set,
        so keys of requests without them (and cassettes recorded before them) stay valid."""
        material: dict[str, Any] = {
            "messages": self.messages,
            "system_prompt": self.system_prompt,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "response_format": self.response_format,
            "task": self.task,
        }
        optional = {
            "tools": self.tools,
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "options": self.options or None,
        }
        material.update({k: v for k, v in optional.items() if v is not None})
        return material


@dataclass
class CompletionResponse:
    """One answer. ``refusal`` says why an answer is not a usable reply even when ``text`` is
    set or empty (a model refusal, a content filter, a cut-off with no text); ``tool_calls``
    are OpenAI-shaped (``{id, type: "function", function: {name, arguments}}``) whatever the
    provider; ``finish_reason`` is the provider's own word."""

    text: str
    usage: TokenUsage = field(default_factory=TokenUsage)
    finish_reason: str | None = None
    refusal: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    logprobs: dict[str, Any] | None = None
    model: str | None = None
    cached: bool = False
    replayed: bool = False
    latency_ms: float = 0.0
    cost_usd: float | None = None
    #: a judge panel's members' replies, agreement and split fields (evalrun/targets/panel.py)
    panel: dict[str, Any] | None = None
    #: lone surrogates replaced in the answer's texts (evalrun.safetext), so records can flag it
    repaired: int = 0
    #: what an agent did to get the answer: a ``cli`` target with ``transcript:`` (docs/agents.md)
    transcript: Transcript | None = None


class TargetError(EvalrunError):
    """A target could not answer. ``retryable`` errors are retried with backoff."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        target: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.target = target


class TargetTimeout(TargetError):
    """The upstream did not answer in time (the proxy maps this to 504)."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("retryable", True)
        super().__init__(message, **kwargs)


class UnsupportedByTarget(TargetError):
    """The target cannot answer this kind of request (e.g. free text to the local judge)."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("status", 422)
        super().__init__(message, **kwargs)


class RefusedField(TargetError):
    """A request field no provider may receive (the proxy answers 400 naming it)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"request field '{name[:100]}' is not accepted: only OpenAI's chat request fields "
            "are forwarded, and a target's endpoint and credentials come from targets.yaml",
            status=400,
        )
        self.field = name


@runtime_checkable
class Target(Protocol):
    name: str

    async def complete(self, request: CompletionRequest) -> CompletionResponse: ...

    async def aclose(self) -> None: ...
