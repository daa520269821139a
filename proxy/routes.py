"""The proxy's routes (docs/proxy.md, "Routes"): each is ``(authorization, body) -> Reply``,
past the gate's grant checks, answering with the models of ``proxy.wire`` (serialised by
``proxy.replies``). Every upstream call goes through :meth:`ProxyRoutes._call`, which records it
exactly once."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from evalrun.judgecall import JudgeCall
from evalrun.safetext import repaired_note
from evalrun.targets import (
    CompletionRequest,
    CompletionResponse,
    RefusedField,
    Target,
    TargetError,
    TargetTimeout,
    ToolsUnsupported,
    UnsupportedByTarget,
)
from proxy import openai_compat
from proxy.gate import GrantGate
from proxy.grants import Grant, InFlight
from proxy.replies import ErrorReply, body, invoke_response
from proxy.wire import (
    ChatCompletionRequest,
    InfoResponse,
    InvokeBatchRequest,
    InvokeBatchResponse,
    InvokeBody,
    InvokeItemError,
    InvokeResponse,
)

_MODELS_PREFIX = "/v1/models/"
JSON = b"application/json"
EVENT_STREAM = b"text/event-stream"
#: the most requests one /invokeBatch may hold, and how many of them run upstream at once
MAX_BATCH = 1000
BATCH_PARALLEL = 16
#: errors that end a whole batch: the grant is gone (revoked, or the proxy is stopping)
_BATCH_ENDING = frozenset({"unauthorized", "shutting_down"})
#: AgentV's routes; an OPTIONS request to one answers 204 (docs/proxy.md, "AgentV's proxy")
AGENTV_PATHS = frozenset({"/info", "/invoke", "/invokeBatch"})
logger = logging.getLogger("evalrun.proxy")

#: (status, body) or (status, body, content type); JSON unless a content type is given
Reply = tuple[int, bytes] | tuple[int, bytes, bytes]
Handler = Callable[[str | None, bytes], Awaitable[Reply]]


def _parse(model: type[BaseModel], raw: bytes) -> Any:
    try:
        return model.model_validate_json(raw or b"null")
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: "
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors(include_url=False, include_input=False)[:5]
        )
        raise ErrorReply(400, "bad_request", f"invalid request body: {problems}") from None


def _judge_call(
    grant: Grant,
    target: str,
    request: CompletionRequest,
    question: str,
    latency_ms: float,
    response: CompletionResponse | None = None,
    *,
    error_code: str | None = None,
    warnings: tuple[str, ...] = (),
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
        warnings=list(warnings),
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


def _ignored_keys_note(item: InvokeBody) -> tuple[str, ...]:
    """The warning a call record carries for the unknown request keys it ignored."""
    keys = item.ignored_keys
    if not keys:
        return ()
    return (f"ignored unknown request keys: {', '.join(repr(k[:50]) for k in keys[:10])}",)


class ProxyRoutes:
    """The routes as plain ``(authorization header, body) -> (status, JSON bytes)``."""

    def __init__(
        self, gate: GrantGate, resolve_target: Callable[[str], Target], target_names: list[str]
    ) -> None:
        self.gate = gate
        self.registry = gate.registry
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

            async def retrieve_model(authorization: str | None, raw: bytes) -> Reply:
                return await self.model(authorization, model_id)

            return retrieve_model
        return handler

    # --- helpers --------------------------------------------------------------------------------

    def _pick(self, grant: Grant, name: str | None, selector: str, *, lenient: bool = False) -> str:
        """The target a request names, or the grant's default. ``lenient`` (OpenAI route): a
        model that is not a configured target means the default, since clients send their own.
        ``selector`` is the key the client named it with, so AgentV's clients read their word
        (``Unknown provider ...`` or ``Unknown target ...``)."""
        if name is None or (lenient and not name):
            return grant.default_target
        if name in grant.allowed:
            return name
        if lenient and name not in self._known:
            return grant.default_target
        raise ErrorReply(
            400,
            "unknown_target",
            f"Unknown {selector} '{name[:100]}': not available to this grader "
            f"(allowed: {', '.join(grant.allowed)})",
            allowed=list(grant.allowed),
        )

    def _pick_item(self, grant: Grant, item: InvokeBody) -> str:
        return self._pick(grant, item.target, item.selector)

    def _calls_or_one(self, name: str) -> int:
        try:
            return self._calls(name)
        except ErrorReply:  # a target that cannot be built says so when it is called
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
                raise ErrorReply(502, "upstream_error", message) from None
            self._resolved[name] = target
        return target

    def _redact(self, text: str) -> str:
        return self.registry.redactor.text(text) or ""

    async def _call(
        self,
        grant: Grant,
        name: str,
        request: CompletionRequest,
        question: str,
        warnings: tuple[str, ...] = (),
    ) -> tuple[CompletionResponse, float]:
        """One reserved upstream call, cancellable through the grant, recorded exactly once:
        answered, failed, or abandoned when the grader leaves first (docs/proxy.md)."""
        target = self._target(name)
        flight = InFlight(_judge_call(grant, name, request, question, 0.0, warnings=warnings))
        flight.abandoned.status = "abandoned"
        task = asyncio.ensure_future(target.complete(request))
        grant.in_flight[task] = flight
        error: ErrorReply
        try:
            response = await task
        except asyncio.CancelledError:
            if _cancelling():  # the client hung up: the call is charged, nobody reads it
                task.cancel()
                self.registry.abandon(grant, flight)
                raise
            if self.registry.closing:
                error = ErrorReply(503, "shutting_down", "the judge proxy is shutting down")
            else:
                error = ErrorReply(401, "unauthorized", "the grant was revoked")
        except ToolsUnsupported as exc:
            error = ErrorReply(400, "tools_unsupported", self._redact(exc.message))
        except TargetTimeout as exc:
            error = ErrorReply(504, "upstream_timeout", self._redact(exc.message))
        except UnsupportedByTarget as exc:
            error = ErrorReply(422, "unsupported_request", self._redact(exc.message))
        except TargetError as exc:
            error = ErrorReply(502, "upstream_error", self._redact(exc.message))
        except Exception as exc:
            error = ErrorReply(502, "upstream_error", self._redact(str(exc) or type(exc).__name__))
        else:
            latency = (time.perf_counter() - flight.started) * 1000
            if self.registry.settle(flight):
                record = _judge_call(
                    grant, name, request, question, latency, response, warnings=warnings
                )
                self.registry.record(grant, record)
            return response, latency
        finally:
            grant.in_flight.pop(task, None)
        if self.registry.settle(flight):
            latency = (time.perf_counter() - flight.started) * 1000
            record = _judge_call(
                grant, name, request, question, latency, error_code=error.code, warnings=warnings
            )
            self.registry.record(grant, record)
        raise error

    async def _invoke_one(self, grant: Grant, name: str, item: InvokeBody) -> InvokeResponse:
        request = CompletionRequest(
            messages=[{"role": "user", "content": item.question}],
            system_prompt=item.system_prompt,
            temperature=item.temperature,
            max_tokens=item.max_tokens,
            response_format=item.response_format,
            task=item.task,
        )
        response, latency = await self._call(
            grant, name, request, item.question, _ignored_keys_note(item)
        )
        return invoke_response(name, response, latency, openai_compat.finish_reason(response))

    # --- AgentV's routes ------------------------------------------------------------------------

    async def info(self, authorization: str | None, raw: bytes) -> Reply:
        grant = self.gate.authorize(authorization)
        info = InfoResponse(
            target_name=grant.default_target,
            provider_label=grant.default_target,
            call_count=grant.used,
            max_calls=grant.max_calls,
            available_targets=list(grant.allowed),
            available_provider_labels=list(grant.allowed),
            calls_per_request=self._calls_or_one(grant.default_target),
        )
        return 200, body(info)

    async def invoke(self, authorization: str | None, raw: bytes) -> Reply:
        grant = self.gate.authorize(authorization)
        item = _parse(InvokeBody, raw)
        name = self._pick_item(grant, item)
        self.gate.reserve(grant, self._calls(name))
        return 200, body(await self._invoke_one(grant, name, item))

    async def invoke_batch(self, authorization: str | None, raw: bytes) -> Reply:
        """At most MAX_BATCH calls, refused whole when the valid ones pass the remaining budget;
        at most BATCH_PARALLEL run at once. As AgentV's proxy does, a request naming a target
        the grant may not use, or whose call fails, answers in its own place (``rawText``
        ``Error: ...`` with ``error``, ``code``, ``status``, ``index``) and the others still
        run; when the grant goes (revoked, the proxy stopping) or the client hangs up, the
        calls not started yet are never made nor charged."""
        grant = self.gate.authorize(authorization)
        items = _parse(InvokeBatchRequest, raw).requests
        if len(items) > MAX_BATCH:
            raise ErrorReply(
                400,
                "batch_too_large",
                f"a batch may hold at most {MAX_BATCH} requests, this one has {len(items)}",
                limit=MAX_BATCH,
                requested=len(items),
            )
        answers: list[InvokeResponse | InvokeItemError | None] = [None] * len(items)
        names: list[str | None] = [None] * len(items)
        for index, item in enumerate(items):
            try:
                names[index] = self._pick_item(grant, item)
            except ErrorReply as exc:
                answers[index] = InvokeItemError.of(exc, index)
        costs = [self._calls(name) if name is not None else 0 for name in names]
        reservation = self.gate.reserve_batch(grant, sum(costs))
        pending = iter(
            (index, item, name)
            for index, (item, name) in enumerate(zip(items, names, strict=True))
            if name
        )
        ended: list[ErrorReply] = []

        async def worker() -> None:
            for index, item, name in pending:
                if ended or not self.registry.start(grant, reservation, costs[index]):
                    return
                try:
                    answers[index] = await self._invoke_one(grant, name, item)
                except ErrorReply as exc:
                    if exc.code in _BATCH_ENDING:
                        ended.append(exc)
                        return
                    answers[index] = InvokeItemError.of(exc, index)

        try:
            await asyncio.gather(*(worker() for _ in range(min(len(items), BATCH_PARALLEL))))
        finally:
            self.registry.release(grant, reservation)
        if ended:
            raise ended[0]
        done = [answer for answer in answers if answer is not None]
        if len(done) != len(items):
            raise ErrorReply(401, "unauthorized", "the grant was revoked")
        return 200, body(InvokeBatchResponse(responses=done))

    # --- the OpenAI surface ---------------------------------------------------------------------

    async def chat_completions(self, authorization: str | None, raw: bytes) -> Reply:
        grant = self.gate.authorize(authorization)
        chat = _parse(ChatCompletionRequest, raw)
        try:
            request, question = openai_compat.completion_request(chat)
        except RefusedField as exc:
            raise ErrorReply(400, "bad_request", exc.message, param=exc.field) from None
        name = self._pick(grant, chat.model, "target", lenient=True)
        target = self._target(name)
        if request.uses_tools and not getattr(target, "supports_tools", False):
            refusal = ToolsUnsupported(name, getattr(target, "kind", "unknown kind"))
            raise ErrorReply(400, "tools_unsupported", refusal.message)
        self.gate.reserve(grant, self._calls(name))
        response, _ = await self._call(grant, name, request, question)
        if chat.stream:
            include_usage = bool(chat.stream_options and chat.stream_options.include_usage)
            stream = openai_compat.event_stream(name, response, include_usage=include_usage)
            return 200, stream, EVENT_STREAM
        return 200, body(openai_compat.completion(name, response))

    async def models(self, authorization: str | None, raw: bytes) -> Reply:
        grant = self.gate.authorize(authorization)
        return 200, body(openai_compat.model_list(grant.allowed))

    async def model(self, authorization: str | None, model_id: str) -> Reply:
        grant = self.gate.authorize(authorization)
        if model_id not in grant.allowed:
            raise ErrorReply(
                404,
                "model_not_found",
                f"the model '{model_id[:100]}' is not a target this grader may use "
                f"(allowed: {', '.join(grant.allowed)})",
            )
        return 200, body(openai_compat.model_list([model_id]).data[0])

    async def run(
        self, handler: Handler, authorization: str | None, raw: bytes, *, openai: bool = False
    ) -> tuple[int, bytes, bytes]:
        """(status, body, content type); errors in the route's shape (``openai``: /v1)."""
        try:
            reply = await handler(authorization, raw)
        except ErrorReply as exc:
            return exc.status, exc.body(openai=openai), JSON
        except Exception:
            logger.exception("judge proxy: unexpected error in %s", handler.__name__)
            error = ErrorReply(500, "internal_error", "unexpected error in the judge proxy")
            return error.status, error.body(openai=openai), JSON
        return (reply[0], reply[1], reply[2] if len(reply) == 3 else JSON)
