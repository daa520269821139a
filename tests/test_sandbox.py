"""The grader sandbox (docs/security.md, "Grader sandbox"), end to end through the CLI as root:
a hostile grader looks for evalrun's provider key, other graders' tokens and evalrun's own files,
and finds none of them with the default settings; without a sandbox it finds them all (pinned
here so the difference stays visible). Honest graders score the same in every mode."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalrun.launcher.sandbox import why_unavailable
from tests.conftest import ROOT, read_bundle, run_cli
from tests.fault_helpers import cli_env, one_result_per_case, write_suite

SECRET = "sk-test-SANDBOX-SECRET-42"
GRADERS = Path(__file__).resolve().parent / "sandbox_graders"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the threat model is a grader as root")
needs_bwrap = pytest.mark.skipif(why_unavailable() is not None, reason=str(why_unavailable()))


@contextlib.contextmanager
def _listener() -> Iterator[str]:
    """A loopback server that is not the proxy (accepts and forgets connections)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"127.0.0.1:{server.getsockname()[1]}"


def _hostile_run(
    tmp_path: Path,
    *extra: str,
    grader_sandbox: str | None = None,
    connect: str | None = None,
    bystander_sandbox: str | None = None,
) -> dict:
    """Run the hostile grader beside a bystander; returns what it reached and what escaped."""
    sync = tmp_path / "sync"
    sync.mkdir()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "responses.db").write_text("a cached judge reply")
    cassette = tmp_path / "cassette.jsonl"
    cassette.write_text('{"key": "recorded earlier"}\n')
    outside = [
        tmp_path.parent / f"escape-{uuid.uuid4().hex}",
        Path.home() / f".escape-{uuid.uuid4().hex}",
    ]
    out = tmp_path / "out"
    hostile = {
        "name": "hostile",
        "command": [sys.executable, str(GRADERS / "hostile.py")],
        "target": {"max_calls": 1},
        "config": {
            "secret": SECRET,
            "sync": str(sync),
            "read": [str(cache), str(cassette), str(out), str(tmp_path / "targets.yaml")],
            "write": [str(p) for p in outside],
            "connect": [connect] if connect else [],
        },
    }
    if grader_sandbox:
        hostile["sandbox"] = grader_sandbox
    bystander = {
        "name": "bystander",
        "command": [sys.executable, str(GRADERS / "bystander.py")],
        "target": {"max_calls": 1},
        "config": {"sync": str(sync)},
    }
    if bystander_sandbox:  # it writes to the sync folder, which `strict` keeps read-only
        bystander["sandbox"] = bystander_sandbox
        bystander["config"]["wait"] = 3
    cases = [
        {"id": "hostile", "input": "q", "output": "a", "graders": [hostile]},
        {"id": "bystander", "input": "q", "output": "a", "graders": [bystander]},
    ]
    targets = [
        {"name": "judge", "kind": "mock", "default": "yes"},
        {"name": "paid", "kind": "openai", "model": "m", "api_key_env": "OPENAI_API_KEY"},
    ]
    path = write_suite(tmp_path, graders=[], cases=cases, targets=targets)
    try:
        result = run_cli(
            str(path),
            "--out",
            str(out),
            "--workers",
            "2",
            "--cache-dir",
            str(cache),
            "--record",
            str(cassette),
            *extra,
            cwd=tmp_path,
            env=cli_env(OPENAI_API_KEY=SECRET),
        )
        assert result.returncode == 0, result.stdout + result.stderr
        results, _ = read_bundle(out)
        by_id = one_result_per_case(results, ["hostile", "bystander"])
        details = by_id["hostile"]["graders"][0]["details"]
        escaped = [str(p) for p in outside if p.exists()]
        seen = {k: details[k] for k in ("reached", "proxy", "wrote_sync")}
        return {**seen, "escaped": escaped}
    finally:
        for p in outside:
            p.unlink(missing_ok=True)


@needs_root
@needs_bwrap
def test_default_settings_hide_evalrun_other_graders_and_evalruns_files(tmp_path: Path) -> None:
    seen = _hostile_run(tmp_path)
    assert seen["reached"] == []
    assert seen["proxy"] is True  # the loopback proxy is still reachable with its own token
    assert len(seen["escaped"]) == 2  # `process` leaves the file system writable, as documented


@pytest.mark.slow
@needs_root
@needs_bwrap
def test_strict_also_keeps_the_file_system_read_only_and_the_network_closed(
    tmp_path: Path,
) -> None:
    with _listener() as address:
        seen = _hostile_run(
            tmp_path, "--sandbox", "strict", connect=address, bystander_sandbox="process"
        )
    assert seen == {"reached": [], "proxy": True, "escaped": [], "wrote_sync": False}


@needs_root
def test_without_a_sandbox_a_root_grader_reaches_everything(tmp_path: Path) -> None:
    """Pins today's behaviour of ``sandbox: none`` (set on the grader itself)."""
    with _listener() as address:
        seen = _hostile_run(tmp_path, grader_sandbox="none", connect=address)
    reached = " | ".join(seen["reached"])
    assert f"connected to {address}" in reached
    assert "provider key in /proc/" in reached
    assert "another grader's token" in reached
    assert "evalrun's cmdline" in reached
    for name in ("cache", "cassette.jsonl", "out", "targets.yaml"):
        assert str(tmp_path / name) in reached, name
    assert len(seen["escaped"]) == 2


def _scores(bundle: Path) -> dict:
    results, _ = read_bundle(bundle)
    return {r["id"]: (r["status"], [g["score"] for g in r["graders"]]) for r in results}


@pytest.mark.slow
@needs_bwrap
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_sdk_and_shell_graders_score_the_same_in_every_mode(tmp_path: Path) -> None:
    evalfile = ROOT / "evals" / "polyglot" / "polyglot.eval.yaml"
    scores = {}
    for level in ("none", "auto", "strict"):
        out = tmp_path / level
        result = run_cli(str(evalfile), "--out", str(out), "--sandbox", level, "-q")
        assert result.returncode == 1, result.stderr  # two cases fail by design
        scores[level] = _scores(out)
    assert scores["auto"] == scores["none"] == scores["strict"]
    assert len(scores["none"]) == 4


CACHE_WRITER = """
import json, os, sys
payload = json.load(sys.stdin)
for folder in (".npm", ".cache"):
    path = os.path.join(os.path.expanduser("~"), folder, "evalrun-sandbox-probe")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, payload["config"]["mark"]), "w") as f:
        f.write("cached")
print(json.dumps({"score": 1.0, "reason": "wrote its caches"}))
"""


@needs_bwrap
def test_caches_under_the_home_folder_stay_writable(tmp_path: Path) -> None:
    (tmp_path / "cache_writer.py").write_text(CACHE_WRITER)
    mark = uuid.uuid4().hex
    grader = {"command": [sys.executable, "cache_writer.py"], "config": {"mark": mark}}
    targets = [{"name": "judge", "kind": "mock", "default": "yes"}]
    cases = [{"id": "c", "input": "q", "output": "a"}]
    path = write_suite(tmp_path, graders=[grader], cases=cases, targets=targets)
    written = [Path.home() / d / "evalrun-sandbox-probe" / mark for d in (".npm", ".cache")]
    try:
        result = run_cli(str(path), "--out", str(tmp_path / "out"), cwd=tmp_path, env=cli_env())
        assert result.returncode == 0, result.stdout + result.stderr
        assert all(p.read_text() == "cached" for p in written)
    finally:
        for p in written:
            p.unlink(missing_ok=True)


FAULTY = """
import json, os, subprocess, sys, time
case = json.load(sys.stdin)["config"]["case"]
mark = sys.argv[1]
if case == "escape":
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", mark],
                     start_new_session=True)
    print(json.dumps({"score": 1.0, "reason": "left a child behind"}))
elif case == "hang":
    time.sleep(60)
elif case == "abort":
    os.abort()
"""


def _running_with(mark: str) -> list[int]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if mark.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


@needs_bwrap
def test_faults_inside_the_sandbox_cost_one_case_and_leave_nothing_running(tmp_path: Path) -> None:
    (tmp_path / "faulty.py").write_text(FAULTY)
    mark = f"sandbox-fault-{uuid.uuid4().hex}"
    cases = []
    for case in ("escape", "hang", "abort"):
        grader = {
            "name": "faulty",
            "command": [sys.executable, "faulty.py", mark],
            "config": {"case": case},
            "timeout": 1,
        }
        cases.append({"id": case, "input": "q", "output": "a", "graders": [grader]})
    targets = [{"name": "judge", "kind": "mock", "default": "yes"}]
    path = write_suite(tmp_path, graders=[], cases=cases, targets=targets)
    result = run_cli(
        str(path), "--out", str(tmp_path / "out"), "--workers", "3", cwd=tmp_path, env=cli_env()
    )
    assert result.returncode == 3, result.stdout + result.stderr
    results, _ = read_bundle(tmp_path / "out")
    by_id = one_result_per_case(results, ["escape", "hang", "abort"])
    assert by_id["escape"]["status"] == "passed"
    assert "timed out" in by_id["hang"]["graders"][0]["reason"]
    assert "killed by signal SIGABRT" in by_id["abort"]["graders"][0]["reason"]
    # The escaped child left the process group, but not the PID namespace: it died with it.
    assert _running_with(mark) == []


def test_an_explicit_level_that_cannot_be_had_is_a_config_error(tmp_path: Path) -> None:
    grader = {"command": [sys.executable, "-c", "print('{\"score\": 1}')"]}
    targets = [{"name": "judge", "kind": "mock", "default": "yes"}]
    cases = [{"id": "c", "input": "q", "output": "a"}]
    path = write_suite(tmp_path, graders=[grader], cases=cases, targets=targets)
    no_bwrap = cli_env(PATH=str(tmp_path / "empty-bin"))
    asked = run_cli(str(path), "--sandbox", "process", "-o", str(tmp_path / "a"), env=no_bwrap)
    assert asked.returncode == 2
    assert "sandbox 'process' was asked for but bubblewrap (bwrap) is not on PATH" in asked.stderr
    assert not (tmp_path / "a").exists()  # nothing ran
    default = run_cli(str(path), "-o", str(tmp_path / "b"), env=no_bwrap)
    assert default.returncode == 0, default.stderr
    assert (
        "note: graders run without a sandbox: bubblewrap (bwrap) is not on PATH" in default.stderr
    )
    assert _scores(tmp_path / "b") == {"c": ("passed", [1.0])}


def test_a_long_tmpdir_keeps_the_proxy_socket_within_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TMPDIR too long for a Unix socket's 107 bytes moves the private folder to /tmp; a short
    one keeps it (docs/security.md)."""
    import tempfile

    from evalrun.launcher.sandbox import private_root

    long_dir = tmp_path / ("x" * 80)
    long_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long_dir))
    root = private_root()
    assert root.parent == Path("/tmp")
    assert len(os.fsencode(root / "run-abcdefgh" / "proxy.sock")) <= 107
    short_dir = Path(tempfile.mkdtemp(prefix="s", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(short_dir))
    try:
        assert private_root().parent == short_dir
    finally:
        shutil.rmtree(short_dir)
