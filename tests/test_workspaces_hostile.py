"""Hostile agents in workspaces (docs/agents.md, "The agent's sandbox"): a scripted agent (a real
process in a real bwrap sandbox) tries to write outside its workspace, to read another case's
workspace and evalrun's targets file, and to leave a process running. ``strict`` (the default)
holds all of it; without a sandbox every attempt works, which shows the test can fail."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

import evalrun
from evalrun.launcher.sandbox import why_unavailable
from tests.fault_helpers import holding

pytestmark = pytest.mark.skipif(why_unavailable() is not None, reason=str(why_unavailable()))

#: does every hostile thing it can and reports each attempt in its final answer
HOSTILE_AGENT = """\
import json, os, pathlib, subprocess, sys
sys.stdin.read()
case = os.environ.get("CASE_MARK", "")
report = {}
pathlib.Path("secret.txt").write_text("SECRET-" + sys.argv[1])
for name, target in (("eval_folder", sys.argv[2]), ("home", sys.argv[3])):
    try:
        pathlib.Path(target).write_text("escaped")
        report[name] = "written"
    except OSError as exc:
        report[name] = type(exc).__name__
root = pathlib.Path.cwd().parents[2]
report["others"] = sorted(
    p.read_text() for p in root.glob("*/case-*/workspace/secret.txt")
    if p.parent != pathlib.Path.cwd()
)
try:
    report["targets"] = pathlib.Path(sys.argv[4]).read_text()
except OSError as exc:
    report["targets"] = type(exc).__name__
subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(120)", sys.argv[5]],
    start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
print(json.dumps({"type": "final", "text": json.dumps(report)}))
"""


def _run_hostile(tmp_path: Path, level: str) -> tuple[dict[str, Any], Path, str]:
    """Two cases in one run, one at a time, workspaces kept: the second looks for the first's."""
    token = f"evalrun-hostile-{uuid.uuid4().hex}"
    home_target = Path.home() / f".{token}"
    escape = tmp_path / "escape.txt"
    (tmp_path / "agent.py").write_text(HOSTILE_AGENT)
    argv = [sys.executable, str(tmp_path / "agent.py"), "{case}", str(escape), str(home_target)]
    argv += [str(tmp_path / "targets.yaml"), token]
    targets = "targets:\n" + "".join(
        f"  - name: agent-{case}\n    kind: cli\n    transcript: jsonl\n"
        f"    command: {json.dumps([a.replace('{case}', case) for a in argv])}\n"
        for case in ("first", "second")
    )
    (tmp_path / "targets.yaml").write_text(targets)
    (tmp_path / "tpl").mkdir()
    (tmp_path / "ws.eval.yaml").write_text(
        textwrap.dedent(
            f"""\
            target: agent-first
            workspace: {{template: tpl, sandbox: {level}}}
            graders: [{{type: contains, value: "{{"}}]
            tests:
              - {{id: first, input: go}}
            """
        )
    )
    results = []
    try:
        for case in ("first", "second"):
            out = tmp_path / f"out-{case}"
            evalrun.run(
                tmp_path / "ws.eval.yaml",
                target=f"agent-{case}",
                targets=tmp_path / "targets.yaml",
                out=out,
                quiet=True,
                keep_workspaces=True,
                sandbox="none",
            )
            results.append(json.loads((out / "results.jsonl").read_text()))
        second = results[1]
        assert second["status"] == "passed", second
        return json.loads(second["output"]), home_target, token
    finally:
        home_target.unlink(missing_ok=True)
        for result in results:  # the kept workspaces and the folder holding them
            for note in result["warnings"]:
                if note.startswith("workspace kept at "):
                    shutil.rmtree(Path(note.split(" at ", 1)[1]).parents[1], ignore_errors=True)


@pytest.mark.slow  # two runs in real sandboxes (~9 s on a loaded machine)
def test_a_strict_agent_cannot_escape_its_workspace(tmp_path: Path) -> None:
    report, home_target, token = _run_hostile(tmp_path, "strict")
    assert report["eval_folder"] == "OSError"  # the agent's own folder is bound in read-only
    assert not (tmp_path / "escape.txt").exists()
    assert report["home"] == "OSError"  # read-only
    assert not home_target.exists()
    assert report["others"] == []  # the first case's kept workspace is masked
    assert "agent-first" not in report["targets"]  # evalrun's targets file is masked
    assert holding(token) == []  # the background process died with the sandbox


@pytest.mark.slow  # the same run without a sandbox: it proves the test above can fail
def test_without_a_sandbox_the_same_agent_reaches_everything(tmp_path: Path) -> None:
    token = ""
    try:
        report, home_target, token = _run_hostile(tmp_path, "none")
        assert report["eval_folder"] == "written" and (tmp_path / "escape.txt").exists()
        assert report["home"] == "written"
        assert "SECRET-first" in report["others"]
        assert "agent-first" in report["targets"]
        assert holding(token, grace=0) != []
    finally:
        for pid in holding(token, grace=0) if token else []:
            os.kill(pid, signal.SIGKILL)
