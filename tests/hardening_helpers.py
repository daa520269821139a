"""Shared parts of the hardening tests (tests/test_hardening_*.py): an upstream that keeps every
request body and can answer slowly or with a lone surrogate, a real ``evalrun proxy`` process,
resource limits for a CLI process, and the check that a bundle agrees with itself."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.fault_helpers import OK_REPLY, FakeOpenAI, cli_env, completion

#: The judge's answer text ends in the first half of an emoji cut in two (U+D83D): on the wire,
#: JSON's legal escape ``\ud83d``; in Python, a lone surrogate no UTF-8 writer can encode.
LONE_SURROGATE_REPLY = '{"verdict": "yes", "note": "a cut emoji \ud83d"}'


class RecordingOpenAI(FakeOpenAI):
    """``FakeOpenAI`` that keeps every request body; ``[fault:surrogate]`` answers text with a
    lone surrogate escaped in the JSON, ``[fault:slow]`` answers after ``slow_s``."""

    def __init__(self, slow_s: float = 0.2) -> None:
        super().__init__()
        self.bodies: list[dict[str, Any]] = []
        self.slow_s = slow_s

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        request = json.loads(body)
        prompt = "\n".join(str(m.get("content") or "") for m in request["messages"])
        with self._lock:
            self.bodies.append(request)
            self.hits[prompt] += 1
        if "[fault:surrogate]" in prompt:
            self._send(handler, 200, completion(LONE_SURROGATE_REPLY))
            return
        if "[fault:slow]" in prompt:
            self.release.wait(self.slow_s)
        self._send(handler, 200, completion(OK_REPLY))

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.bodies)


def openai_target(fake: FakeOpenAI, name: str = "judge", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "openai",
        "model": "fake-model",
        "base_url": fake.base_url,
        "api_key_env": "FAKE_JUDGE_KEY",
        "max_retries": 0,
        "timeout": 20,
        **extra,
    }


@dataclass
class ProxyProcess:
    url: str
    token: str
    process: subprocess.Popen[str]

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@contextmanager
def proxy_process(
    folder: Path, targets: list[dict[str, Any]], *, target: str, max_calls: int
) -> Iterator[ProxyProcess]:
    """``evalrun proxy`` as a user starts it: a real process; its URL and token read from the
    ``export`` lines it prints. Stopped with SIGINT, as Ctrl-C would."""
    path = folder / "targets.yaml"
    path.write_text(json.dumps({"targets": targets}))
    argv = [sys.executable, "-m", "evalrun", "proxy", "--target", target]
    argv += ["--max-calls", str(max_calls), "--targets", str(path)]
    process = subprocess.Popen(
        argv,
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(FAKE_JUDGE_KEY="sk-fake-judge-key"),
    )
    try:
        assert process.stdout is not None
        exports = dict(
            process.stdout.readline().strip().removeprefix("export ").split("=", 1)
            for _ in range(4)
        )
        yield ProxyProcess(
            exports["AGENTV_TARGET_PROXY_URL"], exports["AGENTV_TARGET_PROXY_TOKEN"], process
        )
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def limits(**values: int) -> Callable[[], None]:
    """A ``preexec_fn`` that sets resource limits (``fsize``, ``as_``) in the child only."""

    def apply() -> None:
        for name, value in values.items():
            number = getattr(resource, f"RLIMIT_{name.rstrip('_').upper()}")
            resource.setrlimit(number, (value, value))

    return apply


def run_cli_limited(
    *args: str, cwd: Path, env: dict[str, str], timeout: float = 120, **rlimits: int
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evalrun", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        preexec_fn=limits(**rlimits),
    )


def assert_bundle_agrees(out: Path) -> dict[str, Any]:
    """summary.json and the reports say what results.jsonl says (the last line of a case and
    repeat wins, as for --resume). Returns the summary."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            latest[(row["id"], row.get("repeat", 0))] = row
    counts = Counter(row["status"] for row in latest.values())
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["counts"]["total"] == len(latest), (summary["counts"], len(latest))
    for status in ("passed", "failed", "error", "unscored"):
        assert summary["counts"][status] == counts[status], (status, summary["counts"], counts)
    junit = (out / "junit.xml").read_text(encoding="utf-8")
    assert junit.count("<testcase ") == len(latest)
    report = (out / "report.md").read_text(encoding="utf-8")
    row = " | ".join(str(counts[s]) for s in ("passed", "failed", "error", "unscored"))
    assert f"| {len(latest)} | {row} |" in report, report[:2000]
    return summary


def wait_until(check: Callable[[], bool], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()
