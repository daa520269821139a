"""The lean client for plain-HTTP targets (evalrun/targets/providers/plainhttp.py), through the
real ``openai`` provider, against a loopback server that answers with scripted raw bytes."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Callable

import pytest

from evalrun.targets import CompletionRequest, TargetError
from evalrun.targets.providers.openai import OpenAITarget
from evalrun.targets.providers.plainhttp import usable_for
from tests.targets_helpers import config


def _completion(text: str) -> bytes:
    message = {"role": "assistant", "content": text}
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    return json.dumps({**body, "usage": {"prompt_tokens": 5, "completion_tokens": 2}}).encode()


def _reply(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    head = [f"HTTP/1.1 {status}", "Content-Type: application/json", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _chunked(body: bytes, size: int = 7) -> bytes:
    parts = [
        b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size])
        for i in range(0, len(body), size)
    ]
    return b"".join(parts) + b"0\r\n\r\n"


class RawServer:
    """Answers request n (counted over all connections) with ``answer(n)``; None closes the
    connection instead, and so does having answered a request in ``close_after``."""

    def __init__(
        self, answer: Callable[[int], bytes | None], close_after: frozenset[int] = frozenset()
    ) -> None:
        self.answer = answer
        self.close_after = close_after
        self.connections = 0
        self.requests = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> RawServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for writer in self.writers:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                self.requests += 1
                answer = self.answer(self.requests)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if self.requests in self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


def _target(url: str) -> OpenAITarget:
    return OpenAITarget(config(model="m", base_url=f"{url}/v1", timeout=5), "sk-test")


async def _ask(target: OpenAITarget) -> str:
    return (await target.complete(CompletionRequest.from_prompt("q"))).text


def test_keep_alive_chunked_and_gzip_bodies_are_read() -> None:
    def answer(n: int) -> bytes:
        if n == 1:
            return _reply(_chunked(_completion("one")), "Transfer-Encoding: chunked")
        zipped = gzip.compress(_completion("two"))
        return _reply(zipped, f"Content-Length: {len(zipped)}", "Content-Encoding: gzip")

    async def main() -> tuple[list[str], int]:
        async with RawServer(answer) as server:
            target = _target(server.url)
            texts = [await _ask(target), await _ask(target)]
            await target.aclose()
            return texts, server.connections

    assert asyncio.run(main()) == (["one", "two"], 1)


def test_connection_close_and_a_body_to_the_end_of_the_connection() -> None:
    body = _completion("ok")

    def answer(n: int) -> bytes:
        if n == 1:  # says close, but the server keeps it open: a reuse would show as 1 connection
            return _reply(body, f"Content-Length: {len(body)}", "Connection: close")
        return _reply(body)  # no length: the body ends when the server closes

    async def main() -> tuple[list[str], int]:
        async with RawServer(answer, close_after=frozenset({2, 3})) as server:
            target = _target(server.url)
            texts = [await _ask(target), await _ask(target), await _ask(target)]
            await target.aclose()
            return texts, server.connections

    assert asyncio.run(main()) == (["ok", "ok", "ok"], 3)


def test_an_idle_connection_the_server_closed_is_replaced() -> None:
    body = _completion("ok")
    reply = _reply(body, f"Content-Length: {len(body)}")

    async def main() -> tuple[list[str], int]:
        async with RawServer(lambda n: reply) as server:
            target = _target(server.url)
            first = await _ask(target)
            for writer in server.writers:
                writer.close()
            await asyncio.sleep(0.1)  # the client's loop sees the close
            second = await _ask(target)
            await target.aclose()
            return [first, second], server.connections

    assert asyncio.run(main()) == (["ok", "ok"], 2)


@pytest.mark.parametrize(
    "answer, why",
    [
        (_reply(b"x" * 10, "Content-Length: 100"), "closed the connection mid-response"),
        (_reply(b"{}", "X-Filler: " + "y" * 70_000, "Content-Length: 2"), "head over the size"),
        (b"SPDY/3 200 OK\r\n\r\n", "not HTTP/1.x"),
        (_reply(b"abc", "Content-Length: 3", "Content-Encoding: br"), "'br' encoding"),
    ],
)
def test_a_broken_answer_is_a_retryable_connection_failure(answer: bytes, why: str) -> None:
    async def main() -> TargetError:
        async with RawServer(lambda n: answer, close_after=frozenset({1})) as server:
            target = _target(server.url)
            with pytest.raises(TargetError) as caught:
                await _ask(target)
            await target.aclose()
            return caught.value

    error = asyncio.run(main())
    assert error.retryable and "connection failed" in error.message and why in error.message


def test_https_credentials_and_proxies_go_through_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert usable_for("http://127.0.0.1:8000/v1/chat/completions")
    assert not usable_for("https://api.openai.com/v1/chat/completions")
    assert not usable_for("http://user:secret@127.0.0.1:8000/v1")
    monkeypatch.setenv("http_proxy", "http://proxy.internal:3128")
    assert not usable_for("http://127.0.0.1:8000/v1/chat/completions")
