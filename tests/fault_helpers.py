"""Shared parts of the fault and hostile-input tests: a misbehaving OpenAI-compatible server,
eval-suite writing, and the checks every faulty run must pass (one result per case, no process
left behind, the proxy port closed)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.conftest import run_cli

#: A prompt carrying ``[fault:NAME]`` makes ``FakeOpenAI`` answer with that fault.
FAULTS = (
    "ok",  # a normal chat completion
    "rate-limited",  # 429 with Retry-After: 0 twice, then ok
    "retry-after-1",  # 429 with Retry-After: 1 once, then ok
    "server-error",  # 500 every time
    "malformed",  # 200 whose body is not JSON
    "stall",  # no answer until the server closes
    "cut-off",  # headers promise a body that never fully arrives: the connection closes
    "echo-key-error",  # 401 whose message repeats the Authorization header
    "echo-key-reply",  # 200 whose answer repeats the Authorization header
)

OK_REPLY = '{"verdict": "yes"}'


def completion(content: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": "fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        }
    ).encode()


class FakeOpenAI:
    """An OpenAI-compatible server on 127.0.0.1:0 whose answer is chosen by the prompt.

    Requests are counted per prompt (``hits``) so a test can see how often the client retried,
    and every Authorization header is kept (``keys``) so a test can prove the key was sent.
    """

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.keys: list[str] = []
        self.release = threading.Event()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fake.handle(self, body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        try:
            messages = json.loads(body)["messages"]
            prompt = "\n".join(str(m.get("content") or "") for m in messages)
        except (ValueError, KeyError, TypeError):
            prompt = ""
        key = handler.headers.get("Authorization", "").removeprefix("Bearer ")
        with self._lock:
            self.hits[prompt] += 1
            count = self.hits[prompt]
            self.keys.append(key)
        fault = prompt.split("[fault:", 1)[1].split("]", 1)[0] if "[fault:" in prompt else "ok"
        if fault == "rate-limited" and count <= 2:
            self._send(handler, 429, _error("rate limited, slow down"), {"Retry-After": "0"})
        elif fault == "retry-after-1" and count <= 1:
            self._send(handler, 429, _error("rate limited, slow down"), {"Retry-After": "1"})
        elif fault == "server-error":
            self._send(handler, 500, _error("the server had an error"), {"Retry-After": "0"})
        elif fault == "malformed":
            self._send(handler, 200, b'{"choices": [{"message": ')
        elif fault == "stall":
            self.release.wait(30)
        elif fault == "cut-off":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "4096")
            handler.end_headers()
            handler.wfile.write(completion(OK_REPLY)[:40])
            handler.wfile.flush()
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
        elif fault == "echo-key-error":
            self._send(handler, 401, _error(f"Incorrect API key provided: {key}"))
        elif fault == "echo-key-reply":
            self._send(handler, 200, completion(f"your key is {key}"))
        else:
            self._send(handler, 200, completion(OK_REPLY))

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        headers: dict[str, str] | None = None,
    ) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)

    def hits_for(self, fault: str) -> int:
        return sum(n for prompt, n in self.hits.items() if f"[fault:{fault}]" in prompt)


def _error(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "fake_error"}}).encode()


def write_suite(
    folder: Path,
    *,
    graders: list[dict[str, Any]],
    cases: list[dict[str, Any]],
    targets: list[dict[str, Any]],
    judge: str = "judge",
) -> Path:
    """An eval file whose tests live in a JSONL file (fast to load, even with huge fields)."""
    (folder / "targets.yaml").write_text(json.dumps({"targets": targets}))
    with open(folder / "cases.jsonl", "w", encoding="utf-8") as f:
        for case in cases:
            f.write(json.dumps(case) + "\n")
    path = folder / "suite.eval.yaml"
    path.write_text(json.dumps({"judge": judge, "graders": graders, "tests": "cases.jsonl"}))
    return path


def run_suite(path: Path, out: Path, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run a suite from ``write_suite`` into ``out`` from its folder, without the response cache;
    ``env`` adds to the test environment (``cli_env``)."""
    argv = (str(path), "--out", str(out), *extra, "--no-cache")
    return run_cli(*argv, cwd=path.parent, env=cli_env(**env))


def recorded_pids(folder: Path) -> list[int]:
    """Every pid a grader (or its children) wrote as a file name (``PID`` or ``PID.UNIQUE``:
    in a sandbox every grader may be pid 2 of its own namespace) into ``folder``."""
    names = [p.name.split(".")[0] for p in folder.iterdir()] if folder.is_dir() else []
    return [int(name) for name in names if name.isdigit()]


def running(pid: int) -> bool:
    """Alive and not a zombie (a zombie has already exited; only its exit status is left)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def left_behind(pids: list[int], grace: float = 5.0) -> list[int]:
    """The pids still running after ``grace`` seconds (a kill may take a moment to land)."""
    deadline = time.monotonic() + grace
    alive = [p for p in pids if running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if running(p)]
    return alive


def working_in(folder: Path, grace: float = 5.0) -> list[int]:
    """Processes still running after ``grace`` seconds whose working folder is inside
    ``folder``: graders and their children, seen from the host whether or not they ran in a
    sandbox (a PID namespace hides their host pids from them, not their folder from us)."""
    root = str(folder.resolve())

    def scan() -> list[int]:
        found = []
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if pid != os.getpid() and (cwd == root or cwd.startswith(root + "/")) and running(pid):
                found.append(pid)
        return found

    deadline = time.monotonic() + grace
    alive = scan()
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = scan()
    return alive


def holding(token: str, grace: float = 5.0) -> list[int]:
    """Processes still running after ``grace`` seconds whose command line holds ``token`` (a
    process a test's program left behind, seen from the host)."""

    def scan() -> list[int]:
        found = []
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if token.encode() in f.read() and running(pid):
                        found.append(pid)
            except OSError:
                continue
        return found

    deadline = time.monotonic() + grace
    alive = scan()
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = scan()
    return alive


def port_closed(url: str) -> bool:
    """True when nothing accepts connections at ``url`` any more."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=2):
            return False
    except OSError:
        return True


def one_result_per_case(results: list[dict[str, Any]], ids: list[str]) -> dict[str, dict]:
    counts = Counter(r["id"] for r in results)
    assert counts == Counter(ids), f"results per case: {dict(counts)}"
    return {r["id"]: r for r in results}


def cli_env(**extra: str) -> dict[str, str]:
    """The test's environment for a CLI run, with the repo importable from any cwd."""
    root = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}
