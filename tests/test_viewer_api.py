"""``evalrun view``'s JSON API over real loopback HTTP: the run list and its filters, a run's
verdict and paged cases (problems first), comparisons with McNemar and the paired bootstrap,
history, and the loopback gate (docs/viewer.md)."""

from __future__ import annotations

import hashlib
import math
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from build_helpers import run_in_built_copy
from proxy_helpers import FakeTarget, client, run, serve
from report_helpers import NASTY, case, grader, judge_calls_for, mixed_cases
from viewer_helpers import THREE_RUNS, add_run, scored, served, three_runs

from evalrun.loopback import BAD_HOST, CROSS_ORIGIN, refusal
from evalrun.results import stats
from evalrun.results.scan import PROBLEMS_FIRST
from evalrun.viewer.paired import mcnemar_exact

STATIC = Path(__file__).resolve().parent.parent / "evalrun" / "viewer" / "static"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    root = tmp_path_factory.mktemp("viewer")
    index = root / "index.sqlite"
    three_runs(root, index)  # ids 1, 2, 3
    cases = mixed_cases()
    add_run(  # id 4
        index,
        root / "mixed",
        cases,
        judge_calls=judge_calls_for(cases),
        meta={"eval": "rag-demo", "target": "mock", "started_at": "2026-02-01T00:00:00+00:00"},
    )
    add_run(  # id 5: its bundle is deleted below
        index,
        root / "gone",
        [scored("x", 1.0)],
        meta={"eval": "rag-demo", "target": "other", "started_at": "2026-02-02T00:00:00+00:00"},
    )
    shutil.rmtree(root / "gone")
    with served(index) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client, root


def test_run_list_is_newest_first_and_filters(site: tuple[httpx.Client, Path]) -> None:
    client, _ = site
    data = client.get("/api/runs").json()
    assert [r["id"] for r in data["runs"]] == [5, 4, 3, 2, 1]
    assert data["evals"] == ["capitals", "rag-demo"]
    assert data["targets"] == ["mock", "model-a", "other"]
    assert [r["verdict"] for r in data["runs"]] == [
        "passed",
        "failed",
        "failed",
        "failed",
        "passed",
    ]

    def ids(query: str) -> list[int]:
        reply = client.get(f"/api/runs?{query}")
        assert reply.status_code == 200, reply.text
        return [r["id"] for r in reply.json()["runs"]]

    assert ids("eval=capitals") == [3, 2, 1]
    assert ids("target=mock") == [4]
    assert ids("verdict=passed") == [5, 1]
    assert ids("eval=capitals&verdict=failed") == [3, 2]
    assert ids("q=000000000002") == [3]  # the end of the third run's commit
    page = client.get("/api/runs?start=1&count=2").json()
    assert ([r["id"] for r in page["runs"]], page["total"]) == ([4, 3], 5)


def test_bad_queries_get_400_with_the_parameter_named(site: tuple[httpx.Client, Path]) -> None:
    client, _ = site
    for query, name in (
        ("/api/runs?verdict=maybe", "verdict"),
        ("/api/runs?count=0", "count"),
        ("/api/runs/4/cases?start=-1", "start"),
        ("/api/runs/4/cases?count=100000", "count"),
        ("/api/compare?run=1&run=abc", "run"),
    ):
        reply = client.get(query)
        assert reply.status_code == 400, query
        assert reply.json()["error"].startswith(name), reply.text
    reply = client.get("/api/compare?run=1")
    assert reply.status_code == 400 and "2 to 8 runs" in reply.json()["error"]


def test_unknown_and_deleted_runs_say_so(site: tuple[httpx.Client, Path]) -> None:
    client, _ = site
    missing = client.get("/api/runs/99")
    assert missing.status_code == 404 and "no run 99" in missing.json()["error"]
    gone = client.get("/api/runs/5")
    assert gone.status_code == 410 and "is gone" in gone.json()["error"]
    # the others are still served
    assert client.get("/api/runs/4").status_code == 200


def test_run_page_gives_the_verdict_and_problem_cases_first(
    site: tuple[httpx.Client, Path],
) -> None:
    client, _ = site
    cases = mixed_cases()
    head = client.get("/api/runs/4").json()
    assert head["verdict"] == "failed"
    assert head["counts"] == {"passed": 2, "failed": 2, "error": 2, "unscored": 1, "total": 7}
    assert head["problems"] == 5
    lo, hi = head["pass_rate_ci"]
    assert (lo, hi) == pytest.approx(stats.wilson_interval(2, 7))
    page = client.get("/api/runs/4/cases?count=200").json()
    statuses = [c["status"] for c in page["cases"]]
    assert statuses == sorted(statuses, key=PROBLEMS_FIRST.__getitem__)
    assert page["total"] == 7 and {c["id"] for c in page["cases"]} == {c.id for c in cases}
    beta = next(c for c in page["cases"] if c["id"] == "beta-10")
    # bundle text comes back exactly as written, for the page to set as text
    assert beta["output"] == NASTY
    assert beta["graders"][0]["reason"] == NASTY
    assert len(beta["judge_calls"]) == 2 and NASTY in beta["judge_calls"][0]["question"]
    assert beta["reason"].startswith("precision: failed (score 0.200 < threshold 0.5)")

    only = client.get("/api/runs/4/cases?problems=true").json()
    assert only["total"] == 5 and all(c["status"] != "passed" for c in only["cases"])
    second = client.get("/api/runs/4/cases?start=2&count=2").json()
    assert [c["id"] for c in second["cases"]] == [c["id"] for c in page["cases"][2:4]]


def test_a_large_run_is_served_a_page_at_a_time(tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite"
    cases = [scored(f"case-{i:05d}", 0.3 if i % 97 == 0 else 0.8) for i in range(1500)]
    add_run(index, tmp_path / "big", cases, meta={"eval": "big"})
    failing = [c.id for c in cases if c.status == "failed"]
    report_order = failing + [c.id for c in cases if c.status == "passed"]
    with served(index) as url, httpx.Client(base_url=url, timeout=60) as client:
        first = client.get("/api/runs/1/cases?count=20").json()
        assert first["total"] == 1500 and len(first["cases"]) == 20
        assert len(failing) == 16
        assert [c["id"] for c in first["cases"]] == report_order[:20]
        last = client.get("/api/runs/1/cases?start=1490&count=50").json()
        assert [c["id"] for c in last["cases"]] == report_order[-10:]


def test_mcnemar_exact_matches_the_binomial_tail() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(1, 0) == 1.0
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 32)
    assert mcnemar_exact(10, 2) == pytest.approx(2 * (1 + 12 + 66) / 4096)
    assert mcnemar_exact(2, 10) == mcnemar_exact(10, 2)
    assert mcnemar_exact(7, 7) == 1.0
    # a large count stays exact and finite: P(X <= 400) for X ~ Bin(1000, 1/2), doubled
    tail = sum(math.comb(1000, k) for k in range(401)) * 2 / 2**1000
    assert mcnemar_exact(600, 400) == pytest.approx(tail) and 0 < tail < 1e-9
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_three_runs_compare_with_regressions_first(site: tuple[httpx.Client, Path]) -> None:
    client, _ = site
    data = client.get("/api/compare?run=1&run=2&run=3").json()
    assert [r["id"] for r in data["runs"]] == [1, 2, 3]
    base, second, third = THREE_RUNS
    regressed = sorted(
        (cid for cid in base if second[cid] < 0.5 or third[cid] < 0.5),
        key=lambda cid: min(second[cid], third[cid]) - base[cid],
    )
    assert [row["id"] for row in data["rows"][: len(regressed)]] == regressed
    assert data["regressions"] == len(regressed) == 3
    assert not any(row["regressed"] for row in data["rows"][len(regressed) :])
    assert data["rows"][0]["cells"][1] == {"status": "failed", "score": 0.1}

    vs_second, vs_third = data["pairings"]
    assert (vs_second["regressed"], vs_second["fixed"]) == (3, 0)
    assert vs_second["mcnemar_p"] == pytest.approx(0.25)
    deltas = [0.0 if abs(second[c] - base[c]) < 1e-9 else second[c] - base[c] for c in base]
    assert vs_second["mean_delta"] == pytest.approx(sum(deltas) / len(deltas))
    assert vs_second["ci"] == pytest.approx(list(stats.run_mean_ci(deltas)))
    # the cells hold one delta each here, so it is the plain percentile bootstrap's interval
    # up to the resampling noise of two different generators
    plain = stats.bootstrap_mean_ci(deltas, resamples=1000, seed=0)
    assert vs_second["ci"] == pytest.approx(list(plain), abs=0.05)
    assert (vs_third["regressed"], vs_third["fixed"]) == (1, 0)
    assert vs_third["mcnemar_p"] == 1.0

    paged = client.get("/api/compare?run=1&run=2&run=3&start=2&count=3").json()
    assert [r["id"] for r in paged["rows"]] == [r["id"] for r in data["rows"][2:5]]


def test_a_clear_regression_is_flagged(tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite"
    ids = [f"k{i}" for i in range(12)]
    add_run(index, tmp_path / "a", [scored(c, 0.9) for c in ids], meta={"eval": "e"})
    add_run(index, tmp_path / "b", [scored(c, 0.1) for c in ids], meta={"eval": "e"})
    with served(index) as url, httpx.Client(base_url=url, timeout=60) as client:
        (pairing,) = client.get("/api/compare?run=1&run=2").json()["pairings"]
    assert (pairing["regressed"], pairing["fixed"]) == (12, 0)
    assert pairing["mcnemar_p"] == pytest.approx(2 / 4096)
    assert pairing["ci"] == pytest.approx([-0.8, -0.8]) and pairing["regression"] is True


def test_history_is_per_target_oldest_first(site: tuple[httpx.Client, Path]) -> None:
    client, _ = site
    data = client.get("/api/history?eval=capitals").json()
    (series,) = data["series"]
    assert series["target"] == "model-a"
    assert [p["id"] for p in series["points"]] == [1, 2, 3]
    assert [p["pass_rate"] for p in series["points"]] == pytest.approx([1.0, 0.7, 0.9])
    means = [sum(run.values()) / len(run) for run in THREE_RUNS]
    assert [p["mean_score"] for p in series["points"]] == pytest.approx(means)
    two = client.get("/api/history?eval=rag-demo").json()["series"]
    assert sorted(s["target"] for s in two) == ["mock", "other"]
    assert client.get("/api/history?eval=nothing").json()["series"] == []


def test_pages_and_assets_are_served_from_the_package(site: tuple[httpx.Client, Path]) -> None:
    client, _ = site
    for path in ("/", "/run/4", "/compare?run=1&run=2", "/history?eval=capitals"):
        reply = client.get(path)
        assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in reply.headers["content-security-policy"]
        assert b'src="/static/app.js"' in reply.content
    js = client.get("/static/app.js")
    assert js.content == (STATIC / "app.js").read_bytes()
    assert js.headers["x-content-type-options"] == "nosniff"
    for path in ("/static/index.html", "/static/..%2Fapp.py", "/static/%2e%2e/gate.py"):
        assert client.get(path).status_code == 404, path


def test_the_pages_script_never_parses_markup() -> None:
    """Bundle text reaches the DOM as text only: none of the APIs that parse HTML or run code
    appear in the script, and the shell has no inline script or remote URL."""
    source = (STATIC / "app.js").read_text(encoding="utf-8")
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "Function(",
    ):
        assert sink not in source, sink
    shell = (STATIC / "index.html").read_text(encoding="utf-8")
    assert "<script>" not in shell and "http" not in shell.replace('charset="utf-8"', "")


def test_only_loopback_hosts_and_origins_are_served(site: tuple[httpx.Client, Path]) -> None:
    client, _ = site
    for headers in (
        {"host": "evil.example"},
        {"host": "127.0.0.1.evil.example"},
        {"origin": "http://evil.example"},
        {"origin": "null"},
    ):
        reply = client.get("/api/runs", headers=headers)
        assert reply.status_code == 403, headers
        assert "access-control-allow-origin" not in reply.headers
    port = client.base_url.port
    for host in (f"localhost:{port}", f"[::1]:{port}", f"127.0.0.1:{port}"):
        reply = client.get("/api/runs", headers={"host": host, "origin": f"http://{host}"})
        assert reply.status_code == 200, host
    # two Host headers: h11 refuses them before the app (400); the gate would too
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        raw.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n")
        assert raw.recv(4096).split(b" ")[1] in (b"400", b"403")
    assert refusal([(b"host", b"127.0.0.1"), (b"host", b"127.0.0.1")]) == BAD_HOST
    assert refusal([(b"origin", b"http://127.0.0.1")]) == BAD_HOST
    assert refusal([(b"host", b"localhost:1"), (b"origin", b"https://evil")]) == CROSS_ORIGIN
    assert refusal([(b"host", b"LOCALHOST:8080"), (b"origin", b"http://[::1]:9")]) is None


@pytest.mark.slow  # a fresh interpreter loading the command line: ~3 s on 2 busy cores
def test_view_refuses_a_port_that_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "evalrun", "view", "--no-open", "--port", str(port)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr


@pytest.mark.slow  # a fresh interpreter loading the command line and the app: ~4 s
def test_view_prints_its_url_serves_loopback_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite"
    add_run(index, tmp_path / "run", [scored("only", 0.9)], meta={"eval": "one"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalrun", "view", "--no-open", "--index", str(index)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("evalrun view: http://127.0.0.1:"), line
        url = line.split()[2]
        runs = httpx.get(f"{url}api/runs", timeout=60).json()["runs"]
        assert [r["eval"] for r in runs] == ["one"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) in (0, 130)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_transcripts_and_text_utf8_cannot_encode_are_served(tmp_path: Path) -> None:
    """A case's transcript comes with it; a reason holding a lone surrogate (a grader's broken
    output, kept as written) is escaped in the JSON rather than failing the page."""
    index = tmp_path / "index.sqlite"
    agent = scored("agent", 0.2)
    agent.transcript = {
        "steps": [{"text": "<script>x()</script>", "tool_calls": [{"name": "search"}]}],
        "answer": "done",
    }
    broken = case("broken", [grader("g", 0.1, reason="bad SURROGATE byte")])
    run = add_run(index, tmp_path / "run", [agent, broken], meta={"eval": "agents"})
    lines = (run / "results.jsonl").read_text(encoding="utf-8")
    (run / "results.jsonl").write_text(lines.replace("SURROGATE", "\\udcff"), encoding="utf-8")
    with served(index) as url, httpx.Client(base_url=url, timeout=60) as client:
        reply = client.get("/api/runs/1/cases")
    assert reply.status_code == 200 and reply.content.isascii()
    by_id = {c["id"]: c for c in reply.json()["cases"]}
    assert by_id["agent"]["transcript"] == agent.transcript
    assert by_id["broken"]["graders"][0]["reason"] == "bad \udcff byte"


#: Host and Origin headers, hostile and fine ({port} is each server's own port).
GATE_CASES: tuple[dict[str, str], ...] = (
    {"Host": "evil.example"},
    {"Host": "evil.example:{port}"},
    {"Host": "127.0.0.2"},
    {"Host": "0.0.0.0"},
    {"Host": "localhost.evil.example"},
    {"Host": "127.0.0.1:{port}"},
    {"Host": "localhost"},
    {"Host": "[::1]:{port}"},
    {"Host": "LocalHost:{port}"},
    {"Origin": "https://evil.example"},
    {"Origin": "null"},
    {"Origin": "http://127.0.0.1:{port}"},
    {"Origin": "https://localhost"},
    {"Origin": "file://"},
)


def test_the_viewer_refuses_what_the_judge_proxy_refuses(tmp_path: Path) -> None:
    """One rule for both servers: every header above gets the same answer, allowed or 403,
    from a real judge proxy and from the viewer (docs/security.md)."""
    index = tmp_path / "index.sqlite"
    add_run(index, tmp_path / "run", [scored("only", 0.9)])

    async def proxy_answers() -> list[bool]:
        async with serve(FakeTarget("judge")) as proxy:
            grant = proxy.grant("judge", max_calls=1)
            async with client(proxy, grant.token) as http:
                answers = []
                for headers in GATE_CASES:
                    filled = {k: v.format(port=proxy.port) for k, v in headers.items()}
                    answers.append((await http.get("/info", headers=filled)).status_code != 403)
                return answers

    proxy = run(proxy_answers)
    with served(index) as url, httpx.Client(base_url=url, timeout=60) as http:
        port = http.base_url.port
        viewer = [
            http.get(
                "/api/runs", headers={k: v.format(port=port) for k, v in h.items()}
            ).status_code
            != 403
            for h in GATE_CASES
        ]
    assert viewer == proxy
    assert proxy.count(True) == 6  # the four loopback hosts and the two loopback origins


def test_a_score_json_cannot_carry_reads_as_unknown(tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite"
    run_dir = add_run(index, tmp_path / "run", [scored("odd", 0.25)], meta={"eval": "odd"})
    lines = (run_dir / "results.jsonl").read_text(encoding="utf-8")
    (run_dir / "results.jsonl").write_text(
        lines.replace('"score": 0.25, "passed"', '"score": NaN, "passed"'), encoding="utf-8"
    )
    with served(index) as url, httpx.Client(base_url=url, timeout=60) as client:
        reply = client.get("/api/runs/1/cases")
    assert reply.status_code == 200, reply.text
    assert reply.json()["cases"][0]["graders"][0]["score"] is None


@pytest.mark.slow  # a package build: ~10 s
def test_a_built_copy_ships_the_pages_assets(tmp_path: Path) -> None:
    """Built as an install would build it (setuptools build_py with the pyproject's
    package-data) and imported from elsewhere, the viewer finds its page, script and styles."""
    probe = (
        "import hashlib, evalrun.viewer.app as a; print(a.__file__); "
        "[print(n, hashlib.sha256(a._asset(n)).hexdigest()) for n in (a.SHELL, *a.ASSETS)]"
    )
    lines = run_in_built_copy(tmp_path, probe)
    expected = [
        f"{name} {hashlib.sha256((STATIC / name).read_bytes()).hexdigest()}"
        for name in ("index.html", "app.js", "style.css")
    ]
    assert lines[1:] == expected
