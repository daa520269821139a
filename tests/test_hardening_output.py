"""Output safe for every consumer (docs/security.md): under GitHub Actions, no line evalrun
prints can start a workflow command, however the eval's description, case ids or a grader's
reason are spelled, and control characters show as escapes in the terminal table, the progress
lines, the annotations, report.md and the step summary."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tests.fault_helpers import one_result_per_case, run_suite, write_suite
from tests.hardening_helpers import assert_bundle_agrees

INJECTED = "::error file=x.py,line=1::injected"
#: each one a way to smuggle a command or a terminal escape into the output
DESCRIPTION = f"Capitals\n{INJECTED}\n  ##[error]old-style command\x1b]0;title\x07\x00"
IDS = ["plain", "[/]closing-markup", f"id\n{INJECTED}", "esc\x1b[31mred\x1b[0m\x0b\x01\u202e"]
GRADER = r"""
import json, sys
case = json.load(sys.stdin)
reason = "nope\n::error::from-the-reason\r\n::warning::crlf\x00\x01\x0b\x1b[2J ##[set-env name=X]y"
print(json.dumps({"score": 1 if case["case_id"] == "plain" else 0, "reason": reason}))
sys.stderr.write("::error::from-stderr\n")
"""
OUR_ANNOTATION = re.compile(r"::(error|notice) [^:\n]*title=[^:\n]*::[^\n]*")
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _workflow_commands(text: str) -> list[str]:
    """Lines the Actions runner would execute: v2 after leading white space, v1 anywhere."""
    return [
        line
        for line in text.split("\n")
        if line.lstrip().startswith("::") and not OUR_ANNOTATION.fullmatch(line) or "##[" in line
    ]


def test_no_printed_line_is_a_workflow_command_and_controls_are_escaped(tmp_path: Path) -> None:
    (tmp_path / "grader.py").write_text(GRADER)
    path = write_suite(
        tmp_path,
        graders=[{"name": "picky", "command": [sys.executable, "grader.py"]}],
        cases=[{"id": i, "input": "Capital of France?", "output": "Paris."} for i in IDS],
        targets=[{"name": "judge", "kind": "mock", "default": "{}"}],
    )
    spec = json.loads(path.read_text())
    path.write_text(json.dumps({**spec, "description": DESCRIPTION}))
    step_summary = tmp_path / "step-summary.md"
    out = tmp_path / "out"
    result = run_suite(path, out, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(step_summary))

    assert result.returncode == 1, result.stdout + result.stderr  # three cases fail, honestly
    one_result_per_case([json.loads(line) for line in (out / "results.jsonl").open()], IDS)
    assert_bundle_agrees(out)
    annotations = [line for line in result.stdout.split("\n") if OUR_ANNOTATION.fullmatch(line)]
    assert len(annotations) == 3  # one per failed case, evalrun's own commands still work
    report = (out / "report.md").read_text(encoding="utf-8")
    summary = step_summary.read_text(encoding="utf-8")
    for name, text in [
        ("stdout", result.stdout),
        ("stderr", result.stderr),
        ("report.md", report),
        ("step summary", summary),
    ]:
        assert _workflow_commands(text) == [], name
        assert CONTROL.findall(text) == [], name
    assert "[/]closing-markup" in result.stdout  # rich markup in an id is text, not a crash
    assert "\\x1b[31mred" in result.stdout  # shown as an escape
    assert "Capitals\\n" not in result.stdout and "\\::error file=x.py" in result.stdout
