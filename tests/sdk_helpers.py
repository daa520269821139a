"""A real loopback HTTP server speaking the judge-proxy wire contract, for SDK and grader tests.

It implements what common.md fixes (bearer auth, /info, /invoke, /invokeBatch, the error codes,
whole-batch budget refusal) with a pluggable judge: ``judge(request) -> raw reply text``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
Judge = Callable[[dict[str, Any]], "str | tuple[str, str]"]


def mock_judge(targets_file: Path = ROOT / "evals" / "targets.yaml", name: str = "mock") -> Judge:
    """Answer like the scripted ``mock`` target of evals/targets.yaml (through evalrun's MockTarget)."""
    from evalrun.targets.base import CompletionRequest
    from evalrun.targets.config import load_targets
    from evalrun.targets.providers.mock import MockTarget

    target = MockTarget(load_targets(targets_file).get(name))

    def judge(request: dict[str, Any]) -> str:
        completion = CompletionRequest.from_prompt(
            request["question"],
            system_prompt=request.get("systemPrompt"),
            task=request.get("task"),
        )
        return target.answer(completion)

    return judge


class FakeProxy:
    def __init__(
        self,
        judge: Judge | None = None,
        *,
        max_calls: int = 50,
        token: str = "test-token-0123456789abcdef0123456789abcdef",
        target_name: str = "mock",
        available: tuple[str, ...] = ("mock",),
        short_batch: bool = False,
    ) -> None:
        self.judge = judge or (lambda request: '{"relevant": true, "reason": "default"}')
        self.max_calls = max_calls
        self.token = token
        self.target_name = target_name
        self.available = list(available)
        self.short_batch = short_batch
        self.call_count = 0
        self.requests: list[dict[str, Any]] = []
        self.http_requests: list[tuple[str, str]] = []
        self.fail_with: list[tuple[int, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> FakeProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                proxy._handle(self, "GET")

            def do_POST(self) -> None:
                proxy._handle(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def env(self, **extra: str) -> dict[str, str]:
        return grader_env(self.url, self.token, **extra)

    def fail_next(self, status: int, code: str, message: str = "injected", **extra: Any) -> None:
        self.fail_with.append((status, _error(code, message, **extra)))

    # handling --------------------------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        path = handler.path
        self.http_requests.append((method, path))
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        if handler.headers.get("Authorization") != f"Bearer {self.token}":
            return self._send(handler, 401, _error("unauthorized", "bad or missing token"))
        if self.fail_with:
            status, payload = self.fail_with.pop(0)
            return self._send(handler, status, payload)
        if method == "GET" and path == "/info":
            return self._send(
                handler,
                200,
                {
                    "targetName": self.target_name,
                    "callCount": self.call_count,
                    "maxCalls": self.max_calls,
                    "availableTargets": self.available,
                },
            )
        if method != "POST" or path not in ("/invoke", "/invokeBatch"):
            return self._send(handler, 404, {"detail": "Not Found"})
        try:
            data = json.loads(body or b"null")
        except ValueError:
            return self._send(handler, 400, _error("bad_request", "body is not JSON"))
        requests = data.get("requests") if path == "/invokeBatch" else [data]
        if not isinstance(requests, list) or not all(
            isinstance(r, dict) and isinstance(r.get("question"), str) for r in requests
        ):
            return self._send(handler, 400, _error("bad_request", "each request needs a question"))
        for request in requests:
            target = request.get("target")
            if target is not None and target not in self.available:
                return self._send(
                    handler,
                    400,
                    _error("unknown_target", f"unknown target {target}", allowed=self.available),
                )
        with self._lock:
            if self.call_count + len(requests) > self.max_calls:
                return self._send(
                    handler,
                    429,
                    _error(
                        "max_calls_exceeded",
                        "budget exhausted",
                        limit=self.max_calls,
                        used=self.call_count,
                    ),
                )
            self.call_count += len(requests)
            self.requests.extend(requests)
        responses = [self._answer(r) for r in requests]
        if path == "/invoke":
            return self._send(handler, 200, responses[0])
        if self.short_batch:
            responses = responses[:-1]
        return self._send(handler, 200, {"responses": responses})

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The judge returns the text, or (text, finish reason) to say it was cut off."""
        answer = self.judge(request)
        text, finish = answer if isinstance(answer, tuple) else (answer, "stop")
        return {
            "output": [{"role": "assistant", "content": text}],
            "rawText": text,
            "tokenUsage": {"input": 10, "output": 5, "total": 15},
            "target": request.get("target") or self.target_name,
            "cached": False,
            "latencyMs": 1.5,
            "finishReason": finish,
            "refusal": None,
        }

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


def grader_env(url: str | None = None, token: str | None = None, **extra: str) -> dict[str, str]:
    """The environment a grader process gets: no inherited proxy variables, repo importable."""
    env = {k: v for k, v in os.environ.items() if "PROXY" not in k}
    if url is not None and token is not None:
        env.update(AGENTV_TARGET_PROXY_URL=url, AGENTV_TARGET_PROXY_TOKEN=token)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _error(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The real proxy's error shape on AgentV's routes (docs/proxy.md)."""
    return {"error": message, "code": code, **extra}


def run_python_grader(
    module: str, payload: Any, env: dict[str, str], timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m module`` as a real grader process with the payload on stdin."""
    stdin = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        [sys.executable, "-m", module],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )


def run_node(
    script: Path | str, payload: Any, env: dict[str, str], timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    stdin = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        ["node", str(script)],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )


def payload_for(case: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A grader stdin payload (docs/grader-protocol.md) for an eval-file case dict."""
    inputs = case["input"]
    if isinstance(inputs, str):
        inputs = [{"role": "user", "content": inputs}]
    question = next((m["content"] for m in reversed(inputs) if m.get("role") == "user"), "")
    expected = case.get("expected_output") or []
    reference = next(
        (
            m["content"]
            for m in reversed(expected)
            if m.get("role") == "assistant" and isinstance(m.get("content"), str)
        ),
        None,
    )
    payload: dict[str, Any] = {
        "protocol": "evalrun.grader/1",
        "case_id": case["id"],
        "question": question,
        "criteria": case.get("criteria"),
        "input": inputs,
        "output": case.get("output"),
        "messages": [{"role": "assistant", "content": case.get("output")}],
        "expected_output": expected,
        "reference_answer": reference,
        "config": {},
        "metadata": {},
        "grader": {"name": "test", "max_calls": 10},
        "attempt": 1,
    }
    payload.update(extra)
    return payload


def eval_cases(name: str) -> list[dict[str, Any]]:
    import yaml

    data = yaml.safe_load((ROOT / "evals" / f"{name}.eval.yaml").read_text())
    return list(data["tests"])
