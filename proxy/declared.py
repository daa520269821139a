"""The proxy's routes declared to FastAPI: ``/openapi.json``, JSON 404/405 answers, and a
second, equivalent way in for anything the fast path in ``proxy.app`` does not match.

Built on the first request that needs it, so a run whose graders only call the five routes
never imports FastAPI (docs/performance.md, "Judge proxy").
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from proxy.replies import error_body
from proxy.wire import (
    OPENAI_PREFIX,
    AgentVErrorResponse,
    ChatCompletionRequest,
    ChatCompletionResponse,
    InfoResponse,
    InvokeBatchRequest,
    InvokeBatchResponse,
    InvokeBody,
    InvokeResponse,
    ModelEntry,
    ModelList,
    OpenAIErrorResponse,
)

if TYPE_CHECKING:
    from proxy.routes import ProxyRoutes

_ERROR_STATUSES: tuple[tuple[int, str], ...] = (
    (400, "bad request, unknown target, or tools to a target without tools"),
    (401, "missing, wrong or revoked token"),
    (403, "Host or Origin header is not loopback"),
    (413, "body too large"),
    (422, "the target cannot answer this kind of request"),
    (429, "max_calls exceeded"),
    (502, "upstream failure"),
    (503, "the proxy is shutting down"),
    (504, "upstream timeout"),
)
#: one server-sent event: ``data`` is a chat.completion.chunk in JSON, or ``[DONE]``
_SSE_EVENT = {
    "type": "object",
    "properties": {"data": {"type": "string"}, "event": {"type": "string"}},
    "required": ["data"],
}
_ERRORS: dict[int | str, Any] = {
    code: {"model": AgentVErrorResponse, "description": what} for code, what in _ERROR_STATUSES
}
#: the /v1 routes answer errors in OpenAI's shape
_OPENAI_ERRORS: dict[int | str, Any] = {
    code: {"model": OpenAIErrorResponse, "description": what}
    for code, what in (*_ERROR_STATUSES, (404, "not one of the allowed targets"))
}

#: path, method, request model (None: no body), response model, summary
_ROUTES: list[tuple[str, str, type[BaseModel] | None, type[BaseModel], str]] = [
    ("/info", "GET", None, InfoResponse, "The caller's grant: target, calls used, budget"),
    ("/invoke", "POST", InvokeBody, InvokeResponse, "One judge call (counts when reserved)"),
    (
        "/invokeBatch",
        "POST",
        InvokeBatchRequest,
        InvokeBatchResponse,
        "Judge calls run concurrently; refused whole if over budget; a request that fails "
        "answers its error in its place (rawText 'Error: ...', error, code, status, index)",
    ),
    (
        "/v1/chat/completions",
        "POST",
        ChatCompletionRequest,
        ChatCompletionResponse,
        "OpenAI-compatible chat completion; model names a target; stream: true answers "
        "text/event-stream",
    ),
    ("/v1/models", "GET", None, ModelList, "OpenAI-compatible list of the allowed targets"),
    ("/v1/models/{model}", "GET", None, ModelEntry, "One allowed target as an OpenAI model"),
]


def build_fastapi(routes: ProxyRoutes, target_names: list[str]) -> FastAPI:
    """A FastAPI app serving ``routes`` under the same paths, with the OpenAPI document."""
    app = FastAPI(
        title="evalrun judge proxy",
        version="1",
        docs_url=None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )

    @app.exception_handler(StarletteHTTPException)
    async def _on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "bad_request")
        openai = request.url.path.startswith(OPENAI_PREFIX)
        body = error_body(code, str(exc.detail), status=exc.status_code, openai=openai)
        headers = {**(exc.headers or {}), "x-should-retry": "false"}
        return Response(body, exc.status_code, headers, media_type="application/json")

    def endpoint_for(method: str, path: str) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            handler = routes.lookup(method, request.url.path)
            assert handler is not None
            status, body, content_type = await routes.run(
                handler,
                request.headers.get("authorization"),
                await request.body(),
                openai=path.startswith(OPENAI_PREFIX),
            )
            headers = {"x-should-retry": "false"} if status >= 400 else None
            return Response(body, status, headers, media_type=content_type.decode())

        return endpoint

    for path, method, _, response_model, summary in _ROUTES:
        openai = path.startswith(OPENAI_PREFIX)
        responses = dict(_OPENAI_ERRORS if openai else _ERRORS)
        if path == "/v1/chat/completions":
            responses[200] = {"content": {"text/event-stream": {"schema": _SSE_EVENT}}}
        app.add_api_route(
            path,
            endpoint_for(method, path),
            methods=[method],
            response_model=response_model,
            responses=responses,
            summary=summary,
            name=path.strip("/").replace("/", "_").replace("{", "").replace("}", "") or "root",
        )

    bodies = {(path, method.lower()): model for path, method, model, _, _ in _ROUTES if model}

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _openapi(app, bodies, list(target_names))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _openapi(
    app: FastAPI, bodies: dict[tuple[str, str], type[BaseModel]], target_names: list[str]
) -> dict[str, Any]:
    """FastAPI's document plus what it cannot see: request bodies read by hand, bearer auth,
    and the configured target names."""
    schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
    components = schema.setdefault("components", {})
    models = components.setdefault("schemas", {})
    for (path, method), model in bodies.items():
        model_schema = model.model_json_schema(
            by_alias=True, ref_template="#/components/schemas/{model}", mode="validation"
        )
        models.update(model_schema.pop("$defs", {}))
        models[model.__name__] = model_schema
        operation = schema["paths"][path][method]
        operation["requestBody"] = {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
            },
        }
    # /invoke refuses a target name that is not configured; a batch answers it in its place
    # (docs/proxy.md), so its requests take any name
    batch_item = copy.deepcopy(models["InvokeBody"])
    models["InvokeBatchRequest"]["properties"]["requests"]["items"] = batch_item
    for selector in ("target", "provider"):
        prop = models["InvokeBody"]["properties"][selector]
        prop["anyOf"] = [{"type": "string", "enum": list(target_names)}, {"type": "null"}]
    components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    for operations in schema["paths"].values():
        for operation in operations.values():
            operation["security"] = [{"bearer": []}]
    return schema
