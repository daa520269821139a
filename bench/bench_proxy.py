"""What the judge proxy adds to a judge call: latency (p50/p99) and calls per second.

    python bench/bench_proxy.py [--calls 2000] [--seconds 5] [--clients 32]

Three processes, so that no one of them starves the others on a small box:
- an upstream: a raw asyncio HTTP server answering an OpenAI-style chat completion at once;
- the proxy: ``JudgeProxy`` with two targets, built as the runner builds them (``ManagedTarget``
  around a provider): ``openai`` (evalrun's real provider, httpx, pointed at the upstream) and
  ``instant`` (answers in-process, so only the proxy itself is measured);
- this process: a minimal keep-alive HTTP/1.1 client, so the servers rather than the client are
  measured.

Four ways to make the same judge call:
- direct:     raw client -> upstream (the floor);
- provider:   ``openai`` provider called in this process -> upstream (a judge call without a proxy);
- via proxy:  raw client -> proxy ``/invoke`` -> ``openai`` provider -> upstream;
- proxy only: raw client -> proxy ``/invoke`` -> ``instant``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

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
QUESTION = "Is this passage relevant?"
SYSTEM = "Answer with JSON."


# --- upstream -----------------------------------------------------------------------------------


async def _upstream_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    reply = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(UPSTREAM_REPLY)).encode()
        + b"\r\n\r\n"
        + UPSTREAM_REPLY
    )
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length:
                await reader.readexactly(length)
            writer.write(reply)
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def serve_upstream() -> None:
    server = await asyncio.start_server(_upstream_conn, "127.0.0.1", 0, backlog=512)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


# --- targets and proxy --------------------------------------------------------------------------


class InstantTarget:
    """Answers without any I/O."""

    name = "instant"

    async def complete(self, request: Any) -> Any:
        from evalrun.targets.base import CompletionResponse, TokenUsage

        return CompletionResponse(text='{"relevant": true}', usage=TokenUsage(12, 4))

    async def aclose(self) -> None:
        return None


def openai_target(upstream_url: str) -> Any:
    """evalrun's ``openai`` provider behind ``ManagedTarget`` (default concurrency 8, no cache)."""
    from evalrun.targets import ManagedTarget, TargetConfig, build_provider

    config = TargetConfig(
        name="openai",
        kind="openai",
        model="bench",
        base_url=f"{upstream_url}/v1",
        api_key="bench-key",
        max_retries=0,
    )
    return ManagedTarget(build_provider(config), config)


async def serve_proxy(upstream_url: str) -> None:
    from evalrun.targets import ManagedTarget, TargetConfig
    from proxy import JudgeProxy

    targets = {
        "openai": openai_target(upstream_url),
        "instant": ManagedTarget(InstantTarget(), TargetConfig(name="instant", kind="mock")),
    }
    parser = "h11"  # pinned by JudgeProxy
    async with JudgeProxy(targets.__getitem__, list(targets), secrets=["bench-key"]) as proxy:
        grant = proxy.grant("openai", max_calls=10**9)
        print(json.dumps({"url": proxy.url, "token": grant.token, "parser": parser}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for target in targets.values():
        await target.aclose()


# --- load generator ----------------------------------------------------------------------------


class Caller(Protocol):
    async def open(self) -> None: ...

    async def call(self) -> None: ...

    async def close(self) -> None: ...


class Connection:
    """One keep-alive HTTP/1.1 connection, as small as possible so the servers are measured."""

    def __init__(self, port: int, path: str, body: bytes, token: str | None = None) -> None:
        auth = f"authorization: Bearer {token}\r\n" if token else ""
        self.request = (
            f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{auth}"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        ).encode() + body
        self.port = port

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def call(self) -> None:
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head.decode(errors="replace"))
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        await self.reader.readexactly(length)

    async def close(self) -> None:
        self.writer.close()


class ProviderCall:
    """The judge call a grader would make with the provider itself (no proxy)."""

    def __init__(self, target: Any) -> None:
        from evalrun.targets.base import CompletionRequest

        self.target = target
        self.request = CompletionRequest.from_prompt(QUESTION, system_prompt=SYSTEM)

    async def open(self) -> None:
        return None

    async def call(self) -> None:
        await self.target.complete(self.request)

    async def close(self) -> None:
        return None


async def latency(make: Callable[[], Caller], calls: int) -> list[float]:
    caller = make()
    await caller.open()
    for _ in range(200):
        await caller.call()
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await caller.call()
        samples.append((time.perf_counter() - started) * 1000)
    await caller.close()
    return samples


async def throughput(make: Callable[[], Caller], clients: int, seconds: float) -> float:
    callers = [make() for _ in range(clients)]
    await asyncio.gather(*(c.open() for c in callers))
    await asyncio.gather(*(c.call() for c in callers))
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(caller: Caller) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await caller.call()
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in callers))
    elapsed = time.perf_counter() - started
    for caller in callers:
        await caller.close()
    return done / elapsed


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench(args: argparse.Namespace) -> None:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    me = [sys.executable, __file__]
    upstream = subprocess.Popen(
        [*me, "--serve-upstream"], stdout=subprocess.PIPE, text=True, env=env
    )
    proxy = None
    provider = None
    try:
        assert upstream.stdout is not None
        up_port = int(upstream.stdout.readline())
        up_url = f"http://127.0.0.1:{up_port}"
        proxy = subprocess.Popen(
            [*me, "--serve-proxy", up_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proxy.stdout is not None
        info = json.loads(proxy.stdout.readline())
        proxy_port = int(info["url"].rsplit(":", 1)[1])
        provider = openai_target(up_url)

        direct_body = json.dumps(
            {
                "model": "bench",
                "messages": [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": QUESTION},
                ],
            }
        ).encode()

        def invoke(target: str) -> Callable[[], Caller]:
            body = json.dumps({"question": QUESTION, "systemPrompt": SYSTEM, "target": target})
            return lambda: Connection(proxy_port, "/invoke", body.encode(), info["token"])

        sides: dict[str, Callable[[], Caller]] = {
            "direct": lambda: Connection(up_port, "/v1/chat/completions", direct_body),
            "provider": lambda: ProviderCall(provider),
            "via proxy": invoke("openai"),
            "proxy only": invoke("instant"),
        }
        lat = {side: await latency(make, args.calls) for side, make in sides.items()}
        tput = {
            side: await throughput(make, args.clients, args.seconds) for side, make in sides.items()
        }
    finally:
        if provider is not None:
            await provider.aclose()
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
    sides = list(lat)
    rows: list[tuple[str, dict[str, float], int]] = [
        ("latency p50 (ms)", {s: pct(lat[s], 0.50) for s in sides}, 3),
        ("latency p99 (ms)", {s: pct(lat[s], 0.99) for s in sides}, 3),
        (f"calls/s, {args.clients} clients", tput, 0),
    ]
    print(f"\n{'':<22}" + "".join(f"{s:>12}" for s in sides))
    for name, values, digits in rows:
        print(f"{name:<22}" + "".join(f"{values[s]:>12.{digits}f}" for s in sides))
    p50 = rows[0][1]
    print("\nratios (via proxy / other)")
    for name, values, _ in rows:
        ratios = "  ".join(
            f"{other} {values['via proxy'] / values[other]:.2f}x"
            for other in ("direct", "provider")
        )
        print(f"  {name:<22}{ratios}")
    print(
        f"\nadded at p50: {p50['via proxy'] - p50['provider']:.3f} ms over calling the provider "
        f"in-process, {p50['via proxy'] - p50['direct']:.3f} ms over the raw direct call; "
        f"the proxy alone: {p50['proxy only'] - p50['direct']:.3f} ms"
    )
    print(
        f"({args.calls} sequential calls per side after 200 warm-up; {args.seconds:g} s per side "
        f"at {args.clients} concurrent callers; {os.cpu_count()} CPUs; "
        f"uvicorn HTTP parser: {parser})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
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
