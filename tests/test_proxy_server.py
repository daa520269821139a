"""The proxy's lifecycle: revocation, shutdown, loopback-only binding, the registry, the CLI."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from proxy_helpers import FakeTarget, client, error_body, run, serve

from proxy import GrantRegistry, JudgeProxy

ROOT = Path(__file__).resolve().parents[1]


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        try:
            sock.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            return True
    return False


def test_revoke_cancels_the_in_flight_upstream_call() -> None:
    slow = FakeTarget("judge", delay=30)

    async def scenario() -> None:
        async with serve(slow) as proxy:
            grant = proxy.grant("judge", max_calls=5)
            async with client(proxy, grant.token) as http:
                pending = asyncio.create_task(http.post("/invoke", json={"question": "q"}))
                await asyncio.wait_for(slow.started.wait(), 5)
                proxy.revoke(grant)
                reply = await asyncio.wait_for(pending, 5)
                assert reply.status_code == 401
                assert error_body(reply)["code"] == "unauthorized"
                assert slow.cancelled == 1 and not grant.in_flight
                after = await http.post("/invoke", json={"question": "q"})
                assert after.status_code == 401
            assert grant.used == 1 and grant.revoked
            assert [r.status for r in grant.records] == ["abandoned"]

    run(scenario)


def test_stop_answers_in_flight_calls_and_frees_the_port() -> None:
    slow = FakeTarget("judge", delay=30)

    async def scenario() -> int:
        proxy = JudgeProxy(lambda name: slow, ["judge"])
        await proxy.start()
        port = proxy.port
        assert port and proxy.url == f"http://127.0.0.1:{port}"
        grant = proxy.grant("judge", max_calls=5)
        async with client(proxy, grant.token) as http:
            assert (await http.get("/info")).status_code == 200
            pending = asyncio.create_task(http.post("/invoke", json={"question": "q"}))
            await asyncio.wait_for(slow.started.wait(), 5)
            await asyncio.wait_for(proxy.stop(), 10)
            reply = await asyncio.wait_for(pending, 5)
            assert reply.status_code == 503
            assert error_body(reply)["code"] == "shutting_down"
        assert slow.cancelled == 1
        await proxy.stop()
        assert not proxy.running
        return port

    port = run(scenario)
    assert _refused(port)


def test_context_manager_stops_on_error() -> None:
    async def scenario() -> int:
        port = 0
        with pytest.raises(RuntimeError, match="grader blew up"):
            async with JudgeProxy(lambda name: FakeTarget(name), ["judge"]) as proxy:
                port = proxy.port or 0
                raise RuntimeError("grader blew up")
        return port

    assert _refused(run(scenario))


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com", ""])
def test_only_loopback_hosts_can_be_bound(host: str) -> None:
    with pytest.raises(ValueError, match="loopback"):
        JudgeProxy(lambda name: FakeTarget(name), ["judge"], host=host)


def test_grants_for_unknown_targets_are_refused() -> None:
    proxy = JudgeProxy(lambda name: FakeTarget(name), ["judge"])
    with pytest.raises(ValueError, match="unknown target"):
        proxy.grant("nope", max_calls=1)
    with pytest.raises(ValueError, match="unknown target"):
        proxy.grant("judge", max_calls=1, allowed=["nope"])


def test_registry_reserve_is_all_or_nothing_across_threads() -> None:
    registry = GrantRegistry()
    grant = registry.issue("judge", 10, ["judge"])
    assert not registry.reserve(grant, 11)
    assert registry.reserve(grant, 4) and grant.used == 4
    assert not registry.reserve(grant, 7) and grant.used == 4
    wins: list[bool] = []
    barrier = threading.Barrier(20)

    def worker() -> None:
        barrier.wait()
        for _ in range(5):
            wins.append(registry.reserve(grant, 1))

    threads = [threading.Thread(target=worker) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wins.count(True) == 6 and grant.used == 10
    registry.revoke(grant)
    assert not registry.reserve(grant, 0)


def test_registry_lookup_needs_the_exact_live_token() -> None:
    registry = GrantRegistry()
    grant = registry.issue("judge", 1, [])
    other = registry.issue("judge", 1, [])
    assert grant.allowed == ["judge"]
    assert registry.lookup(grant.token) is grant
    assert registry.lookup(other.token) is other
    for wrong in (None, "", grant.token[:-1], grant.token + "=", grant.token.upper(), "é"):
        assert registry.lookup(wrong) is None
    registry.revoke(grant)
    assert registry.lookup(grant.token) is None and registry.lookup(other.token) is other
    assert grant.token not in repr(grant)


def test_evalrun_proxy_command_serves_one_grant_until_interrupted(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "evalrun", "proxy", "--target", "mock", "--max-calls", "1"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        exports: dict[str, str] = {}
        while len(exports) < 6:
            line = process.stdout.readline()
            assert line, process.stderr.read() if process.stderr else ""
            name, _, value = line.strip().removeprefix("export ").partition("=")
            exports[name] = value
        url, token = exports["EVALRUN_PROXY_URL"], exports["EVALRUN_PROXY_TOKEN"]
        assert exports["AGENTV_TARGET_PROXY_URL"] == url
        assert exports["AGENTV_TARGET_PROXY_TOKEN"] == token
        assert exports["AGENTV_PROVIDER_PROXY_URL"] == url
        assert exports["AGENTV_PROVIDER_PROXY_TOKEN"] == token
        headers = {"Authorization": f"Bearer {token}"}
        first = httpx.post(f"{url}/invoke", json={"question": "hi"}, headers=headers)
        assert first.status_code == 200 and first.json()["rawText"] == "mock answer"
        second = httpx.post(f"{url}/invoke", json={"question": "hi"}, headers=headers)
        assert second.status_code == 429
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=15)
        assert process.returncode == 0, err
        assert "1/1 calls" in err and token not in err
        assert _refused(int(url.rsplit(":", 1)[1]))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_evalrun_proxy_command_reports_an_unknown_target(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "evalrun", "proxy", "--target", "nope"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "nope" in result.stderr


def test_the_proxy_is_the_grant_issuer_the_launcher_takes() -> None:
    """``JudgeProxy`` has every member of ``GrantIssuer`` with the same parameters, its grants
    are ``IssuedGrant``s, and ``redact`` removes the token and the keys it was given."""
    import inspect

    from evalrun.launcher.issuer import GrantIssuer, IssuedGrant

    for name in ("grant", "revoke", "redact"):
        wanted = inspect.signature(getattr(GrantIssuer, name)).parameters
        actual = inspect.signature(getattr(JudgeProxy, name)).parameters
        assert [(p.name, p.kind, p.default) for p in actual.values()] == [
            (p.name, p.kind, p.default) for p in wanted.values()
        ], name

    async def scenario() -> None:
        proxy = JudgeProxy(lambda name: FakeTarget(name), ["judge"], secrets=["sk-live-key-123"])
        async with proxy:
            assert isinstance(proxy, GrantIssuer)
            grant = proxy.grant("judge", max_calls=1)
            assert isinstance(grant, IssuedGrant)
            text = f"token {grant.token}, key sk-live-key-123"
            assert proxy.redact(text, grant.token) == "token ***, key ***"
            assert proxy.redact({"a": [text]}, grant.token) == {"a": ["token ***, key ***"]}
            assert proxy.redact(None, grant.token) is None
            proxy.revoke(grant)
            assert grant.revoked

    run(scenario)
