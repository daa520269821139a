"""AgentV's own graders, as AgentV ships them (tests/data/agentv_corpus, MIT), read the payload
evalrun sends an AgentV file's graders and score as under AgentV (docs/grader-protocol.md,
"Payload generations" and "AgentV files")."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from evalrun.commands.grader_check import write_golden_payloads
from evalrun.launcher.environment import agentv_run_variables
from evalrun.launcher.launch import LaunchContext, grader_wire, launch_grader
from evalrun.launcher.payload import Wire, build_agentv_payload, build_payload
from evalrun.results.models import GraderOutcome
from evalrun.spec.loader import load_eval
from evalrun.spec.models import GraderSpec, TestCase
from tests.conftest import ROOT, read_bundle, run_cli

CORPUS = ROOT / "tests" / "data" / "agentv_corpus"
COMMITS = ("58f316ca2", "14bca459e")
#: The keys AgentV's script grader sends at both commits (its script-grader payload).
AGENTV_KEYS = {
    "criteria",
    "expected_output",
    "output",
    "messages",
    "input_files",
    "input",
    "metadata",
    "trace",
    "trace_summary",
    "token_usage",
    "cost_usd",
    "duration_ms",
    "start_time",
    "end_time",
    "file_changes",
    "workspace_path",
    "config",
}
CASE = TestCase.model_validate(
    {
        "id": "hello",
        "input": "Say hello.",
        "criteria": "Says hello",
        "expected_output": "hello",
    }
)
#: A case whose expected output starts with a tool call: no ``content`` on that message.
TOOL_FIRST = TestCase.model_validate(
    {
        "id": "tool-first",
        "input": "Find it.",
        "expected_output": [
            {"role": "assistant", "tool_calls": [{"tool": "search", "input": {"q": "x"}}]},
            {"role": "assistant", "content": "found"},
        ],
    }
)


def sdk_python(commit: str) -> Path:
    return CORPUS / commit / "examples" / "features" / "sdk-python"


def helper_grader(commit: str) -> GraderSpec:
    """AgentV's example grader on its Python helper, ``agentv_py``."""
    script = sdk_python(commit) / "scripts" / "check_expected_output.py"
    return GraderSpec(name="expected", command=[sys.executable, str(script)], mode="process")


def launch(
    spec: GraderSpec,
    case: TestCase,
    output: str | None,
    tmp_path: Path,
    *,
    wire: Wire = "evalrun",
    agentv_rules: bool = False,
) -> GraderOutcome:
    ctx = LaunchContext(eval_dir=tmp_path, judge=None, wire=wire, agentv_rules=agentv_rules)
    return asyncio.run(launch_grader(spec, case, output, ctx)).result


@pytest.fixture(params=COMMITS)
def commit(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A commit of AgentV; its agentv_py is imported from its source folder, as ``uv run`` in
    AgentV's example does."""
    monkeypatch.setenv("PYTHONPATH", str(sdk_python(request.param) / "src"))
    return str(request.param)


def test_the_agentv_payload_has_agentv_keys_and_nulls() -> None:
    payload = build_agentv_payload(CASE, GraderSpec(command=["x"]), "hello")
    assert set(payload) == AGENTV_KEYS
    assert payload["config"] is None
    assert payload["metadata"] is None
    assert payload["expected_output"] == [{"role": "assistant", "content": "hello"}]
    assert payload["messages"][-1] == {"role": "assistant", "content": "hello"}
    configured = GraderSpec(command=["x"], config={"strict": True})
    assert build_agentv_payload(CASE, configured, None)["config"] == {"strict": True}
    assert "reference_answer" in build_payload(CASE, GraderSpec(command=["x"]), "hello")


def test_agentv_py_refuses_the_evalrun_payload_and_reads_the_agentv_one(
    commit: str, tmp_path: Path
) -> None:
    spec = helper_grader(commit)
    refused = launch(spec, CASE, "hello", tmp_path)
    assert refused.status == "error"
    assert "Deprecated wire fields are not accepted: reference_answer" in refused.reason
    right = launch(spec, CASE, "hello", tmp_path, wire="agentv")
    assert (right.status, right.score) == ("passed", 1.0)
    wrong = launch(spec, CASE, "goodbye", tmp_path, wire="agentv")
    assert (wrong.status, wrong.score) == ("failed", 0.0)


def test_a_grader_that_throws_scores_zero_under_agentv_rules(commit: str, tmp_path: Path) -> None:
    """The helper indexes ``expected_output[0]["content"]``: a tool-call message has none, so
    the handler throws and the helper prints its failure JSON and exits 1."""
    spec = helper_grader(commit)
    evalrun_rules = launch(spec, TOOL_FIRST, "found", tmp_path, wire="agentv")
    assert evalrun_rules.status == "error"
    agentv = launch(spec, TOOL_FIRST, "found", tmp_path, wire="agentv", agentv_rules=True)
    assert (agentv.status, agentv.score, agentv.passed) == ("failed", 0.0, False)
    assert agentv.reason == "Script evaluator failed: Evaluation failed: 'content'"
    assert any("as AgentV does" in w for w in agentv.warnings)


def test_a_score_without_pass_passes_at_agentv_threshold(tmp_path: Path) -> None:
    """AgentV's basic example grader prints ``{score, assertions}`` and no ``pass``: AgentV
    passes it at 0.8, evalrun's own rule at the grader's threshold (0.5)."""
    script = CORPUS / "14bca459e" / "examples" / "features" / "basic" / "evals"
    spec = GraderSpec(command=[sys.executable, str(script / "check_python_keywords.py")])
    two_of_three = '```python\ndef f(x):\n    """Doc."""\n    raise ValueError(x)\n```'
    own = launch(spec, CASE, two_of_three, tmp_path, wire="agentv")
    assert (own.status, own.score) == ("passed", 0.67)
    agentv = launch(spec, CASE, two_of_three, tmp_path, wire="agentv", agentv_rules=True)
    assert (agentv.status, agentv.score, agentv.threshold) == ("failed", 0.67, 0.8)


def test_only_command_graders_get_the_agentv_payload(tmp_path: Path) -> None:
    ctx = LaunchContext(eval_dir=tmp_path, judge=None, wire="agentv")
    assert grader_wire(GraderSpec(command=["x"]), ctx) == "agentv"
    assert grader_wire(GraderSpec(type="llm-rubric"), ctx) == "evalrun"
    assert grader_wire(GraderSpec(command=["x"]), replace(ctx, wire="evalrun")) == "evalrun"


def test_run_variables_follow_agentv(tmp_path: Path) -> None:
    run_dir = tmp_path / "20261202-050000-suite"
    assert agentv_run_variables(run_dir, "suite", base={}) == {
        "AGENTV_RUN_DIR": str(run_dir),
        "AGENTV_RUN_TIMESTAMP": "20261202-050000-suite",
        "AGENTV_EXPERIMENT": "suite",
    }
    kept = {"AGENTV_RUN_TIMESTAMP": "mine", "AGENTV_EXPERIMENT": "exp-1"}
    assert agentv_run_variables(run_dir, "suite", base=kept) == {"AGENTV_RUN_DIR": str(run_dir)}


ENV_GRADER = """
import json, os, sys
payload = json.load(sys.stdin)
print(json.dumps({"pass": True, "score": 1, "reason": "ok", "details": {
    "keys": sorted(payload),
    "env": {k: os.environ.get(k) for k in
            ("AGENTV_RUN_DIR", "AGENTV_RUN_TIMESTAMP", "AGENTV_EXPERIMENT")},
}}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("agentv", [True, False], ids=["agentv-file", "evalrun-file"])
def test_a_run_sends_the_file_formats_payload_and_the_run_variables(
    agentv: bool, tmp_path: Path
) -> None:
    (tmp_path / "g.py").write_text(ENV_GRADER)
    name = "name: greeting\n" if agentv else ""
    (tmp_path / "suite.eval.yaml").write_text(
        name
        + textwrap.dedent(
            f"""
            tests:
              - id: one
                input: Say hello.
                output: hello
                graders:
                  - name: env
                    command: [{sys.executable}, g.py]
            """
        )
    )
    assert load_eval(tmp_path / "suite.eval.yaml").agentv is agentv
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTV_")}
    result = run_cli("run", str(tmp_path / "suite.eval.yaml"), "--out", str(out), env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    rows, _ = read_bundle(out)
    details = rows[0]["graders"][0]["details"]
    assert details["env"] == {
        "AGENTV_RUN_DIR": str(out.resolve()),
        "AGENTV_RUN_TIMESTAMP": out.name,
        "AGENTV_EXPERIMENT": "greeting" if agentv else "suite",
    }
    if agentv:
        assert set(details["keys"]) == AGENTV_KEYS
    else:
        assert {"protocol", "case_id", "reference_answer"} <= set(details["keys"])


@pytest.mark.slow
def test_grader_check_with_the_agentv_wire(commit: str) -> None:
    """agentv_py's example grader breaks on every evalrun payload and on none but one AgentV
    payload: the golden case whose expected output starts with a tool call (see above)."""
    script = sdk_python(commit) / "scripts" / "check_expected_output.py"
    env = {**os.environ, "COLUMNS": "250", "PYTHONPATH": str(sdk_python(commit) / "src")}
    argv = ("grader", "check", "--mode", "process")
    own = run_cli(*argv, "--", "python", str(script), env=env)
    assert "4 of 4 payloads broke the protocol" in own.stdout, own.stdout
    agentv = run_cli(*argv, "--wire", "agentv", "--", "python", str(script), env=env)
    assert agentv.returncode == 1
    assert "1 of 4 payloads broke the protocol" in agentv.stdout, agentv.stdout
    assert "Evaluation failed: 'content'" in agentv.stdout
    unknown = run_cli(*argv, "--wire", "nope", "--", "python", str(script), env=env)
    assert unknown.returncode == 2
    assert "--wire must be evalrun or agentv" in unknown.stderr


def test_the_agentv_golden_payloads_are_agentv_payloads(tmp_path: Path) -> None:
    write_golden_payloads(tmp_path, "agentv")
    payloads = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("*.json"))]
    assert payloads and all(set(p) == AGENTV_KEYS for p in payloads)


#: AgentV's example graders in Python (its helper aside): both commits.
EXAMPLE_GRADERS = sorted(
    p
    for p in CORPUS.glob("*/examples/**/*.py")
    if "agentv_py" not in p.parts and p.name != "build_eval.py"
)
#: The one that breaks on a golden payload, under AgentV too (it indexes the first expected
#: message's "content", which a tool-call message has not).
BREAKS_ON_TOOL_CALLS = "check_expected_output.py"


@pytest.mark.slow
@pytest.mark.parametrize(
    "script", EXAMPLE_GRADERS, ids=[str(p.relative_to(CORPUS)) for p in EXAMPLE_GRADERS]
)
def test_agentvs_example_graders_pass_grader_check_on_agentvs_payload(script: Path) -> None:
    commit = script.relative_to(CORPUS).parts[0]
    env = {**os.environ, "COLUMNS": "250", "PYTHONPATH": str(sdk_python(commit) / "src")}
    argv = ("grader", "check", "--mode", "process", "--wire", "agentv", "--", "python")
    result = run_cli(*argv, str(script), env=env)
    if script.name == BREAKS_ON_TOOL_CALLS:
        assert "1 of 4 payloads broke the protocol" in result.stdout, result.stdout
    else:
        assert result.returncode == 0, result.stdout + result.stderr
