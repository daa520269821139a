"""How much the judge proxy adds to a judge call: latency (p50/p99) and throughput.

    python bench/bench_proxy.py [--calls 2000] [--seconds 5] [--clients 32]

Three processes, so that no one of them starves the others on a small box:
- an upstream: a raw asyncio HTTP server answering an OpenAI-style chat completion;
- the proxy: ``JudgeProxy`` with a target that POSTs to the upstream with httpx (as the real
  OpenAI provider does);
- this process: a minimal keep-alive HTTP/1.1 client that calls the upstream directly and the
  proxy's ``/invoke``, sequentially for latency and with N concurrent connections for calls/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

UPSTREAM_REPLY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"relevant": true}'},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16},
    }
).encode()


# --- upstream -----------------------------------------------------------------------------------


async def _upstream_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(UPSTREAM_REPLY)).encode()
        + b"\r\n\r\n"
        + UPSTREAM_REPLY
    )
    try:
        while True:
            headers = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in headers.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length:
                await reader.readexactly(length)
            writer.write(head)
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def serve_upstream() -> None:
    server = await asyncio.start_server(_upstream_conn, "127.0.0.1", 0, backlog=512)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


# --- proxy --------------------------------------------------------------------------------------


class HttpTarget:
    """Stands in for the OpenAI provider: one httpx POST per call."""

    def __init__(self, name: str, url: str) -> None:
        import httpx

        self.name = name
        self._client = httpx.AsyncClient(
            base_url=url, limits=httpx.Limits(max_connections=8, max_keepalive_connections=8)
        )

    async def complete(self, request: Any) -> Any:
        from evalrun.targets.base import CompletionResponse, TokenUsage

        messages = list(request.messages)
        if request.system_prompt:
            messages.insert(0, {"role": "system", "content": request.system_prompt})
        response = await self._client.post(
            "/v1/chat/completions", json={"model": "bench", "messages": messages}
        )
        data = response.json()
        usage = data["usage"]
        return CompletionResponse(
            text=data["choices"][0]["message"]["content"],
            usage=TokenUsage(usage["prompt_tokens"], usage["completion_tokens"]),
            finish_reason="stop",
        )

    async def aclose(self) -> None:
        await self._client.aclose()


class InstantTarget:
    """Answers without any I/O: isolates what the proxy itself costs."""

    name = "instant"

    async def complete(self, request: Any) -> Any:
        from evalrun.targets.base import CompletionResponse, TokenUsage

        return CompletionResponse(text='{"relevant": true}', usage=TokenUsage(12, 4))

    async def aclose(self) -> None:
        return None


async def serve_proxy(upstream_url: str) -> None:
    """The proxy as the runner builds it: providers wrapped in ``ManagedTarget`` (default
    concurrency limit of 8 per target, no cache)."""
    from evalrun.targets import ManagedTarget, TargetConfig
    from proxy import JudgeProxy

    targets = {
        "http": ManagedTarget(
            HttpTarget("http", upstream_url), TargetConfig(name="http", kind="openai")
        ),
        "instant": ManagedTarget(InstantTarget(), TargetConfig(name="instant", kind="mock")),
    }
    async with JudgeProxy(targets.__getitem__, list(targets)) as proxy:
        grant = proxy.grant("http", max_calls=10**9)
        import importlib.util

        parser = "httptools" if importlib.util.find_spec("httptools") else "h11"
        print(json.dumps({"url": proxy.url, "token": grant.token, "parser": parser}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for target in targets.values():
        await target.aclose()


# --- load generator ----------------------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection, as small as possible so the servers are measured."""

    def __init__(self, port: int, path: str, body: bytes, token: str | None) -> None:
        auth = f"authorization: Bearer {token}\r\n" if token else ""
        self.request = (
            f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{auth}"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        ).encode() + body
        self.port = port

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def call(self) -> bytes:
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head.decode(errors="replace"))
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


async def latency(make: Any, calls: int) -> list[float]:
    conn = make()
    await conn.open()
    for _ in range(200):
        await conn.call()
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await conn.call()
        samples.append((time.perf_counter() - started) * 1000)
    conn.close()
    return samples


async def throughput(make: Any, clients: int, seconds: float) -> float:
    conns = [make() for _ in range(clients)]
    await asyncio.gather(*(c.open() for c in conns))
    for conn in conns:
        await conn.call()
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(conn: Connection) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await conn.call()
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - started
    for conn in conns:
        conn.close()
    return done / elapsed


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench(args: argparse.Namespace) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    me = [sys.executable, __file__]
    upstream = subprocess.Popen(
        [*me, "--serve-upstream"], stdout=subprocess.PIPE, text=True, env=env
    )
    proxy = None
    try:
        assert upstream.stdout is not None
        up_port = int(upstream.stdout.readline())
        proxy = subprocess.Popen(
            [*me, "--serve-proxy", f"http://127.0.0.1:{up_port}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proxy.stdout is not None
        info = json.loads(proxy.stdout.readline())
        proxy_port = int(info["url"].rsplit(":", 1)[1])

        direct_body = json.dumps(
            {
                "model": "bench",
                "messages": [
                    {"role": "system", "content": "Answer with JSON."},
                    {"role": "user", "content": "Is this passage relevant?"},
                ],
            }
        ).encode()

        def invoke_body(target: str) -> bytes:
            return json.dumps(
                {
                    "question": "Is this passage relevant?",
                    "systemPrompt": "Answer with JSON.",
                    "target": target,
                }
            ).encode()

        sides: dict[str, Any] = {
            "direct": lambda: Connection(up_port, "/v1/chat/completions", direct_body, None),
            "proxy": lambda: Connection(proxy_port, "/invoke", invoke_body("http"), info["token"]),
            "proxy-only": lambda: Connection(
                proxy_port, "/invoke", invoke_body("instant"), info["token"]
            ),
        }
        lat = {side: await latency(make, args.calls) for side, make in sides.items()}
        tput = {
            side: await throughput(make, args.clients, args.seconds) for side, make in sides.items()
        }
    finally:
        if proxy is not None:
            assert proxy.stdin is not None
            proxy.stdin.close()
            proxy.wait(timeout=15)
        upstream.terminate()
        upstream.wait(timeout=5)

    report(lat, tput, args, info["parser"])


def report(
    lat: dict[str, list[float]], tput: dict[str, float], args: argparse.Namespace, parser: str
) -> None:
    d50, d99 = pct(lat["direct"], 0.50), pct(lat["direct"], 0.99)
    p50, p99 = pct(lat["proxy"], 0.50), pct(lat["proxy"], 0.99)
    o50, o99 = pct(lat["proxy-only"], 0.50), pct(lat["proxy-only"], 0.99)
    rows = [
        ("latency p50 (ms)", d50, p50, p50 / d50, o50),
        ("latency p99 (ms)", d99, p99, p99 / d99, o99),
        (f"calls/s, {args.clients} clients", tput["direct"], tput["proxy"],
         tput["proxy"] / tput["direct"], tput["proxy-only"]),
    ]  # fmt: skip
    print(f"\n{'':<22}{'direct':>9}{'via proxy':>11}{'ratio':>8}{'proxy only':>12}")
    for name, a, b, r, o in rows:
        digits = 3 if "ms" in name else 0
        print(f"{name:<22}{a:>9.{digits}f}{b:>11.{digits}f}{r:>7.2f}x{o:>12.{digits}f}")
    print(f"\nadded per call at p50: {p50 - d50:.3f} ms (proxy + its httpx upstream call)")
    print(f"proxy alone at p50:    {o50:.3f} ms round trip, no upstream")
    print(
        f"({args.calls} sequential calls per side after 200 warm-up; "
        f"{args.seconds:g} s per side at {args.clients} keep-alive connections; "
        f"{os.cpu_count()} CPUs; uvicorn HTTP parser: {parser})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls per side")
    parser.add_argument("--seconds", type=float, default=5.0, help="throughput window per side")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-proxy", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        asyncio.run(serve_upstream())
    elif args.serve_proxy:
        asyncio.run(serve_proxy(args.serve_proxy))
    else:
        asyncio.run(bench(args))


if __name__ == "__main__":
    main()
