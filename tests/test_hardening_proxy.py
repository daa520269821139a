"""The judge proxy under a grader that asks too much (docs/security.md), through real processes
and sockets: ``evalrun proxy`` or ``evalrun run`` against a loopback OpenAI-compatible upstream
that counts what reaches it. Batches are capped and stop when the client hangs up or the grader
exits, and what was queued is not charged; max_tokens is capped; conflicting framing is refused;
graders see no credential-like variables and their own token never reaches the bundle."""

from __future__ import annotations

import json
import socket
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from tests.fault_helpers import one_result_per_case, run_suite, write_suite
from tests.hardening_helpers import RecordingOpenAI, openai_target, proxy_process, wait_until

#: proxy/routes.py BATCH_PARALLEL: batch calls that may be running upstream at one moment
PARALLEL = 16


def _batch(n: int) -> dict:
    return {"requests": [{"question": f"[fault:slow] question {i}"} for i in range(n)]}


def _raw_post(url: str, path: str, headers: dict[str, str], body: bytes) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    head = f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(head.encode() + b"\r\n" + body)
    return sock


@pytest.mark.slow
def test_a_batch_is_capped_and_stops_when_the_client_hangs_up(tmp_path: Path) -> None:
    with RecordingOpenAI(slow_s=0.3) as fake:
        target = openai_target(fake, max_concurrency=PARALLEL)
        with proxy_process(tmp_path, [target], target="judge", max_calls=5000) as proxy:
            too_big = httpx.post(
                f"{proxy.url}/invokeBatch", json=_batch(1001), headers=proxy.headers(), timeout=10
            )
            assert too_big.status_code == 400, too_big.text
            assert too_big.json()["code"] == "batch_too_large"
            assert fake.count == 0

            body = json.dumps(_batch(1000)).encode()
            headers = {**proxy.headers(), "Content-Type": "application/json"}
            sock = _raw_post(
                proxy.url, "/invokeBatch", {**headers, "Content-Length": str(len(body))}, body
            )
            assert wait_until(lambda: fake.count >= PARALLEL)
            busy = httpx.get(f"{proxy.url}/info", headers=proxy.headers(), timeout=5)
            assert busy.status_code == 200  # the proxy answers others while the batch runs
            sock.close()  # the grader hangs up
            at_hang_up = fake.count
            time.sleep(1.5)
            settled = fake.count
            time.sleep(1.5)
            assert fake.count == settled  # nothing more goes upstream
            assert settled <= at_hang_up + PARALLEL
            charged = httpx.get(f"{proxy.url}/info", headers=proxy.headers(), timeout=5)
            calls = charged.json()["callCount"]
            # what reached the upstream is charged; what was still queued is not
            assert settled <= calls <= settled + PARALLEL, (settled, calls)
            assert calls < 200


BATCH_THEN_LEAVE = """
import json, os, threading, time, urllib.request

url, token = os.environ["AGENTV_TARGET_PROXY_URL"], os.environ["AGENTV_TARGET_PROXY_TOKEN"]
body = json.dumps({"requests": [{"question": f"[fault:slow] q{i}"} for i in range(1000)]})


def send():
    request = urllib.request.Request(
        url + "/invokeBatch", data=body.encode(),
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"},
    )
    try:
        urllib.request.urlopen(request, timeout=120)
    except Exception:
        pass


threading.Thread(target=send, daemon=True).start()
time.sleep(1.5)
print(json.dumps({"score": 1, "reason": "left before the batch was done"}), flush=True)
os._exit(0)
"""


@pytest.mark.slow
def test_the_batch_of_a_grader_that_exits_is_cancelled_and_queued_calls_are_not_charged(
    tmp_path: Path,
) -> None:
    (tmp_path / "grader.py").write_text(BATCH_THEN_LEAVE)
    with RecordingOpenAI(slow_s=0.3) as fake:
        path = write_suite(
            tmp_path,
            graders=[
                {
                    "name": "leaver",
                    "command": [sys.executable, "grader.py"],
                    "target": {"max_calls": 1000},
                }
            ],
            cases=[{"id": "one", "input": "q", "output": "a"}],
            targets=[openai_target(fake, max_concurrency=PARALLEL)],
        )
        out = tmp_path / "out"
        result = run_suite(path, out, FAKE_JUDGE_KEY="sk-fake-judge-key")
        reached = fake.count
        time.sleep(1.0)
        assert fake.count == reached  # nothing more goes upstream after the run

    assert result.returncode == 0, result.stdout + result.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").open()]
    charged = one_result_per_case(rows, ["one"])["one"]["graders"][0]["proxy"]["calls"]
    assert reached <= charged <= reached + PARALLEL, (reached, charged)
    assert charged < 200


def test_max_tokens_from_a_grader_is_capped(tmp_path: Path) -> None:
    with RecordingOpenAI() as fake:
        targets = [openai_target(fake, "capped", max_tokens=256), openai_target(fake, "open")]
        with proxy_process(tmp_path, targets, target="capped", max_calls=10) as proxy:
            sent = []
            for target, asked in [("capped", 10**9), ("open", 10**9), ("capped", 100)]:
                reply = httpx.post(
                    f"{proxy.url}/invoke",
                    json={"question": "q", "maxTokens": asked, "target": target},
                    headers=proxy.headers(),
                    timeout=10,
                )
                assert reply.status_code == 200, reply.text
                upstream = fake.bodies[-1]  # the openai kind sends max_completion_tokens
                sent.append(upstream.get("max_completion_tokens", upstream.get("max_tokens")))
    assert sent == [256, 8192, 100]  # the target's own max_tokens, else the default cap


def test_transfer_encoding_with_content_length_is_refused(tmp_path: Path) -> None:
    with RecordingOpenAI() as fake:
        with proxy_process(tmp_path, [openai_target(fake)], target="judge", max_calls=10) as proxy:
            payload = b'{"question": "q"}'
            chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(payload), payload)
            headers = {
                **proxy.headers(),
                "Content-Type": "application/json",
                "Content-Length": "4",
                "Transfer-Encoding": "chunked",
                "Connection": "close",
            }
            sock = _raw_post(proxy.url, "/invoke", headers, chunked)
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
            sock.close()
            assert reply.startswith(b"HTTP/1.1 400 "), reply[:200]
            info = httpx.get(f"{proxy.url}/info", headers=proxy.headers(), timeout=5)
            assert info.status_code == 200 and info.json()["callCount"] == 0
        assert fake.count == 0


LEAKY_GRADER = """
import json, os, sys

token = os.environ["AGENTV_TARGET_PROXY_TOKEN"]
with open("seen.json", "w") as f:
    json.dump({"names": sorted(os.environ), "token": token}, f)
sys.stderr.write(f"debug: my token is {token}\\n")
print(json.dumps({"score": 1, "reason": f"token={token}", "hits": [token], "details": {"t": token}}))
"""
SECRET_LOOKING = {
    "MISTRAL_APIKEY": "mistral-secret-1",
    "GH_PAT": "ghp_secret-2",
    "SSH_AUTH_SOCK": "/tmp/agent.sock",
    "DB_PASS": "hunter2-secret-3",
    "ACME_PRIVATE_KEY_PEM": "-----BEGIN-secret-4",
    "CI_JWT": "eyJ-secret-5",
}


def test_graders_see_no_credentials_and_their_token_never_reaches_the_bundle(
    tmp_path: Path,
) -> None:
    (tmp_path / "grader.py").write_text(textwrap.dedent(LEAKY_GRADER))
    path = write_suite(
        tmp_path,
        graders=[
            {"name": "leaky", "command": [sys.executable, "grader.py"], "target": {"max_calls": 1}}
        ],
        cases=[{"id": "one", "input": "q", "output": "a"}],
        targets=[{"name": "judge", "kind": "mock", "default": "{}"}],
    )
    out = tmp_path / "out"
    result = run_suite(path, out, **SECRET_LOOKING, MY_SETTING="kept", GIT_AUTHOR_NAME="kept too")

    assert result.returncode == 0, result.stdout + result.stderr
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert sorted(set(SECRET_LOOKING) & set(seen["names"])) == []
    assert {"MY_SETTING", "GIT_AUTHOR_NAME", "PATH"} <= set(seen["names"])
    token = seen["token"]
    assert len(token) >= 40
    files = {p.name: p.read_text(encoding="utf-8") for p in out.iterdir() if p.is_file()}
    assert {"results.jsonl", "summary.json", "report.md", "report.html", "junit.xml"} <= set(files)
    for name, text in [*files.items(), ("stdout", result.stdout), ("stderr", result.stderr)]:
        assert token not in text, name
    grader = json.loads(files["results.jsonl"])["graders"][0]
    assert grader["reason"] == "token=***" and grader["hits"] == ["***"]
    assert grader["details"] == {"t": "***"} and "my token is ***" in grader["stderr_tail"]
