"""A loopback judge for the benches: OpenAI's Chat Completions wire format, a fixed latency,
its own process (raw asyncio, so it costs the machine little).

    python bench/fake_judge.py --latency-ms 50        # prints the port, serves until killed
    python bench/fake_judge.py --hang-share 0.05 --hang-s 30 --throttle-share 0.2 --seed 36

``POST /v1/chat/completions`` answers after the latency with one JSON verdict that both
evalrun's judge helpers and promptfoo's ``llm-rubric`` read as a pass. A request whose body
names passages marked ``[[rel]]`` or ``[[irr]]`` gets the verdicts of those marks instead, in
the shapes evalrun's, DeepEval's and RAGAS's contextual precision read (``bench/bench_peers.py``),
so every tool sees the same judge. ``GET /stats`` gives ``{"requests", "peak_in_flight",
"mean_hold_ms", "first_at", "hung", "throttled"}`` (how long a call was really held, so a bench
can show its latency floor is true; when the first call came, on ``time.monotonic``'s clock;
the faults injected); ``POST /reset`` zeroes them.

Faults, drawn per request from one seeded generator: ``--hang-share`` of the calls are held
``--hang-s`` seconds before their answer (a provider's tail), ``--throttle-share`` answered 429
at once, whatever the load (a shared quota's noise, not back-pressure).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

VERDICT = json.dumps(
    {"relevant": True, "pass": True, "score": 1.0, "reason": "scripted", "confidence": 0.9}
)


def reply(content: str) -> bytes:
    """A Chat Completions answer whose message is ``content``."""
    message = {"role": "assistant", "content": content}
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": "bench-judge",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 12, "total_tokens": 32},
        }
    ).encode()


PLAIN = reply(VERDICT)
MARK = re.compile(rb"\[\[(rel|irr)\]\]")
THROTTLED = json.dumps(
    {
        "error": {
            "message": "Rate limit reached (injected)",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
).encode()


def marked_verdict(marks: list[bytes]) -> str:
    """The verdicts of the marked passages in one reply: ``relevant``/``verdict`` for a prompt
    about one passage (evalrun per item, RAGAS), ``verdicts`` for a prompt listing them all
    (DeepEval's ``verdict``, evalrun batched's ``number`` and ``relevant``); each reader takes
    its keys and ignores the rest."""
    flags = [mark == b"rel" for mark in marks]
    return json.dumps(
        {
            "relevant": flags[0],
            "verdict": int(flags[0]),
            "verdicts": [
                {
                    "number": number,
                    "relevant": flag,
                    "verdict": "yes" if flag else "no",
                    "reason": "marked",
                }
                for number, flag in enumerate(flags, 1)
            ],
            "reason": "marked",
            "confidence": 0.9,
        }
    )


@dataclass
class Faults:
    hang_share: float = 0.0
    hang_s: float = 30.0
    throttle_share: float = 0.0
    seed: int = 36


class Judge:
    def __init__(self, latency_s: float, faults: Faults | None = None) -> None:
        self.latency_s = latency_s
        self.faults = faults or Faults()
        self.rng = random.Random(self.faults.seed)
        self.hung = 0
        self.throttled = 0
        self.requests = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.held_s = 0.0
        #: when the first call since the last reset arrived (``time.monotonic``: one clock for
        #: every process of the machine, so a bench can tell a run's start cost)
        self.first_at: float | None = None
        #: One thread per call in flight (the benches hold up to a few hundred at once).
        self.sleeper = ThreadPoolExecutor(max_workers=1024, thread_name_prefix="hold")

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                target = head.split(b" ", 2)[1]
                writer.write(await self._answer(target, body))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _answer(self, target: bytes, body: bytes) -> bytes:
        if target.startswith(b"/stats"):
            mean = self.held_s / self.requests * 1000 if self.requests else None
            stats = {"requests": self.requests, "peak_in_flight": self.peak_in_flight}
            faults = {"hung": self.hung, "throttled": self.throttled}
            return self._response(
                json.dumps({**stats, "mean_hold_ms": mean, "first_at": self.first_at, **faults})
            )
        if target.startswith(b"/reset"):
            self.requests = self.peak_in_flight = self.hung = self.throttled = 0
            self.rng = random.Random(self.faults.seed)
            self.held_s = 0.0
            self.first_at = None
            return self._response(b"{}")
        if self.first_at is None:
            self.first_at = time.monotonic()
        self.requests += 1
        draw = self.rng.random()
        if draw < self.faults.throttle_share:
            self.throttled += 1
            return self._response(THROTTLED, b"429 Too Many Requests")
        latency = self.latency_s
        if draw < self.faults.throttle_share + self.faults.hang_share:
            self.hung += 1
            latency = self.faults.hang_s
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        started = time.monotonic()
        try:
            await self._hold(started + latency)
        finally:
            self.in_flight -= 1
            self.held_s += time.monotonic() - started
        marks = MARK.findall(body)
        return self._response(reply(marked_verdict(marks)) if marks else PLAIN)

    async def _hold(self, deadline: float) -> None:
        """Until ``deadline``, not after: an asyncio timer wakes up to ~1 ms late (epoll counts
        whole milliseconds), which over 25 rounds would add ~25 ms that the latency floor does
        not count. A thread's sleep is precise, and waits without holding up the loop."""
        delay = deadline - time.monotonic()
        if delay > 0:
            await asyncio.get_running_loop().run_in_executor(self.sleeper, time.sleep, delay)

    @staticmethod
    def _response(body: bytes | str, status: bytes = b"200 OK") -> bytes:
        if isinstance(body, str):
            body = body.encode()
        return (
            b"HTTP/1.1 "
            + status
            + b"\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )


async def main(latency_ms: float, faults: Faults) -> None:
    judge = Judge(latency_ms / 1000, faults)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)  # a burst of 200+ connections must not wait for SYN retries
    server = await asyncio.start_server(judge.serve, sock=sock, backlog=4096)
    print(sock.getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--hang-share", type=float, default=0.0)
    parser.add_argument("--hang-s", type=float, default=30.0)
    parser.add_argument("--throttle-share", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=36)
    args = parser.parse_args()
    faults = Faults(args.hang_share, args.hang_s, args.throttle_share, args.seed)
    try:
        asyncio.run(main(args.latency_ms, faults))
    except KeyboardInterrupt:
        sys.exit(0)
