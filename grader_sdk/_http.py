"""A minimal HTTP/1.1 client over a plain socket, for the loopback judge proxy.

Why not ``http.client``: importing it pulls in ``email.parser``, ``calendar`` and ``ssl`` (20-40 ms),
a large share of a short grader process. The proxy speaks plain HTTP on loopback, so this needs
only: keep-alive on a few pooled connections, Content-Length, chunked and close-delimited bodies,
and per-operation socket timeouts (the ``http.client`` semantics).

It uses the ``_socket`` extension that ``socket`` wraps: the wrapper's import (its enums and
``selectors``) cost every grader process ~4 ms of its first judge call, and this client needs
none of what it adds (docs/performance.md).
"""

from __future__ import annotations

import _socket
import os

MAX_LINE = 65536
MAX_HEADERS = 100
MAX_IDLE = 8
_HEX = frozenset(b"0123456789abcdefABCDEF")


class HTTPProtocolError(Exception):
    """The server's answer is not valid HTTP/1.x (or uses a feature this client does not speak)."""


class RemoteClosed(ConnectionError):
    """The server closed the connection before the response was complete."""


class Response:
    """A complete response; ``headers`` has lower-case names, repeated ones joined by ', '."""

    __slots__ = ("body", "headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body


def parse_url(url: str) -> tuple[str, int, str]:
    """``http://host[:port][/prefix]`` -> (host, port, prefix without a trailing slash)."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme == "https":
        raise ValueError(
            f"https proxy URLs are not supported ({url!r}): the judge proxy serves plain HTTP "
            "on loopback, e.g. http://127.0.0.1:PORT"
        )
    if not sep or scheme != "http":
        raise ValueError(f"proxy URL is not an http:// URL: {url!r}")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in rest):
        raise ValueError(f"proxy URL contains spaces or control characters: {url!r}")
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, path = rest[:end], rest[end:].partition("?")[0].partition("#")[0]
    if "@" in authority:
        raise ValueError(f"proxy URL must not carry credentials: {url!r}")
    if authority.startswith("["):
        host, bracket, port_part = authority[1:].partition("]")
        if not bracket or (port_part and not port_part.startswith(":")):
            raise ValueError(f"proxy URL has a malformed IPv6 host: {url!r}")
        port_text = port_part[1:]
    elif authority.count(":") > 1:
        raise ValueError(f"an IPv6 proxy host needs brackets, e.g. http://[::1]:PORT: {url!r}")
    else:
        host, _, port_text = authority.partition(":")
    if not host:
        raise ValueError(f"proxy URL has no host: {url!r}")
    if not port_text:
        port = 80
    elif port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536:
        port = int(port_text)
    else:
        raise ValueError(f"proxy URL has an invalid port {port_text!r}: {url!r}")
    return host, port, path.rstrip("/")


class Connection:
    """One socket plus its read buffer; serves one request at a time."""

    __slots__ = ("buf", "received", "requests", "sock", "timeout")

    def __init__(self, sock: _socket.socket, timeout: float | None) -> None:
        self.sock = sock
        self.timeout = timeout
        self.buf = bytearray()
        self.received = 0
        self.requests = 0

    @classmethod
    def open(cls, host: str, port: int, timeout: float | None) -> Connection:
        # A bytes host keeps getaddrinfo from importing the idna codec.
        name: str | bytes = host.encode("ascii") if host.isascii() else host
        error: OSError | None = None
        for family, kind, proto, _, address in _socket.getaddrinfo(
            name, port, 0, _socket.SOCK_STREAM
        ):
            sock = _socket.socket(family, kind, proto)
            try:
                sock.settimeout(timeout)
                sock.connect(address)
                sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            return cls(sock, timeout)
        raise error or OSError(f"no address found for {host!r}")

    def close(self) -> None:
        self.sock.close()

    def is_stale(self) -> bool:
        """True if the server closed this idle connection (or sent bytes nobody asked for)."""
        if self.buf:
            return True
        try:
            self.sock.setblocking(False)
            try:
                self.sock.recv(1, _socket.MSG_PEEK)
            finally:
                self.sock.settimeout(self.timeout)
        except BlockingIOError:
            return False
        except OSError:
            return True
        return True

    def exchange(self, request: bytes) -> tuple[Response, bool]:
        """Send one request and read its response; also say whether the connection is reusable."""
        self.requests += 1
        self.received = 0
        self.sock.sendall(request)
        while True:
            version, status, reason = self._status_line()
            headers = self._headers()
            if not 100 <= status < 200 or status == 101:
                break
        keep = _keeps_alive(version, headers.get("connection", ""))
        if status in (204, 304):
            body = b""
        elif "transfer-encoding" in headers:
            codings = [c.strip().lower() for c in headers["transfer-encoding"].split(",")]
            if codings != ["chunked"]:
                raise HTTPProtocolError(
                    f"unsupported transfer coding {headers['transfer-encoding']!r}"
                )
            body = self._chunked()
        elif "content-length" in headers:
            body = self._exact(_content_length(headers["content-length"]))
        else:
            body, keep = self._until_close(), False
        return Response(status, reason, headers, body), keep

    # reading ---------------------------------------------------------------------------------
    def _fill(self) -> bool:
        data = self.sock.recv(262144)
        self.received += len(data)
        self.buf += data
        return bool(data)

    def _line(self) -> bytes:
        start = 0
        while True:
            end = self.buf.find(b"\n", start)
            if end >= 0:
                line = bytes(self.buf[: end + 1])
                del self.buf[: end + 1]
                return line
            if len(self.buf) > MAX_LINE:
                raise HTTPProtocolError("response line too long")
            start = len(self.buf)
            if not self._fill():
                raise RemoteClosed("the proxy closed the connection before answering")

    def _exact(self, size: int) -> bytes:
        while len(self.buf) < size:
            if not self._fill():
                raise RemoteClosed("the proxy closed the connection in the middle of a response")
        data = bytes(self.buf[:size])
        del self.buf[:size]
        return data

    def _until_close(self) -> bytes:
        while self._fill():
            pass
        data = bytes(self.buf)
        self.buf.clear()
        return data

    def _status_line(self) -> tuple[str, int, str]:
        line = self._line().decode("latin-1").rstrip("\r\n")
        version, _, rest = line.partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise HTTPProtocolError(f"malformed status line {line[:80]!r}")
        return version, int(code), reason.strip()

    def _headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        last = ""
        for _ in range(MAX_HEADERS + 1):
            line = self._line().decode("latin-1").rstrip("\r\n")
            if not line:
                return headers
            if line[0] in " \t" and last:
                headers[last] += " " + line.strip()
                continue
            name, colon, value = line.partition(":")
            name = name.strip().lower()
            if not colon or not name:
                raise HTTPProtocolError(f"malformed header line {line[:80]!r}")
            value = value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
            last = name
        raise HTTPProtocolError(f"more than {MAX_HEADERS} response headers")

    def _chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size_text = self._line().split(b";", 1)[0].strip()
            if not size_text or not _HEX.issuperset(size_text):
                raise HTTPProtocolError(f"malformed chunk size {size_text[:20]!r}")
            size = int(size_text, 16)
            if size == 0:
                break
            parts.append(self._exact(size))
            if self._exact(2) != b"\r\n":
                raise HTTPProtocolError("chunk not followed by CRLF")
        for _ in range(MAX_HEADERS + 1):
            if self._line() in (b"\r\n", b"\n"):
                return b"".join(parts)
        raise HTTPProtocolError("too many trailer lines")


class HttpClient:
    """Requests to one host:port over pooled keep-alive connections.

    Sequential requests reuse one connection; concurrent ones (threads) each take their own, so
    no socket is ever shared by two requests in flight. ``list.pop``/``append`` are atomic, so
    the pool needs no lock.
    """

    def __init__(self, host: str, port: int, *, timeout: float | None) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.host_header = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._idle: list[Connection] = []

    def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None = None
    ) -> Response:
        """One request; a reused connection the server closed meanwhile is replaced once."""
        wire = self._encode(method, target, headers, body)
        conn = self._take()
        try:
            try:
                response, keep = conn.exchange(wire)
            except ConnectionError:
                if conn.requests == 1 or conn.received:
                    raise
                conn.close()
                conn = Connection.open(self.host, self.port, self.timeout)
                response, keep = conn.exchange(wire)
        except BaseException:
            conn.close()
            raise
        if keep and len(self._idle) < MAX_IDLE:
            self._idle.append(conn)
        else:
            conn.close()
        return response

    def close(self) -> None:
        """Close the idle connections (requests in flight close theirs when done)."""
        while self._idle:
            try:
                self._idle.pop().close()
            except IndexError:
                break

    def __del__(self) -> None:
        self.close()

    def _take(self) -> Connection:
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                return Connection.open(self.host, self.port, self.timeout)
            if not conn.is_stale():
                return conn
            conn.close()

    def _encode(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None
    ) -> bytes:
        lines = [f"{method} {target or '/'} HTTP/1.1", f"Host: {self.host_header}"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise ValueError(f"invalid HTTP header {name!r}: line breaks are not allowed")
            lines.append(f"{name}: {value}")
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        lines.append("Connection: keep-alive")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head + body if body else head


_SHARED: dict[tuple[int, str, int, float | None], HttpClient] = {}


def shared_client(host: str, port: int, *, timeout: float | None) -> HttpClient:
    """The process's pool for ``host:port``, so the clients a grader makes (one per case in
    stream mode) reuse warm connections: a case then skips connect and the proxy's accept.
    Keyed by process too, so a forked child never writes on its parent's sockets."""
    key = (os.getpid(), host, port, timeout)
    client = _SHARED.get(key)
    if client is None:
        client = _SHARED[key] = HttpClient(host, port, timeout=timeout)
    return client


def _keeps_alive(version: str, connection: str) -> bool:
    tokens = {t.strip().lower() for t in connection.split(",")}
    if "close" in tokens:
        return False
    return version != "HTTP/1.0" or "keep-alive" in tokens


def _content_length(value: str) -> int:
    values = {v.strip() for v in value.split(",")}
    if len(values) != 1:
        raise HTTPProtocolError(f"conflicting Content-Length values {value!r}")
    text = values.pop()
    if not text.isascii() or not text.isdigit():
        raise HTTPProtocolError(f"malformed Content-Length {value!r}")
    return int(text)
