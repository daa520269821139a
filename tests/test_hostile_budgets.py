"""Budgets and records are exact (docs/proxy.md, "A grant's life"; docs/judges.md): a judge
panel is charged what goes upstream, a nested panel the sum of its members, and every charged
call is in the records, also one the grader abandoned while it was under way."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path

import pytest

from evalrun.targets import TargetPool
from proxy import JudgeProxy
from tests.conftest import read_bundle, run_cli
from tests.fault_helpers import FakeOpenAI, cli_env, write_suite
from tests.proxy_helpers import FakeTarget, client, error_body, run, serve
from tests.targets_helpers import FakeServer, targets_file
from tests.wire_fakes import openai_upstream


def _nested_panels(url: str) -> list[dict[str, object]]:
    """``jury`` = [``left``, ``right``], each a panel of two OpenAI targets at ``url``."""
    common = {"kind": "openai", "model": "m", "api_key": "k-up", "base_url": url + "/v1"}
    leaves = [{"name": name, **common, "max_retries": 0} for name in ("a", "b", "c", "d")]
    return [
        *leaves,
        {"name": "left", "kind": "panel", "members": ["a", "b"]},
        {"name": "right", "kind": "panel", "members": ["c", "d"]},
        {"name": "jury", "kind": "panel", "members": ["left", "right"]},
    ]


def test_a_nested_panel_costs_the_sum_of_its_leaves() -> None:
    async def main() -> None:
        async with FakeServer(openai_upstream) as upstream:
            pool = TargetPool(targets_file(*_nested_panels(upstream.url)))
            proxy = JudgeProxy(pool.get, pool.names)
            await proxy.start()
            try:
                small = proxy.grant("jury", max_calls=2)
                async with client(proxy, small.token) as http:
                    info = (await http.get("/info")).json()
                    assert info["callsPerRequest"] == 4
                    reply = await http.post("/invoke", json={"question": "ping"})
                    assert reply.status_code == 429, reply.text
                    assert error_body(reply)["code"] == "max_calls_exceeded"
                assert upstream.count == 0 and small.used == 0
                enough = proxy.grant("jury", max_calls=5)
                async with client(proxy, enough.token) as http:
                    first = await http.post("/invoke", json={"question": "ping"})
                    assert first.status_code == 200, first.text
                    second = await http.post("/invoke", json={"question": "ping"})
                    assert second.status_code == 429
                    batch = {"requests": [{"question": "a"}]}
                    assert (await http.post("/invokeBatch", json=batch)).status_code == 429
                assert upstream.count == 4 and enough.used == 4
            finally:
                await proxy.stop()
                await pool.aclose()

    asyncio.run(main())


def test_a_call_in_flight_at_revoke_is_recorded_abandoned_at_once_and_only_once() -> None:
    slow = FakeTarget("judge", delay=30)

    async def scenario() -> None:
        async with serve(slow) as proxy:
            grant = proxy.grant("judge", max_calls=5, grader="g", case_id="c1")
            async with client(proxy, grant.token) as http:
                pending = asyncio.create_task(http.post("/invoke", json={"question": "q?"}))
                await asyncio.wait_for(slow.started.wait(), 5)
                proxy.revoke(grant)
                # what the launcher reads right after the revoke
                (record,) = grant.records
                assert (record.status, record.case_id, record.grader) == ("abandoned", "c1", "g")
                assert record.question == "q?" and record.latency_ms is not None
                assert (await asyncio.wait_for(pending, 5)).status_code == 401
            assert grant.usage()["calls"] == 1 and len(grant.records) == 1

    run(scenario)


@pytest.mark.skipif(
    sys.version_info < (3, 11),
    reason="Python 3.10 has no Task.cancelling(): a hang-up is recorded as an error there",
)
def test_a_call_whose_client_hangs_up_is_recorded_abandoned() -> None:
    slow = FakeTarget("judge", delay=30)

    async def scenario() -> None:
        async with serve(slow) as proxy:
            grant = proxy.grant("judge", max_calls=5, grader="g", case_id="c1")
            host, port = proxy.url.removeprefix("http://").split(":")
            body = json.dumps({"question": "q?"}).encode()
            head = (
                f"POST /invoke HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Authorization: Bearer {grant.token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            _, writer = await asyncio.open_connection(host, int(port))
            writer.write(head + body)
            await writer.drain()
            await asyncio.wait_for(slow.started.wait(), 5)
            writer.transport.abort()  # the grader is gone
            for _ in range(500):
                if grant.records and slow.cancelled:
                    break
                await asyncio.sleep(0.01)
            assert slow.cancelled == 1
            assert [r.status for r in grant.records] == ["abandoned"]
            assert grant.used == 1

    run(scenario)


GRADER = """
import json, os, sys, threading, time, urllib.request

URL = os.environ["AGENTV_TARGET_PROXY_URL"]
AUTH = {"Authorization": "Bearer " + os.environ["AGENTV_TARGET_PROXY_TOKEN"]}


def ask():
    body = json.dumps({"question": "Is this right? [fault:stall]"}).encode()
    request = urllib.request.Request(URL + "/invoke", data=body, headers=AUTH)
    try:
        urllib.request.urlopen(request, timeout=60)
    except Exception:
        pass


threading.Thread(target=ask, daemon=True).start()
while True:  # the call is reserved (and under way) once /info counts it
    with urllib.request.urlopen(urllib.request.Request(URL + "/info", headers=AUTH)) as r:
        if json.load(r)["callCount"] == 1:
            break
    time.sleep(0.02)
json.load(sys.stdin)
print(json.dumps({"score": 1.0, "reason": "left while the judge was thinking"}), flush=True)
os._exit(0)
"""


def test_a_run_records_the_judge_call_a_grader_left_behind(tmp_path: Path) -> None:
    (tmp_path / "grader.py").write_text(textwrap.dedent(GRADER))
    grader = {"name": "leaver", "command": [sys.executable, "grader.py"], "target": True}
    cases = [{"id": "c1", "input": "Is Paris in France?", "output": "Yes."}]
    with FakeOpenAI() as judge:
        target = {"name": "judge", "kind": "openai", "model": "m", "api_key": "k-judge"}
        target |= {"base_url": judge.base_url, "max_retries": 0}
        path = write_suite(tmp_path, graders=[grader], cases=cases, targets=[target])
        out = tmp_path / "out"
        result = run_cli(str(path), "--out", str(out), "--no-cache", cwd=tmp_path, env=cli_env())
    assert result.returncode == 0, result.stdout + result.stderr
    results, _ = read_bundle(out)
    assert results[0]["graders"][0]["proxy"]["calls"] == 1
    calls = [json.loads(line) for line in (out / "judge-calls.jsonl").open()]
    assert [(c["case_id"], c["grader"], c["status"]) for c in calls] == [
        ("c1", "leaver", "abandoned")
    ]
