"""The proxy's HTTP app: the grader-facing routes of docs/proxy.md over a ``GrantRegistry``.

Every judge call passes through here, so the five routes are served from one raw ASGI layer
(Host/Origin check, body cap, dispatch, JSON bytes out). Anything else (``/openapi.json``,
404/405 answers) goes to the same routes declared to FastAPI (``proxy.declared``), built on
first use: most runs never import FastAPI.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import BaseModel, ValidationError

from evalrun.judgecall import JudgeCall
from evalrun.safetext import repair, repaired_note
from evalrun.targets import (
    CompletionRequest,
    CompletionResponse,
    RefusedField,
    Target,
    TargetError,
    TargetTimeout,
    ToolsUnsupported,
    UnsupportedRequest,
)
from proxy import openai_compat
from proxy.grants import Grant, GrantRegistry, InFlight
from proxy.wire import OPENAI_PREFIX, ChatCompletionRequest, InvokeBatchRequest, InvokeRequest

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

_LOOPBACK_HOST = re.compile(rb"(?:127\.0\.0\.1|localhost|\[::1\])(?::\d{1,5})?", re.IGNORECASE)
_LOOPBACK_ORIGIN = re.compile(
    rb"https?://(?:127\.0\.0\.1|localhost|\[::1\])(?::\d{1,5})?", re.IGNORECASE
)
_JSON = b"application/json"
_EVENT_STREAM = b"text/event-stream"
#: every error answer is final (budget spent, evalrun's own retries done): OpenAI's SDKs
#: honour this header and do not repeat the request (docs/proxy.md)
_NO_RETRY_HEADER = (b"x-should-retry", b"false")
_MODELS_PREFIX = "/v1/models/"
#: the most requests one /invokeBatch may hold, and how many of them run upstream at once
MAX_BATCH = 1000
BATCH_PARALLEL = 16
logger = logging.getLogger("evalrun.proxy")

#: (status, body) or (status, body, content type); JSON unless a content type is given
Reply = tuple[int, bytes] | tuple[int, bytes, bytes]
Handler = Callable[[str | None, bytes], Awaitable[Reply]]


class ProxyError(Exception):
    """An error answer: HTTP status, a contract code, a message and extra fields (docs/proxy.md)."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def reply(self, *, openai: bool = False) -> tuple[int, bytes]:
        """AgentV's shape on its routes, ``{"error": "<message>", "code": ..., ...extra}``, so
        AgentV's SDKs show the text; OpenAI's (``{message, type, param, code}``) on /v1."""
        if openai:
            body = openai_compat.error_object(self.status, self.code, self.message, self.extra)
            return self.status, _dumps(body)
        return self.status, _dumps({"error": self.message, "code": self.code, **self.extra})


def _dumps(payload: Any) -> bytes:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode()
    except UnicodeEncodeError:  # targets repair their text; this keeps any other path answering
        return repair(text)[0].encode()


def _bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def _parse(model: type[BaseModel], body: bytes) -> Any:
    try:
        return model.model_validate_json(body or b"null")
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: "
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors(include_url=False, include_input=False)[:5]
        )
        raise ProxyError(400, "bad_request", f"invalid request body: {problems}") from None


def _invoke_payload(name: str, response: CompletionResponse, latency_ms: float) -> dict[str, Any]:
    usage = response.usage
    return {
        "output": [{"role": "assistant", "content": response.text}],
        "rawText": response.text,
        "tokenUsage": {
            "input": usage.input_tokens,
            "output": usage.output_tokens,
            "total": usage.input_tokens + usage.output_tokens,
        },
        "target": name,
        "cached": response.cached or response.replayed,
        "latencyMs": round(latency_ms, 3),
        "finishReason": openai_compat.finish_reason(response),
        "refusal": response.refusal or None,
    }


def _judge_call(
    grant: Grant,
    target: str,
    request: CompletionRequest,
    question: str,
    latency_ms: float,
    response: CompletionResponse | None = None,
    *,
    error_code: str | None = None,
) -> JudgeCall:
    """The record of one finished upstream call: answered (``response``) or failed
    (``error_code``). The registry redacts it when it keeps it."""
    record = JudgeCall(
        case_id=grant.case_id,
        grader=grant.grader,
        target=target,
        status="error" if response is None else "ok",
        latency_ms=round(latency_ms, 3),
        system_prompt=request.system_prompt,
        question=question,
        task=request.task,
        error_code=error_code,
    )
    if response is not None:
        record.response = response.text
        record.input_tokens = response.usage.input_tokens
        record.output_tokens = response.usage.output_tokens
        record.cached, record.replayed = response.cached, response.replayed
        record.cost_usd, record.panel = response.cost_usd, response.panel
        if response.repaired:
            record.warnings.append(repaired_note(response.repaired, "the judge's reply"))
    return record


def _cancelling() -> bool:
    """True when the handler itself is being cancelled (not just the upstream call)."""
    task = asyncio.current_task()
    cancelling: Callable[[], int] | None = getattr(task, "cancelling", None)
    return bool(cancelling and cancelling())


class ProxyRoutes:
    """The five routes as plain ``(authorization header, body) -> (status, JSON bytes)``."""

    def __init__(
        self,
        registry: GrantRegistry,
        resolve_target: Callable[[str], Target],
        target_names: list[str],
    ) -> None:
        self.registry = registry
        self._resolve_target = resolve_target
        self._known = set(target_names)
        self._resolved: dict[str, Target] = {}
        self.table: dict[tuple[str, str], Handler] = {
            ("GET", "/info"): self.info,
            ("POST", "/invoke"): self.invoke,
            ("POST", "/invokeBatch"): self.invoke_batch,
            ("POST", "/v1/chat/completions"): self.chat_completions,
            ("GET", "/v1/models"): self.models,
        }

    def lookup(self, method: str, path: str) -> Handler | None:
        """The handler of a route; ``GET /v1/models/{id}`` is the one route with a parameter."""
        handler = self.table.get((method, path))
        if handler is None and method == "GET" and path.startswith(_MODELS_PREFIX):
            model_id = path[len(_MODELS_PREFIX) :]

            async def retrieve_model(authorization: str | None, body: bytes) -> Reply:
                return await self.model(authorization, model_id)

            return retrieve_model
        return handler

    # --- helpers --------------------------------------------------------------------------------

    def _authorize(self, authorization: str | None) -> Grant:
        if self.registry.closing:
            raise ProxyError(503, "shutting_down", "the judge proxy is shutting down")
        grant = self.registry.lookup(_bearer(authorization))
        if grant is None:
            raise ProxyError(401, "unauthorized", "missing, invalid or revoked token")
        return grant

    def _pick(self, grant: Grant, name: str | None, *, lenient: bool = False) -> str:
        """The target a request names, or the grant's default. ``lenient`` (OpenAI route): a
        model that is not a configured target means the default, since clients send their own."""
        if name is None or (lenient and not name):
            return grant.default_target
        if name in grant.allowed:
            return name
        if lenient and name not in self._known:
            return grant.default_target
        raise ProxyError(
            400,
            "unknown_target",
            f"target '{name[:100]}' is not available to this grader "
            f"(allowed: {', '.join(grant.allowed)})",
            allowed=list(grant.allowed),
        )

    def _reserve(self, grant: Grant, n: int) -> None:
        if not self.registry.reserve(grant, n):
            self._refuse_over_budget(grant, n)

    @staticmethod
    def _refuse_over_budget(grant: Grant, n: int) -> NoReturn:
        extra: dict[str, Any] = {"limit": grant.max_calls, "used": grant.used}
        if n != 1:
            extra["requested"] = n
        raise ProxyError(
            429,
            "max_calls_exceeded",
            f"this grader may make {grant.max_calls} judge calls and has used {grant.used}",
            **extra,
        )

    def _calls_or_one(self, name: str) -> int:
        try:
            return self._calls(name)
        except ProxyError:  # a target that cannot be built says so when it is called
            return 1

    def _calls(self, name: str) -> int:
        """What one request to ``name`` costs the budget: a judge panel, one per upstream call."""
        return int(getattr(self._target(name), "calls_per_request", 1))

    def _target(self, name: str) -> Target:
        target = self._resolved.get(name)
        if target is None:
            try:
                target = self._resolve_target(name)
            except Exception as exc:
                message = self._redact(f"target '{name}': {exc}")
                raise ProxyError(502, "upstream_error", message) from None
            self._resolved[name] = target
        return target

    def _redact(self, text: str) -> str:
        return self.registry.redactor.text(text) or ""

    async def _call(
        self, grant: Grant, name: str, request: CompletionRequest, question: str
    ) -> tuple[CompletionResponse, float]:
        """One reserved upstream call, cancellable through the grant, recorded exactly once:
        answered, failed, or abandoned when the grader leaves first (docs/proxy.md)."""
        target = self._target(name)
        flight = InFlight(_judge_call(grant, name, request, question, 0.0))
        flight.abandoned.status = "abandoned"
        task = asyncio.ensure_future(target.complete(request))
        grant.in_flight[task] = flight
        error: ProxyError
        try:
            response = await task
        except asyncio.CancelledError:
            if _cancelling():  # the client hung up: the call is charged, nobody reads it
                task.cancel()
                self.registry.abandon(grant, flight)
                raise
            if self.registry.closing:
                error = ProxyError(503, "shutting_down", "the judge proxy is shutting down")
            else:
                error = ProxyError(401, "unauthorized", "the grant was revoked")
        except ToolsUnsupported as exc:
            error = ProxyError(400, "tools_unsupported", self._redact(exc.message))
        except TargetTimeout as exc:
            error = ProxyError(504, "upstream_timeout", self._redact(exc.message))
        except UnsupportedRequest as exc:
            error = ProxyError(422, "unsupported_request", self._redact(exc.message))
        except TargetError as exc:
            error = ProxyError(502, "upstream_error", self._redact(exc.message))
        except Exception as exc:
            error = ProxyError(502, "upstream_error", self._redact(str(exc) or type(exc).__name__))
        else:
            latency = (time.perf_counter() - flight.started) * 1000
            if self.registry.settle(flight):
                self.registry.record(
                    grant, _judge_call(grant, name, request, question, latency, response)
                )
            return response, latency
        finally:
            grant.in_flight.pop(task, None)
        if self.registry.settle(flight):
            latency = (time.perf_counter() - flight.started) * 1000
            record = _judge_call(grant, name, request, question, latency, error_code=error.code)
            self.registry.record(grant, record)
        raise error

    @staticmethod
    def _completion(item: InvokeRequest) -> CompletionRequest:
        return CompletionRequest(
            messages=[{"role": "user", "content": item.question}],
            system_prompt=item.system_prompt,
            temperature=item.temperature,
            max_tokens=item.max_tokens,
            response_format=item.response_format,
            task=item.task,
        )

    # --- routes ---------------------------------------------------------------------------------

    async def info(self, authorization: str | None, body: bytes) -> Reply:
        grant = self._authorize(authorization)
        return 200, _dumps(
            {
                "targetName": grant.default_target,
                "providerLabel": grant.default_target,
                "callCount": grant.used,
                "maxCalls": grant.max_calls,
                "availableTargets": list(grant.allowed),
                "availableProviderLabels": list(grant.allowed),
                # what one request to the default target costs: a judge panel, one per upstream call
                "callsPerRequest": self._calls_or_one(grant.default_target),
            }
        )

    async def invoke(self, authorization: str | None, body: bytes) -> Reply:
        grant = self._authorize(authorization)
        item = _parse(InvokeRequest, body)
        name = self._pick(grant, item.target)
        self._reserve(grant, self._calls(name))
        response, latency = await self._call(grant, name, self._completion(item), item.question)
        return 200, _dumps(_invoke_payload(name, response, latency))

    async def invoke_batch(self, authorization: str | None, body: bytes) -> Reply:
        """At most MAX_BATCH calls, refused whole when over the remaining budget; at most
        BATCH_PARALLEL run at once, so when the batch ends early (a failed call, the client
        gone, the grant revoked) the calls not started yet are never made nor charged."""
        grant = self._authorize(authorization)
        batch = _parse(InvokeBatchRequest, body)
        items = batch.requests
        if len(items) > MAX_BATCH:
            raise ProxyError(
                400,
                "batch_too_large",
                f"a batch may hold at most {MAX_BATCH} requests, this one has {len(items)}",
                limit=MAX_BATCH,
                requested=len(items),
            )
        names = [self._pick(grant, item.target) for item in items]
        costs = [self._calls(name) for name in names]
        reservation = self.registry.reserve_batch(grant, sum(costs))
        if reservation is None:
            self._refuse_over_budget(grant, sum(costs))
        results: list[tuple[CompletionResponse, float] | None] = [None] * len(items)
        pending = iter(enumerate(items))
        failures: list[ProxyError] = []

        async def worker() -> None:
            for index, item in pending:
                if failures or not self.registry.start(grant, reservation, costs[index]):
                    return
                try:
                    results[index] = await self._call(
                        grant, names[index], self._completion(item), item.question
                    )
                except ProxyError as exc:
                    exc.extra["index"] = index
                    failures.append(exc)
                    return

        try:
            await asyncio.gather(*(worker() for _ in range(min(len(items), BATCH_PARALLEL))))
        finally:
            self.registry.release(grant, reservation)
        if failures:
            raise min(failures, key=lambda exc: exc.extra["index"])
        if any(result is None for result in results):
            raise ProxyError(401, "unauthorized", "the grant was revoked")
        payloads = [
            _invoke_payload(name, *result)
            for name, result in zip(names, results, strict=True)
            if result is not None
        ]
        return 200, _dumps({"responses": payloads})

    async def chat_completions(self, authorization: str | None, body: bytes) -> Reply:
        grant = self._authorize(authorization)
        chat = _parse(ChatCompletionRequest, body)
        try:
            request, question = openai_compat.completion_request(chat)
        except RefusedField as exc:
            raise ProxyError(400, "bad_request", exc.message, param=exc.field) from None
        name = self._pick(grant, chat.model, lenient=True)
        target = self._target(name)
        if request.uses_tools and not getattr(target, "supports_tools", False):
            refusal = ToolsUnsupported(name, getattr(target, "kind", "unknown kind"))
            raise ProxyError(400, "tools_unsupported", refusal.message)
        self._reserve(grant, self._calls(name))
        response, _ = await self._call(grant, name, request, question)
        if chat.stream:
            include_usage = bool(chat.stream_options and chat.stream_options.include_usage)
            stream = openai_compat.event_stream(name, response, include_usage=include_usage)
            return 200, stream, _EVENT_STREAM
        return 200, _dumps(openai_compat.completion_json(name, response))

    async def models(self, authorization: str | None, body: bytes) -> Reply:
        grant = self._authorize(authorization)
        data = [openai_compat.model_object(name) for name in grant.allowed]
        return 200, _dumps({"object": "list", "data": data})

    async def model(self, authorization: str | None, model_id: str) -> Reply:
        grant = self._authorize(authorization)
        if model_id not in grant.allowed:
            raise ProxyError(
                404,
                "model_not_found",
                f"the model '{model_id[:100]}' is not a target this grader may use "
                f"(allowed: {', '.join(grant.allowed)})",
            )
        return 200, _dumps(openai_compat.model_object(model_id))

    async def run(
        self, handler: Handler, authorization: str | None, body: bytes, *, openai: bool = False
    ) -> tuple[int, bytes, bytes]:
        """(status, body, content type); errors in the route's shape (``openai``: /v1)."""
        try:
            reply = await handler(authorization, body)
        except ProxyError as exc:
            return (*exc.reply(openai=openai), _JSON)
        except Exception:
            logger.exception("judge proxy: unexpected error in %s", handler.__name__)
            error = ProxyError(500, "internal_error", "unexpected error in the judge proxy")
            return (*error.reply(openai=openai), _JSON)
        return (reply[0], reply[1], reply[2] if len(reply) == 3 else _JSON)


async def _send(
    send: Send, status: int, body: bytes, *, close: bool = False, content_type: bytes = _JSON
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if status >= 400:
        headers.append(_NO_RETRY_HEADER)
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _unless_disconnected(
    work: Awaitable[tuple[int, bytes, bytes]], receive: Receive
) -> tuple[int, bytes, bytes] | None:
    """``work``'s reply, or None when the client hung up first: then ``work`` is cancelled,
    and with it every upstream call it still had running or queued."""
    task = asyncio.ensure_future(work)

    async def hung_up() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    watch = asyncio.ensure_future(hung_up())
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()
    if task.cancelled() or not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None
    return task.result()


def error_body(code: str, message: str, *, status: int = 400, openai: bool = False) -> bytes:
    return ProxyError(status, code, message).reply(openai=openai)[1]


class ProxyApp:
    """The proxy's guard and fast path, in front of FastAPI for everything else."""

    def __init__(self, routes: ProxyRoutes, target_names: list[str], max_body_bytes: int) -> None:
        self.routes_impl = routes
        self.target_names = target_names
        self.max_body_bytes = max_body_bytes
        too_large = f"request body over {max_body_bytes} bytes"
        self.too_large_body = error_body("payload_too_large", too_large, status=413)
        self.too_large_openai_body = error_body(
            "payload_too_large", too_large, status=413, openai=True
        )
        self._declared: ASGIApp | None = None

    @property
    def declared(self) -> ASGIApp:
        """The FastAPI app of the same routes, built on first use."""
        if self._declared is None:
            from proxy.declared import build_fastapi

            self._declared = build_fastapi(self.routes_impl, self.target_names, error_body)
        return self._declared

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.declared(scope, receive, send)
            return
        host = origin = length = authorization = None
        chunked = False
        for name, value in scope["headers"]:
            if name == b"host":
                host = b"" if host is not None else value  # two Host headers: refuse
            elif name == b"authorization":
                authorization = value
            elif name == b"content-length":
                length = value
            elif name == b"origin":
                origin = value
            elif name == b"transfer-encoding":
                chunked = True
        openai = scope["path"].startswith(OPENAI_PREFIX)
        if host is None or not _LOOPBACK_HOST.fullmatch(host):
            body = error_body(
                "bad_request", "Host header must be a loopback address", status=403, openai=openai
            )
            await _send(send, 403, body, close=True)
            return
        if origin is not None and not _LOOPBACK_ORIGIN.fullmatch(origin):
            body = error_body(
                "bad_request", "cross-origin requests are not allowed", status=403, openai=openai
            )
            await _send(send, 403, body, close=True)
            return
        # A 413 keeps the connection: uvicorn discards the rest of the body, so the client reads
        # the error instead of a reset while it is still sending.
        limit = self.max_body_bytes
        too_large = self.too_large_openai_body if openai else self.too_large_body
        if chunked and length is not None:  # which one frames the body? (request smuggling)
            message = "both Transfer-Encoding and Content-Length are set"
            await _send(send, 400, error_body("bad_request", message, openai=openai), close=True)
            return
        if length is not None:
            if not length.isdigit():
                body = error_body("bad_request", "bad Content-Length", openai=openai)
                await _send(send, 400, body, close=True)
                return
            if int(length) > limit:
                await _send(send, 413, too_large)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _send(send, 413, too_large)
                return
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)

        handler = self.routes_impl.lookup(scope["method"], scope["path"])
        if handler is not None:
            auth = authorization.decode("latin-1") if authorization is not None else None
            reply = await _unless_disconnected(
                self.routes_impl.run(handler, auth, body, openai=openai), receive
            )
            if reply is not None:
                status, payload, content_type = reply
                await _send(send, status, payload, content_type=content_type)
            return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.declared(scope, replay, send)


def create_app(
    registry: GrantRegistry,
    resolve_target: Callable[[str], Target],
    target_names: list[str],
    *,
    max_body_bytes: int = 1_000_000,
) -> ProxyApp:
    """Build the proxy app. ``resolve_target`` maps a configured name to its (shared) target."""
    names = list(target_names)
    return ProxyApp(ProxyRoutes(registry, resolve_target, names), names, max_body_bytes)
