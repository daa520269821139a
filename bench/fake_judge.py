"""A loopback judge for the benches: OpenAI's Chat Completions wire format, a fixed latency,
its own process (raw asyncio, so it costs the machine little).

    python bench/fake_judge.py --latency-ms 50        # prints the port, serves until killed

``POST /v1/chat/completions`` answers after the latency with one JSON verdict that both
evalrun's judge helpers and promptfoo's ``llm-rubric`` read as a pass. ``GET /stats`` gives
``{"requests", "peak_in_flight", "mean_hold_ms", "first_at"}`` (how long a call was really
held, so a bench can show its latency floor is true; when the first call came, on
``time.monotonic``'s clock); ``POST /reset`` zeroes them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor

VERDICT = json.dumps(
    {"relevant": True, "pass": True, "score": 1.0, "reason": "scripted", "confidence": 0.9}
)
REPLY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench-judge",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": VERDICT},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 12, "total_tokens": 32},
    }
).encode()


class Judge:
    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
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
                if length:
                    await reader.readexactly(length)
                target = head.split(b" ", 2)[1]
                writer.write(self._response(await self._answer(target)))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _answer(self, target: bytes) -> bytes:
        if target.startswith(b"/stats"):
            mean = self.held_s / self.requests * 1000 if self.requests else None
            stats = {"requests": self.requests, "peak_in_flight": self.peak_in_flight}
            return json.dumps({**stats, "mean_hold_ms": mean, "first_at": self.first_at}).encode()
        if target.startswith(b"/reset"):
            self.requests = self.peak_in_flight = 0
            self.held_s = 0.0
            self.first_at = None
            return b"{}"
        if self.first_at is None:
            self.first_at = time.monotonic()
        self.requests += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        started = time.monotonic()
        try:
            await self._hold(started + self.latency_s)
        finally:
            self.in_flight -= 1
            self.held_s += time.monotonic() - started
        return REPLY

    async def _hold(self, deadline: float) -> None:
        """Until ``deadline``, not after: an asyncio timer wakes up to ~1 ms late (epoll counts
        whole milliseconds), which over 25 rounds would add ~25 ms that the latency floor does
        not count. A thread's sleep is precise, and waits without holding up the loop."""
        delay = deadline - time.monotonic()
        if delay > 0:
            await asyncio.get_running_loop().run_in_executor(self.sleeper, time.sleep, delay)

    @staticmethod
    def _response(body: bytes) -> bytes:
        return (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )


async def main(latency_ms: float) -> None:
    judge = Judge(latency_ms / 1000)
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
    args = parser.parse_args()
    try:
        asyncio.run(main(args.latency_ms))
    except KeyboardInterrupt:
        sys.exit(0)
