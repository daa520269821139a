"""The viewer's HTTP app: the pages (one shell, drawn by the shipped script) and the JSON API
they read (docs/viewer.md, "API"). It only reads: the index and the bundles it points to.

Runs are named by their index id, never by a path, so no request can make the viewer read a
file the index does not point to.
"""

from __future__ import annotations

import json
import math
import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from evalrun.viewer import catalog
from evalrun.viewer.bundles import MAX_PAGE, case_page, run_head
from evalrun.viewer.gate import LoopbackGate
from evalrun.viewer.state import Problem, Viewer

#: The shipped assets, by the name in their URL, and their media types.
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
SHELL = "index.html"
#: The most runs one comparison may hold.
MAX_COMPARED = 8


class AsciiJSON(JSONResponse):
    """JSON with every non-ASCII character escaped: text from a bundle may hold lone
    surrogates, which UTF-8 cannot encode but a ``\\u`` escape can carry."""

    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(content, ensure_ascii=True, allow_nan=False).encode("ascii")
        except ValueError:  # a NaN or infinity read from a bundle: JSON has no such number
            return json.dumps(_finite(content), ensure_ascii=True).encode("ascii")


def _finite(value: Any) -> Any:
    """``value`` with every NaN and infinity replaced by None (shown as "–")."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _asset(name: str) -> bytes:
    return resources.files("evalrun.viewer").joinpath("static").joinpath(name).read_bytes()


def _error(status: int, message: str) -> AsciiJSON:
    return AsciiJSON({"error": message}, status_code=status)


def create_app(index: Path) -> LoopbackGate:
    """The viewer over the run index at ``index``, behind the loopback gate."""
    viewer = Viewer(index=index.resolve())
    app = FastAPI(
        title="evalrun view",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        default_response_class=AsciiJSON,
    )
    shell = _asset(SHELL)
    assets = {name: _asset(name) for name in ASSETS}

    @app.exception_handler(Problem)
    async def problem(_: Request, exc: Problem) -> Response:
        return _error(exc.status, exc.message)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ())[1:]) or "request"
        return _error(400, f"{where}: {first.get('msg', 'invalid')}")

    @app.exception_handler(sqlite3.Error)
    async def unreadable(_: Request, exc: sqlite3.Error) -> Response:
        return _error(500, f"cannot read the run index {viewer.index} ({exc})")

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> Response:
        return _error(exc.status_code, str(exc.detail))

    def page() -> Response:
        return Response(shell, media_type="text/html; charset=utf-8")

    app.get("/", include_in_schema=False)(page)
    app.get("/run/{run_id}", include_in_schema=False)(page)
    app.get("/compare", include_in_schema=False)(page)
    app.get("/history", include_in_schema=False)(page)

    @app.get("/static/{name}")
    def asset(name: str) -> Response:
        if name not in assets:
            raise Problem(404, "no such asset")
        return Response(assets[name], media_type=ASSETS[name])

    @app.get("/api/runs")
    def runs(
        eval: str | None = None,
        target: str | None = None,
        verdict: str | None = Query(None, pattern="^(passed|failed)$"),
        q: str | None = None,
        start: int = Query(0, ge=0),
        count: int = Query(50, ge=1, le=catalog.MAX_RUNS_PAGE),
    ) -> dict[str, Any]:
        where = catalog.RunFilter(eval=eval, target=target, verdict=verdict, text=q)
        return catalog.run_list(viewer.index, where, start=start, count=count)

    @app.get("/api/runs/{run_id}")
    def run_page(run_id: int) -> dict[str, Any]:
        run = viewer.run(run_id)
        view = viewer.view(run)
        return run_head(run, view)

    @app.get("/api/runs/{run_id}/cases")
    def cases(
        run_id: int,
        start: int = Query(0, ge=0),
        count: int = Query(50, ge=1, le=MAX_PAGE),
        problems: bool = False,
    ) -> dict[str, Any]:
        view = viewer.view(viewer.run(run_id))
        return case_page(view, start=start, count=count, problems_only=problems)

    @app.get("/api/compare")
    def compare(
        run: list[int] = Query(...),
        start: int = Query(0, ge=0),
        count: int = Query(100, ge=1, le=MAX_PAGE),
    ) -> dict[str, Any]:
        if not 2 <= len(run) <= MAX_COMPARED:
            raise Problem(400, f"compare takes 2 to {MAX_COMPARED} runs, not {len(run)}")
        chosen = [viewer.run(run_id) for run_id in run]
        found = viewer.compare(chosen)
        rows = found.rows
        return {
            "runs": [catalog.run_row(r) for r in chosen],
            "pairings": [pairing.to_dict() for pairing in found.pairings],
            "regressions": sum(row.regressed for row in rows),
            "start": start,
            "total": len(rows),
            "rows": [row.to_dict() for row in rows[start : start + count]],
        }

    @app.get("/api/history")
    def history(eval: str = Query(..., min_length=1)) -> dict[str, Any]:
        return catalog.history(viewer.index, eval)

    return LoopbackGate(app)
