"""The examples in docs/grader-protocol.md run as written (shell, Python, JavaScript)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.sdk_helpers import ROOT, FakeProxy, eval_cases, mock_judge, payload_for

DOC = (ROOT / "docs" / "grader-protocol.md").read_text()


def block(language: str, marker: str) -> str:
    for lang, body in re.findall(r"```(\w+)\n(.*?)```", DOC, re.DOTALL):
        if lang == language and marker in body:
            return body
    raise AssertionError(f"no {language} block with {marker!r} in the doc")


def run(argv: list[str], stdin: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=30)


@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")), reason="needs curl and jq")
def test_shell_grader_example(tmp_path: Path) -> None:
    script = tmp_path / "judge-once.sh"
    script.write_text(block("sh", "curl"))
    payload = json.dumps({"criteria": "Names Paris", "output": "Paris."})
    with FakeProxy(
        lambda r: "Yes, it names Paris." if "Paris." in r["question"] else "No"
    ) as proxy:
        graded = run(["sh", str(script)], payload, proxy.env())
        proxy.fail_next(502, "upstream_error", "judge down")
        failed = run(["sh", str(script)], payload, proxy.env())
        assert proxy.requests[0]["temperature"] == 0
    assert graded.returncode == 0, graded.stderr
    assert json.loads(graded.stdout) == {"score": 1, "reason": "Yes, it names Paris."}
    assert failed.returncode == 3
    assert json.loads(failed.stdout)["abstain"] is True


def test_python_sdk_example(tmp_path: Path) -> None:
    script = tmp_path / "my_grader.py"
    script.write_text(block("python", "@script_grader"))
    case = next(c for c in eval_cases("contextual-precision") if c["id"] == "mixed-ranking")
    with FakeProxy(mock_judge()) as proxy:
        proc = run([sys.executable, str(script)], json.dumps(payload_for(case)), proxy.env())
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["score"] == pytest.approx(2 / 3)
    assert result["misses"] == ["The Eiffel Tower was built in 1887."]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_js_sdk_example(tmp_path: Path) -> None:
    sdk = json.dumps((ROOT / "grader_sdk" / "js" / "index.mjs").as_uri())
    script = tmp_path / "my-grader.mjs"
    script.write_text(block("js", "defineScriptGrader").replace("'@evalrun/grader-sdk'", sdk))
    case = next(c for c in eval_cases("contextual-precision") if c["id"] == "mixed-ranking")
    with FakeProxy(mock_judge()) as proxy:
        proc = run(["node", str(script)], json.dumps(payload_for(case)), proxy.env())
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["score"] == pytest.approx(2 / 3)


def readme_grader() -> str:
    """The README's "A grader, in any language" example, as written there."""
    readme = (ROOT / "README.md").read_text()
    source = re.search(r"```python\n(# graders/my_grader.py.*?)```", readme, re.DOTALL)
    assert source is not None
    return source.group(1)


def test_readme_grader_example_abstains_on_what_it_cannot_read(tmp_path: Path) -> None:
    script = tmp_path / "my_grader.py"
    script.write_text(readme_grader())
    payload = json.dumps({"input": "Capital of France?", "output": "Paris"})
    outcomes = []
    for judge in (
        lambda r: "Yes, it is correct.",
        lambda r: "Hard to say.",
        lambda r: ("Y", "length"),
    ):
        with FakeProxy(judge) as proxy:
            proc = run([sys.executable, str(script)], payload, proxy.env())
        outcomes.append((proc.returncode, json.loads(proc.stdout)))
    assert outcomes[0] == (0, {"score": 1.0, "reason": "Yes, it is correct."})
    assert outcomes[1][0] == 3 and "no yes/no verdict" in outcomes[1][1]["reason"]
    assert outcomes[2][0] == 3 and "cut off" in outcomes[2][1]["reason"]


README_EVAL = """
graders:
  - name: my_grader
    command: [python, graders/my_grader.py]
    target: {max_calls: 5}
tests:
  - id: france
    input: What is the capital of France?
"""


@pytest.mark.slow
def test_readme_grader_scores_offline_with_mock_and_in_grader_check(tmp_path: Path) -> None:
    """The README's grader asks a yes/no question: the built-in ``mock`` (no targets.yaml),
    the repository's scripted ``mock`` (evals/targets.yaml) and ``grader check``'s scripted
    judge each answer it yes/no (docs/targets.md, "mock"), so it scores, never unscored."""
    (tmp_path / "graders").mkdir()
    (tmp_path / "graders" / "my_grader.py").write_text(readme_grader())
    path = tmp_path / "readme.eval.yaml"
    path.write_text(README_EVAL)
    for where, cwd in (("builtin", tmp_path), ("repository", ROOT)):
        out = tmp_path / f"out-{where}"
        result = run_cli(str(path), "--target", "mock", "--out", str(out), cwd=cwd)
        assert result.returncode == 0, (where, result.stdout + result.stderr)
        (case,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert (case["status"], case["score"]) == ("passed", 1.0), (where, case)
        assert case["graders"][0]["reason"] == "yes"
    check = run_cli(
        "grader",
        "check",
        "--cwd",
        str(tmp_path),
        "--",
        "python",
        "graders/my_grader.py",
        env={**os.environ, "COLUMNS": "200"},
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "unscored" not in check.stdout
    assert check.stdout.count(" passed ") == 8, check.stdout  # 4 payloads, 2 modes
