"""HTTP clients for the judge proxy (docs/proxy.md), stdlib only.

They speak HTTP through ``grader_sdk._http`` (a small socket client, imported when the first
client is made) rather than ``http.client``, whose imports would cost a short grader process
20-40 ms on its first judge call.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from grader_sdk._errors import (
    ProtocolError,
    ProxyNotConfigured,
    ProxyUnavailable,
    error_from_response,
)
from grader_sdk._record import Record

if TYPE_CHECKING:
    from grader_sdk._http import HttpClient

R = TypeVar("R")

URL_ENV = ("AGENTV_TARGET_PROXY_URL", "AGENTV_PROVIDER_PROXY_URL", "EVALRUN_PROXY_URL")
TOKEN_ENV = ("AGENTV_TARGET_PROXY_TOKEN", "AGENTV_PROVIDER_PROXY_TOKEN", "EVALRUN_PROXY_TOKEN")
DEFAULT_TIMEOUT = 600.0
#: A host-mode case's own variables, seen by the thread that runs it only (``_host.py``); unset,
#: the process environment holds them.
CASE_ENV: ContextVar[Mapping[str, str] | None] = ContextVar("case_env", default=None)

_CAMEL = {
    "system_prompt": "systemPrompt",
    "max_tokens": "maxTokens",
    "response_format": "responseFormat",
}


class InvokeRequest(Record):
    """One judge call. ``task`` is the typed hint non-LLM judges answer from."""

    def __init__(
        self,
        question: str,
        system_prompt: str | None = None,
        target: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
        task: dict[str, Any] | None = None,
    ) -> None:
        self.question = question
        self.system_prompt = system_prompt
        self.target = target
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.response_format = response_format
        self.task = task

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"question": self.question}
        for name in ("system_prompt", "target", "temperature", "max_tokens", "response_format"):
            value = getattr(self, name)
            if value is not None:
                out[_CAMEL.get(name, name)] = value
        if self.task is not None:
            out["task"] = self.task
        return out


def request_to_wire(item: InvokeRequest | Mapping[str, Any] | str) -> dict[str, Any]:
    """Accept an InvokeRequest, a dict in either case, or a bare question."""
    if isinstance(item, InvokeRequest):
        return item.to_wire()
    if isinstance(item, str):
        return {"question": item}
    if isinstance(item, Mapping):
        out = {_CAMEL.get(k, k): v for k, v in item.items() if v is not None}
        if not isinstance(out.get("question"), str):
            raise TypeError("an invoke request needs a 'question' string")
        return out
    raise TypeError(f"cannot send {type(item).__name__} as an invoke request")


class InvokeResult(Record):
    """One judge reply. ``finish_reason`` is stop, length, tool_calls or content_filter (None
    from a proxy that does not say); a reply cut off at ``length`` must not be read as whole.
    ``refusal`` is the provider's refusal message, when it gave one instead of an answer."""

    def __init__(
        self,
        raw_text: str,
        output: list[dict[str, Any]] | None = None,
        token_usage: dict[str, int] | None = None,
        target: str = "",
        cached: bool = False,
        latency_ms: float = 0.0,
        finish_reason: str | None = None,
        refusal: str | None = None,
    ) -> None:
        self.raw_text = raw_text
        self.output = [] if output is None else output
        self.token_usage = {} if token_usage is None else token_usage
        self.target = target
        self.cached = cached
        self.latency_ms = latency_ms
        self.finish_reason = finish_reason
        self.refusal = refusal

    @property
    def text(self) -> str:
        return self.raw_text

    @classmethod
    def from_wire(cls, data: Any) -> InvokeResult:
        if not isinstance(data, dict):
            raise ProtocolError(f"expected an invoke response object, got {type(data).__name__}")
        raw = _pick(data, "rawText", "raw_text")
        output = data.get("output")
        if not isinstance(raw, str):
            raw = _text_of_output(output)
            if raw is None:
                raise ProtocolError("invoke response has neither rawText nor output text")
        usage = _pick(data, "tokenUsage", "token_usage")
        finish = _pick(data, "finishReason", "finish_reason")
        refusal = data.get("refusal")
        return cls(
            raw_text=raw,
            output=output if isinstance(output, list) else [{"role": "assistant", "content": raw}],
            token_usage=dict(usage) if isinstance(usage, dict) else {},
            target=str(data.get("target") or ""),
            cached=bool(data.get("cached", False)),
            latency_ms=float(_pick(data, "latencyMs", "latency_ms") or 0.0),
            finish_reason=str(finish) if finish else None,
            refusal=str(refusal) if refusal else None,
        )


class ProxyInfo(Record):
    """The caller's grant. ``calls_per_request``: budget units one request to the default
    target costs (a judge panel: one per member)."""

    def __init__(
        self,
        target_name: str,
        call_count: int,
        max_calls: int,
        available_targets: list[str] | None = None,
        calls_per_request: int = 1,
    ) -> None:
        self.target_name = target_name
        self.call_count = call_count
        self.max_calls = max_calls
        self.available_targets = [] if available_targets is None else available_targets
        self.calls_per_request = calls_per_request

    @property
    def remaining(self) -> int:
        """Requests to the default target the budget still pays for."""
        return max(0, self.max_calls - self.call_count) // max(1, self.calls_per_request)

    @classmethod
    def from_wire(cls, data: Any) -> ProxyInfo:
        if not isinstance(data, dict):
            raise ProtocolError("expected an info object")
        try:
            return cls(
                target_name=str(_pick(data, "targetName", "target_name") or ""),
                call_count=int(_pick(data, "callCount", "call_count") or 0),
                max_calls=int(_pick(data, "maxCalls", "max_calls") or 0),
                available_targets=[
                    str(t) for t in (_pick(data, "availableTargets", "available_targets") or [])
                ],
                calls_per_request=int(_pick(data, "callsPerRequest", "calls_per_request") or 1),
            )
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed info response: {exc}") from None


class TargetClient:
    """Blocking client. Sequential calls reuse one keep-alive connection (shared by the clients
    of a process that talk to the same proxy); concurrent calls (threads) each get their own.
    ``timeout`` bounds connecting and each wait for data."""

    def __init__(self, url: str, token: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not url:
            raise ProxyNotConfigured("no proxy URL given")
        from grader_sdk._http import parse_url, shared_client

        try:
            host, port, self._prefix = parse_url(url)
        except ValueError as exc:
            raise ProxyNotConfigured(str(exc)) from None
        if "\r" in token or "\n" in token:
            raise ProxyNotConfigured("the proxy token contains a line break")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._http: HttpClient = shared_client(host, port, timeout=timeout)
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._json_headers = {**self._headers, "Content-Type": "application/json"}

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> TargetClient:
        url, token = proxy_settings(env)
        return cls(url, token, timeout=timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r})"

    def close(self) -> None:
        """Close the idle connections to the proxy now (they also close with the process)."""
        self._http.close()

    def __enter__(self) -> TargetClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def invoke(
        self,
        question: str,
        *,
        system_prompt: str | None = None,
        target: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
        task: dict[str, Any] | None = None,
    ) -> InvokeResult:
        request = InvokeRequest(
            question, system_prompt, target, temperature, max_tokens, response_format, task
        )
        return InvokeResult.from_wire(self._call("POST", "/invoke", request.to_wire()))

    def invoke_batch(
        self, requests: Iterable[InvokeRequest | Mapping[str, Any] | str]
    ) -> list[InvokeResult]:
        """All requests in one HTTP call; the proxy runs them concurrently and keeps the order."""
        wire = [request_to_wire(r) for r in requests]
        if not wire:
            return []
        data = self._call("POST", "/invokeBatch", {"requests": wire})
        responses = data.get("responses") if isinstance(data, dict) else None
        if not isinstance(responses, list):
            raise ProtocolError("invokeBatch response has no 'responses' list")
        if len(responses) != len(wire):
            raise ProtocolError(
                f"invokeBatch sent {len(wire)} requests but got {len(responses)} responses"
            )
        for item in responses:  # a request the proxy could not answer carries its error
            if isinstance(item, dict) and isinstance(item.get("error"), str):
                status = item.get("status")
                raise error_from_response(status if isinstance(status, int) else 502, item)
        return [InvokeResult.from_wire(r) for r in responses]

    def info(self) -> ProxyInfo:
        return ProxyInfo.from_wire(self._call("GET", "/info", None))

    def _call(self, method: str, path: str, body: Any) -> Any:
        from grader_sdk._http import HTTPProtocolError

        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = self._headers if data is None else self._json_headers
        try:
            response = self._http.request(method, self._prefix + path, headers, data)
        except (OSError, HTTPProtocolError) as exc:
            raise ProxyUnavailable(f"cannot reach the judge proxy at {self.url}: {exc}") from exc
        raw, status = response.body, response.status
        text = raw.decode("utf-8", errors="replace")
        try:
            payload = json.loads(text) if text.strip() else None
        except ValueError:
            payload = None
        if status >= 400:
            raise error_from_response(status, payload, text)
        if payload is None:
            raise ProtocolError(f"proxy answered HTTP {status} without a JSON body")
        return payload


class AsyncTargetClient:
    """The asyncio twin of TargetClient: the same calls, run in worker threads."""

    def __init__(self, url: str, token: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._sync = TargetClient(url, token, timeout=timeout)

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> AsyncTargetClient:
        url, token = proxy_settings(env)
        return cls(url, token, timeout=timeout)

    @property
    def url(self) -> str:
        return self._sync.url

    async def invoke(self, question: str, **kwargs: Any) -> InvokeResult:
        return await _in_thread(self._sync.invoke, question, **kwargs)

    async def invoke_batch(
        self, requests: Iterable[InvokeRequest | Mapping[str, Any] | str]
    ) -> list[InvokeResult]:
        return await _in_thread(self._sync.invoke_batch, list(requests))

    async def info(self) -> ProxyInfo:
        return await _in_thread(self._sync.info)


async def _in_thread(fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    import asyncio

    return await asyncio.to_thread(fn, *args, **kwargs)


def proxy_settings(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(url, token) from AgentV's variable names, falling back to evalrun's; read from the
    case's own variables in a host (``CASE_ENV``), else from the process environment."""
    if env is None:
        env = CASE_ENV.get()
        env = os.environ if env is None else env
    url = next((env[n] for n in URL_ENV if env.get(n)), "")
    token = next((env[n] for n in TOKEN_ENV if env.get(n)), "")
    if not url or not token:
        raise ProxyNotConfigured(
            "no judge proxy: AGENTV_TARGET_PROXY_URL/TOKEN (or EVALRUN_PROXY_URL/TOKEN) are not "
            "set; give this grader `target: {max_calls: N}` in the eval file"
        )
    return url, token


def _pick(data: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in data:
            return data[name]
    return None


def _text_of_output(output: Any) -> str | None:
    if isinstance(output, list):
        for message in reversed(output):
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                return message["content"]
    return None
