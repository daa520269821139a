"""Plumbing shared by the HTTP providers: pooled clients per event loop (httpx, or the lean
client of ``plainhttp`` for a plain-HTTP URL), request timeouts, mapping of HTTP and network
failures onto ``TargetError``, and key redaction.

Each provider module only knows its own URL, headers, body and response shape.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import re
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from evalrun.errors import ConfigError
from evalrun.targets.base import (
    CompletionRequest,
    CompletionResponse,
    TargetError,
    TargetTimeout,
    UnsupportedByTarget,
)
from evalrun.targets.config import TargetConfig
from evalrun.targets.providers._httpx import httpx
from evalrun.targets.providers.plainhttp import PlainHttpClient, PlainHttpError, usable_for

T = TypeVar("T")

REDACTED = "***"
#: connections per httpx client; a target with more uses several clients in turn
CONNECTIONS_PER_CLIENT = 16
_ERROR_TEXT_LIMIT = 500
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def parse_retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP-date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def _retry_delay_from_body(error: dict[str, Any]) -> float | None:
    """Google APIs put the wait in ``error.details[].retryDelay`` ("37s") instead of a header."""
    for detail in error.get("details") or []:
        if isinstance(detail, dict) and isinstance(detail.get("retryDelay"), str):
            match = _DURATION.match(detail["retryDelay"])
            if match:
                return float(match.group(1))
    return None


def describe_error_body(body: Any) -> tuple[str, str | None, float | None]:
    """(message, error type/code, retry delay) from the error shapes providers use.

    OpenAI/Azure ``{"error": {"message", "type", "code"}}``, Anthropic ``{"type": "error",
    "error": {"type", "message"}}``, Gemini ``{"error": {"code", "message", "status"}}``, and the
    looser ``{"error": "..."}`` / ``{"message": ...}`` / ``{"detail": ...}`` of local servers.
    """
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            kinds = [error.get(k) for k in ("type", "status", "code")]
            kind = next((k for k in kinds if isinstance(k, str) and k), None)
            message = error.get("message") or ""
            return str(message), kind, _retry_delay_from_body(error)
        if isinstance(error, str):
            return error, None, None
        for key in ("message", "detail"):
            if key in body:
                return str(body[key]), None, None
    return "", None, None


def text_of(content: Any) -> str:
    """Message content as plain text (strings, or OpenAI-style lists of text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return str(content)


def wants_json(request: CompletionRequest) -> bool:
    kind = (request.response_format or {}).get("type")
    return kind in ("json_object", "json_schema", "json")


class HttpTarget:
    """Base for providers that speak JSON over HTTPS."""

    kind = "http"
    #: providers that take OpenAI-shaped tools (translated where needed)
    supports_tools = True

    #: where requests go when targets.yaml sets no ``base_url``
    default_base_url = ""

    def __init__(self, config: TargetConfig, api_key: str | None) -> None:
        self.name = config.name
        self.config = config
        self.base_url = (config.base_url or self.default_base_url).rstrip("/")
        self._api_key = api_key
        #: per (loop, TLS or not): the clients of that loop for https or plain-http URLs
        self._clients: dict[tuple[asyncio.AbstractEventLoop, bool], list[httpx.AsyncClient]] = {}
        self._turn = 0
        self._plain: dict[asyncio.AbstractEventLoop, PlainHttpClient] = {}

    def require_key(self) -> str:
        if not self._api_key:
            hint = self.config.api_key_env or "an environment variable"
            raise ConfigError(
                f"target '{self.name}' ({self.kind}) needs an API key: set api_key_env "
                f"(e.g. {hint}) in targets.yaml and export it"
            )
        return self._api_key

    def require_model(self) -> str:
        if not self.config.model:
            raise ConfigError(f"target '{self.name}' ({self.kind}) needs 'model'")
        return self.config.model

    def redact(self, text: str) -> str:
        if self._api_key and len(self._api_key) >= 4:
            text = text.replace(self._api_key, REDACTED)
        return text

    def _client(self, url: str) -> httpx.AsyncClient:
        """A pooled client of the running loop, made on first use inside that loop (a client's
        connections belong to the loop that opened them).

        The target's connections are split over several small clients, taken in turn:
        httpcore scans every connection of a pool on each request, which at 200 connections in
        one pool cost more CPU than the rest of a judge call (docs/performance.md). Only an
        https client loads the CA bundle."""
        loop = asyncio.get_running_loop()
        tls = url.startswith("https:")
        clients = self._clients.get((loop, tls))
        if clients is None:
            for other in [key for key in self._clients if key[0].is_closed()]:
                del self._clients[other]
            total = self.config.concurrency_bounds[1]
            shards = -(-total // CONNECTIONS_PER_CLIENT)
            per_client = -(-total // shards)
            clients = self._clients[(loop, tls)] = [
                httpx.AsyncClient(
                    verify=_tls_context() if tls else _plain_context(),
                    timeout=httpx.Timeout(
                        self.config.timeout, connect=min(self.config.timeout, 10.0)
                    ),
                    limits=httpx.Limits(
                        max_connections=per_client + 1, max_keepalive_connections=per_client
                    ),
                )
                for _ in range(shards)
            ]
        self._turn += 1
        return clients[self._turn % len(clients)]

    def _plain_client(self) -> PlainHttpClient:
        """The lean client of the running loop (its connections belong to that loop)."""
        loop = asyncio.get_running_loop()
        client = self._plain.get(loop)
        if client is None:
            for other in [lp for lp in self._plain if lp.is_closed()]:
                del self._plain[other]
            client = self._plain[loop] = PlainHttpClient(
                connect_timeout=min(self.config.timeout, 10.0),
                max_idle=self.config.concurrency_bounds[1],
            )
        return client

    def error(self, message: str, **kwargs: Any) -> TargetError:
        cls = TargetTimeout if kwargs.pop("timeout", False) else TargetError
        return cls(
            self.redact(f"{self.kind} target '{self.name}': {message}"), target=self.name, **kwargs
        )

    async def post_json(
        self,
        url: str,
        body: dict[str, Any],
        *,
        headers: dict[str, str],
        params: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """POST ``body`` and return the decoded JSON object, or raise a classified TargetError."""
        timeout = self.config.timeout
        try:
            if usable_for(url):
                content = json.dumps(
                    body, ensure_ascii=False, separators=(",", ":"), allow_nan=False
                ).encode()
                sent = self._plain_client().post(url, content, headers, params)
            else:
                sent = self._client(url).post(url, json=body, headers=headers, params=params)
            response = await asyncio.wait_for(sent, timeout)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            raise self.error(f"no response within {timeout:g}s", timeout=True) from None
        except (httpx.TransportError, PlainHttpError) as exc:
            detail = str(exc) or type(exc).__name__
            raise self.error(f"connection failed: {detail}", retryable=True) from None
        if response.status_code >= 400:
            raise self._status_error(response)
        try:
            data = response.json()
        except ValueError:
            raise self.error(
                f"HTTP {response.status_code} with a body that is not JSON: "
                f"{response.text[:200]!r}",
                retryable=True,
                status=response.status_code,
            ) from None
        if not isinstance(data, dict):
            raise self.error("response body is not a JSON object", retryable=True)
        return data

    def _status_error(self, response: httpx.Response) -> TargetError:
        status = response.status_code
        try:
            message, kind, delay = describe_error_body(response.json())
        except ValueError:
            message, kind, delay = response.text.strip(), None, None
        message = " ".join(message.split())[:_ERROR_TEXT_LIMIT] or response.reason_phrase
        label = f"HTTP {status}" + (f" {kind}" if kind else "")
        retryable = status in (408, 429) or status >= 500
        retry_after = parse_retry_after(response.headers)
        if retry_after is None and retryable:
            retry_after = delay
        return self.error(
            f"{label}: {message}", status=status, retryable=retryable, retry_after=retry_after
        )

    def translate(self, build: Callable[[], T]) -> T:
        """Run a request translation (the body): a shape the provider cannot take stays an
        ``UnsupportedByTarget`` (the proxy's 422), now naming this target; any other
        ``TargetError`` becomes this target's."""
        try:
            return build()
        except UnsupportedByTarget as exc:
            message = self.redact(f"{self.kind} target '{self.name}': {exc.message}")
            raise UnsupportedByTarget(message, target=self.name) from None
        except TargetError as exc:
            raise self.error(exc.message, status=exc.status) from None

    def parse(self, data: dict[str, Any], parser: Callable[[dict[str, Any]], T]) -> T:
        """Run a response parser; a body of the wrong shape is a retryable upstream fault. A
        reply that repeats the key has it redacted before any grader, cache or cassette sees it."""
        try:
            result = parser(data)
        except TargetError as exc:
            exc.message = self.redact(f"{self.kind} target '{self.name}': {exc.message}")
            exc.args = (exc.message,)
            exc.target = self.name
            raise
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise self.error(
                f"unexpected response shape ({type(exc).__name__}: {exc})", retryable=True
            ) from None
        if isinstance(result, CompletionResponse):
            result.text = self.redact(result.text)
        return result

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        raise NotImplementedError

    async def aclose(self) -> None:
        plain, self._plain = self._plain, {}
        clients, self._clients = self._clients, {}
        current = _running_loop()
        for loop, client in plain.items():
            if loop is current:
                client.close()
            elif not loop.is_closed() and loop.is_running():
                loop.call_soon_threadsafe(client.close)
        for (loop, _), shards in clients.items():
            for shard in shards:
                if loop is current:
                    await shard.aclose()
                elif not loop.is_closed() and loop.is_running():
                    asyncio.run_coroutine_threadsafe(shard.aclose(), loop)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every client: loading the CA bundle costs ~0.1 s each."""
    return httpx.create_ssl_context()


@functools.cache
def _plain_context() -> ssl.SSLContext:
    """For a client of a plain-HTTP base URL: it never needs TLS, and this context trusts no
    certificate, so a TLS connection through it fails closed instead of loading the CA bundle."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def iter_dicts(value: Any) -> Iterator[dict[str, Any]]:
    for item in value or []:
        if isinstance(item, dict):
            yield item
