"""Schemathesis against the proxy's own OpenAPI schema, over a real socket: generated valid and
invalid requests on every route (with the grader's token, and without) must never produce a
5xx, and every answer must match the schema. Derandomized and bounded, so it is fast and the
same on every run."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402

from evalrun.targets.config import TargetConfig  # noqa: E402
from evalrun.targets.providers.mock import MockTarget  # noqa: E402
from proxy import JudgeProxy  # noqa: E402

SEEN: Counter[tuple[str, str, int]] = Counter()


class ToolTolerantMock(MockTarget):
    """The default target of the fuzzed grant accepts tool requests (answering text), so that
    schema-valid requests with ``tools`` or ``role: tool`` turns are served; a target that
    cannot do tools answers them 400 by design (tests/test_openai_surface.py)."""

    supports_tools = True


class ThreadedProxy:
    """A ``JudgeProxy`` on its own event loop thread, for synchronous clients like schemathesis."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        targets = {
            name: cls(TargetConfig(name=name, kind="mock", default='{"relevant": true}'))
            for name, cls in (("judge", ToolTolerantMock), ("second-judge", MockTarget))
        }
        self.proxy = JudgeProxy(targets.__getitem__, list(targets))
        self._wait(self.proxy.start())
        self.grant = self.proxy.grant("judge", max_calls=100_000)

    def _wait(self, coroutine: object) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(30)  # type: ignore[arg-type]

    def close(self) -> None:
        self._wait(self.proxy.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def live_proxy() -> Iterator[ThreadedProxy]:
    proxy = ThreadedProxy()
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture(scope="module")
def proxy_schema(live_proxy: ThreadedProxy) -> object:
    return schemathesis.openapi.from_url(
        f"{live_proxy.proxy.url}/openapi.json",
        headers={"Authorization": f"Bearer {live_proxy.grant.token}"},
        timeout=10,
    )


schema = schemathesis.pytest.from_fixture("proxy_schema")


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=15,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_generated_request_makes_the_proxy_fail(case: object, live_proxy: ThreadedProxy) -> None:
    token = live_proxy.grant.token
    response = case.call_and_validate(headers={"Authorization": f"Bearer {token}"})  # type: ignore[attr-defined]
    SEEN[(case.method, case.path, response.status_code)] += 1  # type: ignore[attr-defined]


def test_the_fuzzing_reached_every_route_with_good_and_bad_input(live_proxy: ThreadedProxy) -> None:
    """Guards the test above against passing vacuously (nothing sent, or only rejections)."""
    if not SEEN:
        pytest.skip("run together with test_no_generated_request_makes_the_proxy_fail")
    for method, path in (
        ("POST", "/invoke"),
        ("POST", "/invokeBatch"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/info"),
        ("GET", "/v1/models"),
    ):
        statuses = {status for (m, p, status), n in SEEN.items() if (m, p) == (method, path) and n}
        assert 200 in statuses, (method, path, statuses)
        assert 401 in statuses, (method, path, statuses)  # generated requests without a token
    for path in ("/invoke", "/invokeBatch", "/v1/chat/completions"):
        assert 400 in {s for (m, p, s) in SEEN if p == path}, path
    assert live_proxy.grant.used > 0
    assert all(status < 500 for (_, _, status) in SEEN)
