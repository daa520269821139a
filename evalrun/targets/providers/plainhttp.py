"""A lean HTTP/1.1 client for targets at a plain ``http://`` URL (a local model server, a
loopback fake): one write per request, keep-alive connections, nothing else.

Every judge call runs on the runner's event loop, where httpx's layers (request and response
models, connection pool, anyio streams) cost ~1 ms of CPU per call, more than the rest of the
call (docs/performance.md). ``https`` URLs, URLs with credentials in them, and any URL while a
proxy is configured in the environment keep going through httpx (``HttpTarget``).
"""

from __future__ import annotations

import asyncio
import os
import urllib.parse
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from evalrun.errors import EvalrunError
from evalrun.targets.providers._httpx import httpx

#: the most a response's status line and headers may take; a longer head is refused
MAX_HEAD_BYTES = 64 * 1024
#: the most a response body may take
MAX_BODY_BYTES = 64 * 1024 * 1024
#: what httpx honours from the environment for an ``http://`` URL (``trust_env``)
_PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


class PlainHttpError(EvalrunError):
    """The connection failed, or the answer is not HTTP/1.x this client can read."""


def usable_for(url: str) -> bool:
    """True for a plain-HTTP URL without credentials while no proxy is configured."""
    if not url.startswith("http://") or any(os.environ.get(v) for v in _PROXY_VARIABLES):
        return False
    return "@" not in urllib.parse.urlsplit(url).netloc


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()

    def close(self) -> None:
        self.writer.close()


class PlainHttpClient:
    """Keep-alive connections of one event loop, per host and port; at most ``max_idle`` of
    them are kept between calls (the target's concurrency limit bounds those in use)."""

    def __init__(self, connect_timeout: float, max_idle: int) -> None:
        self.connect_timeout = connect_timeout
        self.max_idle = max_idle
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._idle_count = 0

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], params: Mapping[str, str] | None
    ) -> httpx.Response:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname or "", parts.port or 80
        target = parts.path or "/"
        query = "&".join(filter(None, [parts.query, urllib.parse.urlencode(params or {})]))
        if query:
            target += "?" + query
        request = _request_bytes(target, parts.netloc, body, headers)
        key = (host, port)
        connection = self._take(key) or await self._connect(host, port)
        try:
            connection.writer.write(request)
            response, keep = await _read_response(connection.reader)
        except BaseException:
            connection.close()
            raise
        if keep and self._idle_count < self.max_idle:
            self._idle.setdefault(key, []).append(connection)
            self._idle_count += 1
        else:
            connection.close()
        return response

    def _take(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            self._idle_count -= 1
            if connection.usable():
                return connection
            connection.close()
        return None

    async def _connect(self, host: str, port: int) -> _Connection:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=MAX_HEAD_BYTES), self.connect_timeout
            )
        except OSError as exc:  # a connect timeout stays a timeout, as httpx's ConnectTimeout
            raise PlainHttpError(exc.strerror or str(exc) or type(exc).__name__) from None
        return _Connection(reader, writer)

    def close(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()
        self._idle_count = 0


def _request_bytes(target: str, host: str, body: bytes, headers: Mapping[str, str]) -> bytes:
    lines = [
        f"POST {target} HTTP/1.1",
        f"Host: {host}",
        "Accept: */*",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    ]
    for name, value in headers.items():
        if any(c in name + value for c in "\r\n\0") or not name or ":" in name:
            raise PlainHttpError(f"header {name[:40]!r} cannot be sent")
        lines.append(f"{name}: {value}")
    try:
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError:
        raise PlainHttpError("a header is not latin-1 text") from None
    return head + body


async def _read_response(reader: asyncio.StreamReader) -> tuple[httpx.Response, bool]:
    """The response and whether its connection can carry another request."""
    try:
        while True:
            status, version, fields = _parse_head(await reader.readuntil(b"\r\n\r\n"))
            if status >= 200:
                break  # 1xx answers (100 Continue, 103 Early Hints) precede the real one
        headers = httpx.Headers(fields)
        connection = headers.get("connection", "").lower()
        keep = version == "HTTP/1.1" and "close" not in connection
        if status in (204, 304):
            content = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            content = await _read_chunked(reader)
        elif "content-length" in headers:
            length = int(headers["content-length"])
            if not 0 <= length <= MAX_BODY_BYTES:
                raise PlainHttpError(f"a body of {length} bytes")
            content = await reader.readexactly(length)
        else:  # the body runs to the end of the connection
            content = await reader.read(MAX_BODY_BYTES + 1)
            while len(content) <= MAX_BODY_BYTES and not reader.at_eof():
                content += await reader.read(MAX_BODY_BYTES + 1 - len(content))
            if len(content) > MAX_BODY_BYTES:
                raise PlainHttpError("a body over the size limit")
            keep = False
    except asyncio.IncompleteReadError:
        raise PlainHttpError("the server closed the connection mid-response") from None
    except asyncio.LimitOverrunError:
        raise PlainHttpError("a response head over the size limit") from None
    except ValueError as exc:
        raise PlainHttpError(f"a response that is not HTTP/1.x ({exc})") from None
    content = _decoded(content, headers.get("content-encoding", ""))
    if "content-encoding" in headers:  # the body is decoded now
        del headers["content-encoding"]
    return httpx.Response(status, headers=headers, content=content), keep


def _parse_head(head: bytes) -> tuple[int, str, list[tuple[str, str]]]:
    lines = head[:-4].decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise ValueError(f"status line {lines[0][:60]!r}")
    code = rest.partition(" ")[0]
    if len(code) != 3 or not code.isdigit():
        raise ValueError(f"status line {lines[0][:60]!r}")
    fields = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise ValueError(f"header line {line[:60]!r}")
        fields.append((name, value.strip()))
    return int(code), version, fields


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        length = int(line.split(b";", 1)[0].strip(), 16)
        if length == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                pass
            return b"".join(chunks)
        size += length
        if size > MAX_BODY_BYTES:
            raise PlainHttpError("a body over the size limit")
        chunks.append(await reader.readexactly(length))
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("a chunk without its CRLF")


def _decoded(content: bytes, encoding: str) -> bytes:
    """The body as sent before ``Content-Encoding`` (servers may compress unasked)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return content
    if encoding in ("gzip", "x-gzip", "deflate"):
        try:
            wbits = zlib.MAX_WBITS | 32 if encoding != "deflate" else zlib.MAX_WBITS
            return zlib.decompressobj(wbits).decompress(content, MAX_BODY_BYTES)
        except zlib.error as exc:
            raise PlainHttpError(f"a {encoding} body that does not decompress ({exc})") from None
    raise PlainHttpError(f"a body in {encoding!r} encoding")
