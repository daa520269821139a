"""Hostile clients of the judge proxy, over real loopback sockets: tokens that are almost right
or belong to another run, malformed and oversized requests, slow-loris connections, Host
header tricks, and a stampede of 100 requests (500 under ``slow``) on a 10-call budget. The
judge is evalrun's own ``mock`` target. (Plain bad tokens, revocation, Origin/CORS and the
basic body limit are in tests/test_proxy.py.)"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from evalrun.targets.base import CompletionRequest, CompletionResponse
from evalrun.targets.config import TargetConfig
from evalrun.targets.providers.mock import MockTarget
from tests.proxy_helpers import client, error_body, run, serve


class CountingMock(MockTarget):
    """evalrun's mock judge, counting the calls that reach it."""

    def __init__(self, name: str = "judge", latency_ms: float = 0.0) -> None:
        super().__init__(
            TargetConfig(name=name, kind="mock", default='{"ok": true}', latency_ms=latency_ms)
        )
        self.calls = 0

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.calls += 1
        return await super().complete(request)


async def raw_exchange(port: int, data: bytes, *, timeout: float = 10) -> tuple[int | None, bytes]:
    """Send raw bytes, read until the server closes; (status or None, body). A reset is None."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        reply = await asyncio.wait_for(reader.read(), timeout)
    except (ConnectionResetError, BrokenPipeError):
        return None, b""
    finally:
        writer.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 "):
        return None, reply
    return int(head.split()[1]), body


def request_bytes(
    method: str, path: str, *, host: bytes = b"127.0.0.1", headers: bytes = b"", body: bytes = b""
) -> bytes:
    framed = b"Content-Length" in headers or b"Transfer-Encoding" in headers
    length = b"Content-Length: %d\r\n" % len(body) if body and not framed else b""
    return (
        f"{method} {path} HTTP/1.1\r\n".encode()
        + b"Host: "
        + host
        + b"\r\nConnection: close\r\n"
        + length
        + headers
        + b"\r\n"
        + body
    )


def test_tokens_of_another_run_and_near_misses_are_refused_everywhere() -> None:
    judge_a, judge_b = CountingMock(), CountingMock()

    async def scenario() -> None:
        async with serve(judge_a) as proxy_a, serve(judge_b) as proxy_b:
            mine = proxy_a.grant("judge", max_calls=100)
            theirs = proxy_b.grant("judge", max_calls=100)
            token = mine.token
            near_misses = [
                token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1 :]
                for i in range(len(token))
            ]
            wrong = [theirs.token, token.swapcase(), token + " " + token, "x" * 8192, *near_misses]
            routes = [
                ("GET", "/info", None),
                ("POST", "/invoke", {"question": "q"}),
                ("POST", "/invokeBatch", {"requests": [{"question": "q"}]}),
                ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "q"}]}),
                ("GET", "/v1/models", None),
            ]
            async with client(proxy_a) as http:
                for bad in wrong:
                    for method, path, body in routes:
                        reply = await http.request(
                            method, path, json=body, headers={"Authorization": f"Bearer {bad}"}
                        )
                        assert reply.status_code == 401, (path, bad)
                        assert error_body(reply)["code"] == "unauthorized"
                        assert token not in reply.text
                good = await http.get("/info", headers={"Authorization": f"Bearer {token}"})
                assert good.status_code == 200
            async with client(proxy_b, token) as http:
                assert (await http.post("/invoke", json={"question": "q"})).status_code == 401
            assert (mine.used, theirs.used) == (0, 0)
            # non-ASCII bytes in the header reach the token check, which refuses them
            status, _ = await raw_exchange(
                proxy_a.port,
                request_bytes(
                    "GET",
                    "/info",
                    headers=b"Authorization: Bearer \xe9\xff" + token.encode() + b"\r\n",
                ),
            )
            assert status == 401
        assert (judge_a.calls, judge_b.calls) == (0, 0)

    run(scenario)


def test_malformed_framing_and_oversized_requests_are_refused_and_the_proxy_carries_on() -> None:
    judge = CountingMock()

    async def scenario() -> None:
        async with serve(judge, max_body_bytes=10_000) as proxy:
            grant = proxy.grant("judge", max_calls=100)
            auth = f"Authorization: Bearer {grant.token}\r\n".encode()
            port = proxy.port
            assert port is not None
            big = json.dumps({"question": "x" * 20_000}).encode()
            cases: list[tuple[bytes, set[int | None]]] = [
                (request_bytes("POST", "/invoke", headers=auth, body=big), {413}),
                (request_bytes("POST", "/invokeBatch", headers=auth, body=big), {413}),
                (request_bytes("POST", "/v1/chat/completions", headers=auth, body=big), {413}),
                (request_bytes("POST", "/no-such-route", headers=auth, body=big), {413}),
                (request_bytes("POST", "/openapi.json", headers=auth, body=big), {413}),
                # Content-Length that overflows, is negative, or comes twice
                (
                    request_bytes(
                        "POST",
                        "/invoke",
                        headers=auth + b"Content-Length: 99999999999999999999999\r\n",
                        body=b"{}",
                    ),
                    {400, 413},
                ),
                (
                    request_bytes(
                        "POST", "/invoke", headers=auth + b"Content-Length: -1\r\n", body=b"{}"
                    ),
                    {400},
                ),
                (
                    request_bytes(
                        "POST",
                        "/invoke",
                        headers=auth + b"Content-Length: 2\r\nContent-Length: 5\r\n",
                        body=b"{}",
                    ),
                    {400},
                ),
                # a chunked body that keeps growing past the limit
                (
                    request_bytes(
                        "POST",
                        "/invoke",
                        headers=auth + b"Transfer-Encoding: chunked\r\n",
                        body=b"".join(b"1000\r\n" + b"x" * 0x1000 + b"\r\n" for _ in range(4))
                        + b"0\r\n\r\n",
                    ),
                    {413},
                ),
                # not JSON, not UTF-8, lone surrogates, deep nesting
                (request_bytes("POST", "/invoke", headers=auth, body=b"\xff\xfe{"), {400}),
                (
                    request_bytes("POST", "/invoke", headers=auth, body=b'{"question": "\\ud800"}'),
                    {400},
                ),
                (
                    request_bytes("POST", "/invoke", headers=auth, body=b"[" * 5000 + b"]" * 5000),
                    {400},
                ),
                (
                    request_bytes(
                        "POST",
                        "/invoke",
                        headers=auth,
                        body=b'{"question": "q", "task": ' + b'{"a":' * 1000 + b"1" + b"}" * 1001,
                    ),
                    {200, 400},
                ),
            ]
            for raw, allowed in cases:
                status, body = await raw_exchange(port, raw)
                assert status in allowed, (raw[:120], status, body[:200])
                if status is not None and status >= 400 and body.startswith(b"{"):
                    path = raw.split(b" ", 2)[1].decode()
                    assert error_body(body, path)["code"] in ("payload_too_large", "bad_request")
            async with client(proxy, grant.token) as http:
                assert (
                    await http.post("/invoke", json={"question": "still here?"})
                ).status_code == 200
        assert judge.calls <= 2  # the nested task (if accepted) and the final call

    run(scenario)


def test_slow_loris_connections_do_not_block_other_clients() -> None:
    judge = CountingMock()

    async def scenario() -> None:
        async with serve(judge) as proxy:
            grant = proxy.grant("judge", max_calls=100)
            port = proxy.port
            assert port is not None
            body = json.dumps({"question": "sent one byte at a time"}).encode()
            slow_request = request_bytes(
                "POST",
                "/invoke",
                headers=f"Authorization: Bearer {grant.token}\r\n".encode(),
                body=body,
            )
            parked: list[int] = []
            all_parked = asyncio.Event()
            others_done = asyncio.Event()

            async def slow_client(stop_at: int) -> tuple[int | None, bytes]:
                """Dribbles bytes, parks mid-request until the others finish, then completes."""
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                try:
                    for i, byte in enumerate(slow_request):
                        if i == stop_at:
                            parked.append(i)
                            if len(parked) == len(cut_points) * 10:
                                all_parked.set()
                            await others_done.wait()
                        writer.write(bytes([byte]))
                        await writer.drain()
                        await asyncio.sleep(0.002)
                    reply = await asyncio.wait_for(reader.read(), 10)
                finally:
                    writer.close()
                head, _, rest = reply.partition(b"\r\n\r\n")
                return int(head.split()[1]), rest

            # stalled in the request line, in the headers, and in the body
            cut_points = [5, 40, len(slow_request) - 10]
            slow = [asyncio.create_task(slow_client(n)) for n in cut_points * 10]
            await asyncio.wait_for(all_parked.wait(), 30)
            async with client(proxy, grant.token) as http:
                replies = await asyncio.wait_for(
                    asyncio.gather(
                        *(http.post("/invoke", json={"question": f"q{i}"}) for i in range(20))
                    ),
                    30,
                )
            assert [r.status_code for r in replies] == [200] * 20
            assert not any(t.done() for t in slow), "a slow client finished before the others"
            others_done.set()
            finished = await asyncio.gather(*slow)
            assert [status for status, _ in finished] == [200] * len(slow)
            assert judge.calls == 20 + len(slow)

    run(scenario)


def test_an_endless_header_is_cut_off() -> None:
    async def scenario() -> None:
        async with serve(CountingMock()) as proxy:
            port = proxy.port
            assert port is not None
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            answer = asyncio.create_task(reader.read())
            token = proxy.grant("judge", max_calls=1).token
            writer.write(
                b"GET /info HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                + f"Authorization: Bearer {token}\r\nX-Junk: ".encode()
            )
            try:
                for _ in range(64):  # up to 4 MiB, 64 KiB at a time, while nobody answers
                    writer.write(b"a" * 65536)
                    await writer.drain()
                    await asyncio.sleep(0.001)
                    if answer.done():
                        break
                else:
                    writer.write(b"\r\n\r\n")
                    await writer.drain()
            except (ConnectionResetError, BrokenPipeError):
                pass
            finally:
                reply = await asyncio.wait_for(answer, 10)
                writer.close()
            refused = not reply.startswith(b"HTTP/1.1 2")
            assert refused
            async with client(proxy, token) as http:
                assert (await http.get("/info")).status_code == 200

    run(scenario)


def test_non_loopback_host_headers_are_refused() -> None:
    judge = CountingMock()

    async def scenario() -> None:
        async with serve(judge) as proxy:
            grant = proxy.grant("judge", max_calls=100)
            port = proxy.port
            assert port is not None
            auth = f"Authorization: Bearer {grant.token}\r\n".encode()
            for host in (
                b"127.0.0.1.evil.example",
                b"localhost.evil.example",
                b"127.0.0.1@evil.example",
                b"evil.example#127.0.0.1",
                b"localhost.",
                b"[::ffff:127.0.0.1]",
                b"[::ffff:8.8.8.8]",
                b"2130706433",
                b"0x7f.0.0.1",
                b"127.1",
                b"",
            ):
                for method, path in (
                    ("GET", "/info"),
                    ("POST", "/invoke"),
                    ("GET", "/openapi.json"),
                ):
                    status, body = await raw_exchange(
                        port,
                        request_bytes(
                            method,
                            path,
                            host=host,
                            headers=auth,
                            body=b'{"question": "q"}' if method == "POST" else b"",
                        ),
                    )
                    assert status == 403, (host, path, status)
                    assert error_body(body)["code"] == "bad_request"
            # two Host headers (one loopback, one not): refused by the HTTP parser or the proxy
            for first, second in ((b"evil.example", b"127.0.0.1"), (b"127.0.0.1", b"evil.example")):
                raw = request_bytes(
                    "GET", "/info", host=first, headers=b"Host: " + second + b"\r\n" + auth
                )
                status, _ = await raw_exchange(port, raw)
                assert status in (400, 403), (first, second)
            # HTTP/1.0 may omit Host: no Host is not loopback
            status, _ = await raw_exchange(port, b"GET /info HTTP/1.0\r\n" + auth + b"\r\n")
            assert status == 403
        assert judge.calls == 0

    run(scenario)


@pytest.mark.parametrize("stampede_size", [100, pytest.param(500, marks=pytest.mark.slow)])
def test_concurrent_requests_spend_exactly_max_calls(stampede_size: int) -> None:
    judge = CountingMock(latency_ms=20)
    other = CountingMock("other-judge", latency_ms=20)

    async def scenario() -> list[httpx.Response]:
        async with serve(judge, other) as proxy:
            grant = proxy.grant("judge", max_calls=10)
            bystander = proxy.grant("judge", max_calls=10, allowed=["other-judge"])
            bodies = [
                ("/invoke", {"question": "q"}),
                ("/v1/chat/completions", {"messages": [{"role": "user", "content": "q"}]}),
                ("/invokeBatch", {"requests": [{"question": "q"}]}),
                ("/invoke", {"question": "q", "target": "judge"}),
            ]
            limits = httpx.Limits(max_connections=stampede_size, max_keepalive_connections=0)
            # One event loop serves every fresh connection and makes them: on a loaded machine a
            # connect can wait longer than the helper's 10 s, and a client timeout is not what
            # this test is about. A hang still fails it.
            patient = httpx.Timeout(300)
            async with (
                client(proxy, grant.token, limits=limits, timeout=patient) as http,
                client(proxy, bystander.token, timeout=patient) as side,
            ):
                stampede = asyncio.gather(
                    *(
                        http.post(path, json=body)
                        for i in range(stampede_size)
                        for path, body in [bodies[i % 4]]
                    )
                )
                # another grader's budget is its own, even while the stampede runs
                beside = asyncio.gather(
                    *(
                        side.post("/invoke", json={"question": "q", "target": "other-judge"})
                        for _ in range(12)
                    )
                )
                replies, side_replies = await asyncio.gather(stampede, beside)
            assert grant.used == 10 and len(grant.records) == 10
            assert sorted(r.status_code for r in side_replies) == [200] * 10 + [429] * 2
            return list(replies)

    replies = run(scenario)
    statuses = [r.status_code for r in replies]
    assert statuses.count(200) == 10 and statuses.count(429) == stampede_size - 10
    assert judge.calls == 10 and other.calls == 10
    for reply in replies:
        if reply.status_code == 429:
            error = error_body(reply)
            assert (error["code"], error["limit"], error["used"]) == ("max_calls_exceeded", 10, 10)
