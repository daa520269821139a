"""The SDK's socket HTTP client against scripted loopback servers: keep-alive, framing, closes,
timeouts and errors, byte for byte."""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from grader_sdk import (
    ProxyError,
    ProxyNotConfigured,
    ProxyUnavailable,
    TargetClient,
    UpstreamError,
)
from grader_sdk._http import parse_url
from tests.sdk_helpers import ROOT

TOKEN = "tok-123"


@dataclass
class Seen:
    """One request as the server read it; ``conn`` numbers the connection it came on."""

    conn: int
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Peer:
    """The server side of one accepted connection."""

    sock: socket.socket
    index: int
    server: RawServer
    buf: bytearray = field(default_factory=bytearray)

    def read_request(self) -> Seen | None:
        """The next request, or None once the client closed the connection."""
        while b"\r\n\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                return None
            self.buf += data
        head, _, rest = bytes(self.buf).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ")
        assert version == "HTTP/1.1"
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            assert name.lower() not in headers, f"repeated header {name}"
            headers[name.lower()] = value.strip()
        size = int(headers.get("content-length", "0"))
        while len(rest) < size:
            rest += self.sock.recv(65536)
        self.buf = bytearray(rest[size:])
        seen = Seen(self.index, method, target, headers, rest[:size])
        self.server.seen.append(seen)
        return seen

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)


Handler = Callable[[Peer], None]


class RawServer:
    """A loopback TCP server whose per-connection behaviour is a plain function."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1") -> None:
        self.handler = handler
        self.seen: list[Seen] = []
        self.connections = 0
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.host = f"[{host}]" if ":" in host else host
        self.port = self.sock.getsockname()[1]
        self.peers: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def client(self, timeout: float = 10) -> TargetClient:
        return TargetClient(self.url, TOKEN, timeout=timeout)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self.peers.append(sock)
            peer = Peer(sock, self.connections, self)
            threading.Thread(target=self._serve, args=(peer,), daemon=True).start()

    def _serve(self, peer: Peer) -> None:
        try:
            self.handler(peer)
        except OSError:
            pass
        finally:
            peer.sock.close()

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.sock.close()
        for sock in self.peers:
            sock.close()


def reply(payload: Any, status: str = "200 OK", *headers: str) -> bytes:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    head = [f"HTTP/1.1 {status}", "Content-Type: application/json", *headers]
    if not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def answer(text: str) -> dict[str, Any]:
    return {"rawText": text, "output": [{"role": "assistant", "content": text}]}


def echo(peer: Peer) -> None:
    """Keep-alive server: answers every request with its question."""
    while (seen := peer.read_request()) is not None:
        question = json.loads(seen.body)["question"] if seen.body else "info"
        peer.send(reply(answer(question)))


def test_sequential_calls_share_one_keep_alive_connection() -> None:
    with RawServer(echo) as server:
        client = server.client()
        texts = [client.invoke(f"q{i}").raw_text for i in range(3)]
        assert texts == ["q0", "q1", "q2"]
        assert server.connections == 1
        first = server.seen[0]
    assert (first.method, first.target) == ("POST", "/invoke")
    assert first.headers["host"] == f"127.0.0.1:{server.port}"
    assert first.headers["authorization"] == f"Bearer {TOKEN}"
    assert first.headers["content-type"] == "application/json"
    assert first.headers["content-length"] == str(len(first.body))
    assert first.headers["connection"] == "keep-alive"
    assert json.loads(first.body) == {"question": "q0"}


def test_the_clients_of_one_process_share_its_connections() -> None:
    """A stream-mode grader makes a client per case (a new token each time): the cases still
    reuse one warm connection, and each request carries its own case's token."""
    with RawServer(echo) as server:
        url = f"http://{server.host}:{server.port}"
        texts = [TargetClient(url, f"tok-case-{i}").invoke(f"q{i}").raw_text for i in range(3)]
        assert texts == ["q0", "q1", "q2"]
        assert server.connections == 1
        tokens = [seen.headers["authorization"] for seen in server.seen]
    assert tokens == [f"Bearer tok-case-{i}" for i in range(3)]


def test_get_has_no_body_and_the_url_prefix_is_kept() -> None:
    def info(peer: Peer) -> None:
        while peer.read_request() is not None:
            peer.send(reply({"targetName": "j", "callCount": 1, "maxCalls": 3}))

    with RawServer(info) as server:
        result = TargetClient(server.url + "/proxy/", TOKEN).info()
        seen = server.seen[0]
    assert (result.target_name, result.remaining) == ("j", 2)
    assert (seen.method, seen.target, seen.body) == ("GET", "/proxy/info", b"")
    assert "content-length" not in seen.headers and "content-type" not in seen.headers


def test_chunked_responses_with_mixed_case_headers_keep_the_connection_usable() -> None:
    def chunked(peer: Peer) -> None:
        while (seen := peer.read_request()) is not None:
            body = json.dumps(answer(json.loads(seen.body)["question"] * 3)).encode()
            cut = len(body) // 3
            peer.send(b"HTTP/1.1 200 OK\r\nTRANSFER-encoding: Chunked\r\ncontent-TYPE: x\r\n\r\n")
            peer.send(b"%x\r\n%s\r\n" % (cut, body[:cut]))
            peer.send(b"%X;ext=1\r\n%s\r\n" % (len(body) - cut, body[cut:]))
            peer.send(b"0\r\nX-Trailer: yes\r\n\r\n")

    with RawServer(chunked) as server:
        client = server.client()
        assert [client.invoke(q).raw_text for q in ("ab", "cd")] == ["ababab", "cdcdcd"]
        assert server.connections == 1


def test_a_body_split_across_many_writes_is_read_whole() -> None:
    big = "x" * 300_000

    def slow(peer: Peer) -> None:
        while peer.read_request() is not None:
            data = reply(answer(big))
            for start in range(0, len(data), 7000):
                peer.send(data[start : start + 7000])

    with RawServer(slow) as server:
        client = server.client()
        assert client.invoke("q").raw_text == big
        assert client.invoke("q").raw_text == big
        assert server.connections == 1


def test_interim_1xx_responses_are_skipped() -> None:
    def interim(peer: Peer) -> None:
        while peer.read_request() is not None:
            peer.send(b"HTTP/1.1 100 Continue\r\n\r\n" + reply(answer("final")))

    with RawServer(interim) as server:
        assert server.client().invoke("q").raw_text == "final"


def test_a_server_closing_an_idle_connection_is_replaced_transparently() -> None:
    def one_per_connection(peer: Peer) -> None:
        seen = peer.read_request()
        assert seen is not None
        peer.send(reply(answer(f"conn {peer.index}")))

    with RawServer(one_per_connection) as server:
        client = server.client()
        assert [client.invoke("q").raw_text for _ in range(3)] == ["conn 1", "conn 2", "conn 3"]
        assert len(server.seen) == 3


def test_an_idle_connection_the_server_closed_is_not_sent_on_again() -> None:
    closed = threading.Event()

    def answer_then_close(peer: Peer) -> None:
        if peer.read_request() is not None:
            peer.send(reply(answer(f"conn {peer.index}")))
            peer.sock.shutdown(socket.SHUT_WR)
            closed.set()
            while peer.read_request() is not None:
                pass

    with RawServer(answer_then_close) as server:
        client = server.client()
        assert client.invoke("a").raw_text == "conn 1"
        assert closed.wait(10)
        assert client.invoke("b").raw_text == "conn 2"
        assert [s.conn for s in server.seen] == [1, 2]


def test_a_close_racing_the_next_request_is_retried_once_on_a_new_connection() -> None:
    def drop_second(peer: Peer) -> None:
        if peer.read_request() is None:
            return
        peer.send(reply(answer(f"conn {peer.index}")))
        if peer.index == 1 and peer.read_request() is not None:
            peer.sock.shutdown(socket.SHUT_RDWR)
            return
        echo(peer)

    with RawServer(drop_second) as server:
        client = server.client()
        assert client.invoke("a").raw_text == "conn 1"
        assert client.invoke("b").raw_text == "conn 2"
        assert [(s.conn, s.body) for s in server.seen[1:]] == [
            (1, b'{"question": "b"}'),
            (2, b'{"question": "b"}'),
        ]


def test_a_fresh_connection_closed_without_an_answer_is_not_retried() -> None:
    def hang_up(peer: Peer) -> None:
        if peer.read_request() is not None:
            peer.sock.shutdown(socket.SHUT_RDWR)

    with RawServer(hang_up) as server:
        with pytest.raises(ProxyUnavailable, match="closed the connection"):
            server.client().invoke("q")
        assert len(server.seen) == 1


def test_a_truncated_body_is_an_error_not_a_retry() -> None:
    def truncate(peer: Peer) -> None:
        seen = peer.read_request()
        if peer.index == 1 and seen is not None:
            peer.send(reply(answer("one")))
            if peer.read_request() is not None:
                peer.send(reply(answer("two"))[:-5])
                peer.sock.shutdown(socket.SHUT_RDWR)

    with RawServer(truncate) as server:
        client = server.client()
        client.invoke("a")
        with pytest.raises(ProxyUnavailable, match="middle of a response"):
            client.invoke("b")
        assert server.connections == 1


@pytest.mark.parametrize(
    "response",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
        b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s",
    ],
    ids=["connection-close", "http-1.0"],
)
def test_responses_that_end_the_connection_are_not_reused(response: bytes) -> None:
    body = json.dumps(answer("ok")).encode()

    def once(peer: Peer) -> None:
        while peer.read_request() is not None:
            peer.send(response % (len(body), body))

    with RawServer(once) as server:
        client = server.client()
        assert [client.invoke(q).raw_text for q in ("a", "b")] == ["ok", "ok"]
        assert server.connections == 2


def test_a_close_delimited_body_is_read_to_the_end() -> None:
    def until_close(peer: Peer) -> None:
        if peer.read_request() is not None:
            peer.send(b"HTTP/1.1 200 OK\r\n\r\n" + json.dumps(answer("all of it")).encode())

    with RawServer(until_close) as server:
        client = server.client()
        assert client.invoke("q").raw_text == "all of it"
        assert client.invoke("q").raw_text == "all of it"
        assert server.connections == 2


def test_a_silent_server_times_out_and_the_next_call_reconnects() -> None:
    released = threading.Event()

    def first_hangs(peer: Peer) -> None:
        if peer.index == 1:
            peer.read_request()
            released.wait(10)
            return
        echo(peer)

    with RawServer(first_hangs) as server:
        client = server.client(timeout=0.3)
        with pytest.raises(ProxyUnavailable, match="timed out"):
            client.invoke("slow")
        released.set()
        assert client.invoke("fast").raw_text == "fast"
        assert server.connections == 2
        assert len(server.seen) == 2


def test_connection_refused_is_proxy_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ProxyUnavailable, match="cannot reach") as info:
        TargetClient(f"http://127.0.0.1:{port}", TOKEN, timeout=5).invoke("q")
    assert isinstance(info.value.__cause__, ConnectionRefusedError)


def test_ipv6_loopback_with_brackets() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        server = RawServer(echo, host="::1")
    except OSError:
        pytest.skip("no IPv6 loopback")
    with server:
        client = server.client()
        assert client.invoke("v6").raw_text == "v6"
        assert server.seen[0].headers["host"] == f"[::1]:{server.port}"


@pytest.mark.parametrize(
    ("body", "status", "cls", "message"),
    [
        (b"upstream is down", "502 Bad Gateway", UpstreamError, "upstream is down"),
        (b"<html>oops</html>", "500 Internal Server Error", ProxyError, "<html>oops</html>"),
        (b"", "500 Internal Server Error", ProxyError, "HTTP 500"),
    ],
)
def test_non_json_error_bodies(body: bytes, status: str, cls: type, message: str) -> None:
    def fail(peer: Peer) -> None:
        while peer.read_request() is not None:
            peer.send(reply(body, status))

    with RawServer(fail) as server, pytest.raises(cls, match=message) as info:
        server.client().invoke("q")
    assert type(info.value) is cls and info.value.code is None


@pytest.mark.parametrize(
    "response",
    [
        b"SMTP 200 OK\r\n\r\n",
        b"HTTP/1.1 2xx OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    ],
)
def test_malformed_responses_are_proxy_unavailable(response: bytes) -> None:
    def garbage(peer: Peer) -> None:
        if peer.read_request() is not None:
            peer.send(response)

    with RawServer(garbage) as server, pytest.raises(ProxyUnavailable, match="cannot reach"):
        server.client().invoke("q")


def test_concurrent_calls_use_separate_connections_then_pool_them() -> None:
    arrived = threading.Barrier(3, timeout=10)
    invokes = itertools.count()

    def answering(peer: Peer) -> None:
        while (seen := peer.read_request()) is not None:
            if next(invokes) < 3:
                arrived.wait()  # the first three are in flight at once
            peer.send(reply(answer(json.loads(seen.body)["question"])))

    with RawServer(answering) as server:
        client = server.client()
        with ThreadPoolExecutor(max_workers=3) as pool:
            texts = list(pool.map(lambda q: client.invoke(q).raw_text, ["a", "b", "c"]))
        assert texts == ["a", "b", "c"]
        assert server.connections == 3
        assert [client.invoke(q).raw_text for q in ("d", "e")] == ["d", "e"]
        assert server.connections == 3


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8080", ("127.0.0.1", 8080, "")),
        ("HTTP://localhost:9/", ("localhost", 9, "")),
        ("http://[::1]:5000/base/?x=1", ("::1", 5000, "/base")),
        ("http://example.test", ("example.test", 80, "")),
    ],
)
def test_url_parsing(url: str, expected: tuple[str, int, str]) -> None:
    assert parse_url(url) == expected


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://127.0.0.1:8443", "https proxy URLs are not supported"),
        ("ftp://127.0.0.1:21", "not an http:// URL"),
        ("127.0.0.1:80", "not an http:// URL"),
        ("http://::1:80", "needs brackets"),
        ("http://[::1:80", "malformed IPv6"),
        ("http://127.0.0.1:0", "invalid port"),
        ("http://127.0.0.1:99999", "invalid port"),
        ("http://127.0.0.1:x", "invalid port"),
        ("http://user:pw@127.0.0.1:80", "credentials"),
        ("http://:80", "no host"),
        ("http://127.0.0.1:80/a b", "spaces"),
    ],
)
def test_bad_urls_are_not_configured(url: str, message: str) -> None:
    with pytest.raises(ProxyNotConfigured, match=message):
        TargetClient(url, TOKEN)


def test_a_token_with_a_line_break_is_refused() -> None:
    with pytest.raises(ProxyNotConfigured, match="line break"):
        TargetClient("http://127.0.0.1:1", "tok\r\nX-Evil: 1")


def test_no_heavy_modules_are_imported_by_the_sdk_or_its_first_call() -> None:
    with RawServer(echo) as server:
        code = (
            "import sys\n"
            "before = set(sys.modules)\n"
            "import grader_sdk\n"
            "at_import = set(sys.modules) - before\n"
            f"grader_sdk.TargetClient({server.url!r}, 't').invoke('q')\n"
            "heavy = ('http', 'email', 'ssl', 'urllib', 'calendar', 'encodings.idna',\n"
            "         'socket', 'selectors')\n"
            "loaded = {m for m in set(sys.modules) - before if m.startswith(heavy)}\n"
            "print(sorted(loaded), '_socket' in at_import)\n"
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30
        )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "False"]
