"""What a hostile grader cannot reach through the sandbox's file system (docs/security.md,
"Grader sandbox"), end to end through the CLI as root with real bwrap sandboxes: the judge
proxy's Unix socket, of its own run or of another one running at the same time; and under
``strict``, the eval's folder, the host's Unix sockets and other graders' temp folders."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalrun.launcher.sandbox import why_unavailable
from tests.conftest import read_bundle, run_cli
from tests.fault_helpers import cli_env, one_result_per_case, write_suite

GRADERS = Path(__file__).resolve().parent / "sandbox_graders"
TARGETS = [{"name": "judge", "kind": "mock", "default": "yes"}]

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the threat model is a grader as root"),
    pytest.mark.skipif(why_unavailable() is not None, reason=str(why_unavailable())),
]


def _grader(name: str, script: str, config: dict, sandbox: str | None = None) -> dict:
    grader = {
        "name": name,
        "command": [sys.executable, str(GRADERS / script)],
        "target": {"max_calls": 1},
        "config": config,
    }
    return {**grader, "sandbox": sandbox} if sandbox else grader


def _private_tmp(tmp_path: Path) -> Path:
    """The runs' TMPDIR: evalrun keeps its private folders there, and the hijacker searches
    only there (never other runs on this machine). A short folder of its own under /tmp, whatever
    pytest's (longer under xdist): the socket's path must fit evalrun's limit."""
    folder = Path(tempfile.mkdtemp(prefix="iso-", dir="/tmp"))
    (tmp_path / "private-tmp").symlink_to(folder)  # found beside the test's other files
    return folder


@pytest.mark.parametrize("level", ["process", "strict"])
def test_a_grader_cannot_replace_its_own_runs_proxy_socket(tmp_path: Path, level: str) -> None:
    """The hijacker runs first; a strict grader of the same run then still reaches the proxy."""
    tmpdir = _private_tmp(tmp_path)
    hijacker = _grader("hijacker", "hijacker.py", {"search": [str(tmpdir)]}, sandbox=level)
    caller = _grader("caller", "caller.py", {})
    cases = [
        {"id": "hijack", "input": "q", "output": "a", "graders": [hijacker]},
        {"id": "call", "input": "q", "output": "a", "graders": [caller]},
    ]
    path = write_suite(tmp_path, graders=[], cases=cases, targets=TARGETS)
    out = tmp_path / "out"
    result = run_cli(
        str(path), "--out", str(out), "--workers", "1", "--sandbox", "strict",
        cwd=tmp_path, env=cli_env(TMPDIR=str(tmpdir)),
    )  # fmt: skip
    by_id = one_result_per_case(read_bundle(out)[0], ["hijack", "call"])
    assert by_id["hijack"]["graders"][0]["details"]["replaced"] == []
    assert by_id["call"]["status"] == "passed", by_id["call"]["graders"][0]["reason"]
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_grader_of_another_run_cannot_touch_this_runs_proxy_socket(tmp_path: Path) -> None:
    """Run A's strict grader waits, holding its grant, while run B's default-sandbox hijacker
    searches the TMPDIR both runs share; then A's grader calls its proxy."""
    tmpdir = _private_tmp(tmp_path)
    env = cli_env(TMPDIR=str(tmpdir))
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    go = first / "go"
    caller = _grader("caller", "caller.py", {"go": str(go)})
    path_a = write_suite(
        first, graders=[], cases=[{"id": "call", "input": "q", "output": "a", "graders": [caller]}],
        targets=TARGETS,
    )  # fmt: skip
    run_a = subprocess.Popen(
        [sys.executable, "-m", "evalrun", str(path_a), "--out", str(first / "out"),
         "--sandbox", "strict"],
        cwd=first, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        pattern = str(tmpdir / "evalrun-*" / "**" / "*.sock")
        while not glob.glob(pattern, recursive=True):  # A's proxy is up, its grader waits
            assert run_a.poll() is None and time.monotonic() < deadline, run_a.communicate()
            time.sleep(0.05)
        hijacker = _grader("hijacker", "hijacker.py", {"search": [str(tmpdir)]})
        path_b = write_suite(
            second, graders=[],
            cases=[{"id": "hijack", "input": "q", "output": "a", "graders": [hijacker]}],
            targets=TARGETS,
        )  # fmt: skip
        run_b = run_cli(str(path_b), "--out", str(second / "out"), cwd=second, env=env)
        assert run_b.returncode == 0, run_b.stdout + run_b.stderr
        details = read_bundle(second / "out")[0][0]["graders"][0]["details"]
        assert details == {"found": [], "replaced": []}
    finally:
        go.write_text("go")
        stdout, stderr = run_a.communicate(timeout=120)
    calls = read_bundle(first / "out")[0]
    assert calls[0]["status"] == "passed", json.dumps(calls[0]["graders"][0])
    assert run_a.returncode == 0, stdout + stderr


STASH = """
import json, os, sys
marker = json.load(sys.stdin)["config"]["marker"]
with open(os.path.join(os.environ["TMPDIR"], "stash"), "w") as f:
    f.write(marker)
print(json.dumps({"score": 0.0, "reason": "an honest grader that fails this case"}))
"""


@pytest.fixture(scope="module")
def strict_probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """One ``--sandbox strict`` run: a sibling grader (``stash.py``, in the eval's folder)
    leaves a marker in its private TMPDIR, then the prober tries to rewrite that grader and the
    eval file, to reach Unix sockets the test listens on (in the eval's folder, under ``/run``
    and under the home folder) and to read the marker. Yields what the prober saw and what it
    left behind."""
    folder = tmp_path_factory.mktemp("strict-probe")
    tmpdir = _private_tmp(folder)
    marker = f"stash-{uuid.uuid4().hex}"
    (folder / "stash.py").write_text(STASH)
    sockets = [
        folder / "planted.sock",
        Path("/run") / f"evalrun-test-{uuid.uuid4().hex[:8]}.sock",
        Path.home() / f".evalrun-test-{uuid.uuid4().hex[:8]}.sock",
    ]
    path = folder / "suite.eval.yaml"
    prober = _grader(
        "prober", "prober.py",
        {"rewrite": [str(folder / "stash.py"), str(path)], "marker": marker,
         "connect": [str(s) for s in sockets], "search": [str(tmpdir)]},
    )  # fmt: skip
    stash = {"name": "stash", "command": ["python", "stash.py"], "config": {"marker": marker}}
    cases = [
        {"id": "stash", "input": "q", "output": "a", "graders": [stash]},
        {"id": "probe", "input": "q", "output": "a", "graders": [prober]},
    ]
    write_suite(folder, graders=[], cases=cases, targets=TARGETS)
    before = {p: p.read_bytes() for p in (folder / "stash.py", path)}
    with contextlib.ExitStack() as stack:
        for where in sockets:
            listener = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            listener.bind(str(where))
            stack.callback(where.unlink, missing_ok=True)
            listener.listen(8)
        result = run_cli(
            str(path), "--out", str(folder / "out"), "--workers", "1", "--sandbox", "strict",
            cwd=folder, env=cli_env(TMPDIR=str(tmpdir)),
        )  # fmt: skip
    by_id = one_result_per_case(read_bundle(folder / "out")[0], ["stash", "probe"])
    yield {
        "result": result,
        "folder": folder,
        "tmpdir": tmpdir,
        "details": by_id["probe"]["graders"][0]["details"],
        "unchanged": {p.name: p.read_bytes() == content for p, content in before.items()},
        "stash": by_id["stash"]["status"],
    }


def test_strict_graders_work_in_a_private_scratch_folder_with_the_eval_folder_read_only(
    strict_probe: dict,
) -> None:
    details = strict_probe["details"]
    assert not [r for r in details["reached"] if r.startswith("rewrote")]
    assert strict_probe["unchanged"] == {"stash.py": True, "suite.eval.yaml": True}
    assert details["cwd_writable"] is True
    assert details["cwd"] != str(strict_probe["folder"])
    assert Path(details["cwd"]).is_relative_to(strict_probe["tmpdir"] / f"evalrun-{os.getuid()}")
    # the sibling ran from its relative `python stash.py`, and its failure stays recorded
    assert strict_probe["stash"] == "failed"
    assert strict_probe["result"].returncode == 1, strict_probe["result"].stderr


def test_strict_graders_cannot_connect_to_the_hosts_unix_sockets(strict_probe: dict) -> None:
    assert not [r for r in strict_probe["details"]["reached"] if r.startswith("connected")]


def test_strict_graders_cannot_read_another_graders_temp_folder(strict_probe: dict) -> None:
    assert not [r for r in strict_probe["details"]["reached"] if r.startswith("read")]
