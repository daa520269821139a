"""AgentV's graders read evalrun's payloads: a JSON Schema of what AgentV's SDK requires, and a
fixture grader that checks its input the way AgentV's SDK does and fails the way it does."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from evalrun.commands.grader_check import GOLDEN
from evalrun.launcher.launch import LaunchContext, launch_grader
from evalrun.launcher.payload import build_payload
from evalrun.spec.loader import load_eval
from evalrun.spec.models import GraderSpec, TestCase
from tests.conftest import ROOT, read_bundle, run_cli

jsonschema = pytest.importorskip("jsonschema")

DATA = ROOT / "tests" / "data" / "agentv"
FIXTURE_GRADER = DATA / "agentv_style_grader.py"
AGENTV_INPUT = jsonschema.Draft202012Validator(
    json.loads((DATA / "grader-input.schema.json").read_text())
)
EVALRUN_INPUT = jsonschema.Draft202012Validator(
    json.loads((ROOT / "docs" / "schemas" / "grader-input.schema.json").read_text())
)
SPEC = GraderSpec(name="g", command=["x"], target={"max_calls": 3})

#: The shapes that broke AgentV's SDK before: a tool-call message with no content, a tool call
#: with an id, a number as content, no criteria, input files.
AWKWARD = TestCase.model_validate(
    {
        "id": "awkward",
        "input": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Capital of France?"}]},
        ],
        "expected_output": [
            {
                "role": "assistant",
                "content": None,
                "toolCalls": [{"tool": "search", "id": "call_1", "input": {"q": "France"}}],
            },
            {"role": "tool", "content": 42},
            {"role": "assistant", "content": {"answer": "Paris"}},
        ],
        "input_files": ["notes.md"],
    }
)


def example_cases() -> list[tuple[str, TestCase]]:
    cases = []
    for path in sorted((ROOT / "evals").rglob("*.eval.yaml")):
        for case in load_eval(path).tests:
            cases.append((f"{path.name}:{case.id}", case))
    for name, data, _ in GOLDEN:
        cases.append((f"golden:{name}", TestCase.model_validate(data)))
    cases.append(("awkward", AWKWARD))
    return cases


CASES = example_cases()


def errors(validator: Any, payload: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(payload)]


@pytest.mark.parametrize("output", ["Paris is the capital of France.", None])
@pytest.mark.parametrize(("label", "case"), CASES, ids=[label for label, _ in CASES])
def test_payload_is_a_valid_agentv_grader_input(label: str, case: TestCase, output) -> None:
    payload = build_payload(case, SPEC, output)
    assert errors(AGENTV_INPUT, payload) == []
    assert errors(EVALRUN_INPUT, payload) == []


def test_payload_never_sends_null_content_and_always_sends_input_files() -> None:
    payload = build_payload(AWKWARD, SPEC, None)
    tool_message = payload["expected_output"][0]
    assert "content" not in tool_message
    assert tool_message["tool_calls"] == [
        {"tool": "search", "input": {"q": "France"}, "output": None, "id": "call_1"}
    ]
    assert payload["expected_output"][1]["content"] == "42"
    assert payload["criteria"] == ""
    assert payload["input_files"] == ["notes.md"]
    bare = TestCase.model_validate({"id": "b", "input": "hi"})
    assert build_payload(bare, SPEC, None)["input_files"] == []


@pytest.mark.parametrize(
    ("broken", "needle"),
    [
        ({"input_files": None}, "input_files"),
        ({"criteria": None}, "criteria"),
        ({"expected_output": [{"role": "assistant", "content": None}]}, "content"),
        ({"input": [{"role": "developer", "content": "x"}]}, "role"),
    ],
)
def test_the_schema_rejects_what_agentv_rejects(broken: dict[str, Any], needle: str) -> None:
    payload = {**build_payload(AWKWARD, SPEC, "Paris"), **broken}
    found = errors(AGENTV_INPUT, payload)
    assert found and any(needle in e for e in found), found


def fixture(payload: dict[str, Any], *args: str) -> tuple[int, dict[str, Any]]:
    import subprocess

    done = subprocess.run(
        [sys.executable, str(FIXTURE_GRADER), *args],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.returncode, json.loads(done.stdout)


def test_the_fixture_grader_fails_like_agentv_on_the_old_payload() -> None:
    """What evalrun used to send (content null, no input_files) fails the fixture's check."""
    old = build_payload(AWKWARD, SPEC, "Paris")
    old.pop("input_files")
    code, doc = fixture(old)
    assert code == 1
    assert doc["score"] == 0
    assert doc["assertions"][0]["text"].startswith("Evaluation failed: inputFiles")
    old = build_payload(AWKWARD, SPEC, "Paris")
    old["expected_output"][0]["content"] = None
    code, doc = fixture(old, "--style", "current")
    assert code == 1
    assert doc["reason"] == (
        "Evaluation failed: expectedOutput[0].content: expected string, array or object, got null"
    )


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
@pytest.mark.parametrize(("label", "case"), CASES, ids=[label for label, _ in CASES])
def test_the_fixture_grader_accepts_every_evalrun_payload(label: str, case: TestCase) -> None:
    for style in ("4x", "current"):
        code, doc = fixture(build_payload(case, SPEC, "Paris"), "--style", style)
        assert code == 0, doc


def launch(spec: GraderSpec, case: TestCase, output: str | None, tmp_path: Path):
    ctx = LaunchContext(eval_dir=tmp_path, judge=None)
    return asyncio.run(launch_grader(spec, case, output, ctx)).result


@pytest.mark.parametrize("style", ["4x", "current"])
def test_a_grader_that_fails_its_input_check_is_an_error_with_its_text(
    style: str, tmp_path: Path
) -> None:
    command = [sys.executable, str(FIXTURE_GRADER), "--style", style, "--require", "workspacePath"]
    result = launch(GraderSpec(name="agentv", command=command), AWKWARD, "Paris", tmp_path)
    assert result.status == "error"
    assert result.score is None
    assert result.exit_code == 1
    assert result.reason == "Evaluation failed: workspacePath: Required"


def test_json_and_non_zero_exit_is_an_error_even_with_a_passing_score(tmp_path: Path) -> None:
    script = tmp_path / "g.py"
    script.write_text('print(\'{"score": 1, "reason": "looked fine, then crashed"}\')\nexit(2)\n')
    result = launch(GraderSpec(command=[sys.executable, str(script)]), AWKWARD, "x", tmp_path)
    assert (result.status, result.reason) == ("error", "looked fine, then crashed")


def test_a_reason_is_never_empty_when_a_check_has_text(tmp_path: Path) -> None:
    script = tmp_path / "g.py"
    script.write_text(
        textwrap.dedent(
            """
            import json
            print(json.dumps({"score": 0.5, "checks": [
                {"text": "mentions Paris", "pass": True, "evidence": "Paris"},
                {"text": "cites a source", "pass": False, "reason": "no link"},
            ]}))
            """
        )
    )
    result = launch(GraderSpec(command=[sys.executable, str(script)]), AWKWARD, "x", tmp_path)
    assert result.status == "passed"
    assert result.reason == "cites a source: no link"
    assert result.checks[0]["evidence"] == "Paris"


def test_the_agentv_evidence_field_is_kept(tmp_path: Path) -> None:
    command = [sys.executable, str(FIXTURE_GRADER)]
    case = TestCase.model_validate({"id": "e", "input": "q", "criteria": "Paris France"})
    result = launch(GraderSpec(name="agentv", command=command), case, "Paris!", tmp_path)
    assert (result.status, result.score) == ("passed", 0.5)
    assert result.checks == [
        {"text": "1 of 2 reference words in the output", "pass": True, "evidence": "paris"}
    ]


WIDE = {**os.environ, "COLUMNS": "250"}


@pytest.mark.slow
def test_grader_check_reports_the_error_text() -> None:
    result = run_cli(
        "grader",
        "check",
        "--",
        sys.executable,
        str(FIXTURE_GRADER),
        "--require",
        "workspacePath",
        env=WIDE,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "error: Evaluation failed: workspacePath: Required" in result.stdout
    assert "4 of 4 payloads broke the protocol" in result.stdout


@pytest.mark.slow
def test_grader_check_passes_the_fixture_grader_on_evalrun_payloads() -> None:
    for style in ("4x", "current"):
        result = run_cli(
            "grader", "check", "--", sys.executable, str(FIXTURE_GRADER), "--style", style, env=WIDE
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_a_run_records_the_failing_agentv_grader_as_agentv_does(tmp_path: Path) -> None:
    """An AgentV file (here 4.x's ``eval_cases``): the grader that fails its input check fails
    with score 0, as AgentV records it (docs/grader-protocol.md, "AgentV files")."""
    (tmp_path / "suite.eval.yaml").write_text(
        textwrap.dedent(
            f"""
            eval_cases:
              - id: one
                criteria: Paris
                input: Capital of France?
                output: Paris.
                assertions:
                  - type: code-grader
                    script: [{sys.executable}, {FIXTURE_GRADER}, --require, workspacePath]
            """
        )
    )
    out = tmp_path / "out"
    result = run_cli("run", str(tmp_path / "suite.eval.yaml"), "--out", str(out), cwd=tmp_path)
    rows, summary = read_bundle(out)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (rows[0]["status"], rows[0]["score"]) == ("failed", 0.0)
    grader = rows[0]["graders"][0]
    assert (grader["status"], grader["score"]) == ("failed", 0.0)
    assert grader["reason"] == "Script evaluator failed: Evaluation failed: workspacePath: Required"
