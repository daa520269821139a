"""Agent transcripts: the readers on recorded streams, their errors, and a real run that carries
a transcript from a scripted CLI agent to a grader and into results.jsonl (docs/agents.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from evalrun.transcripts import Step, ToolCall, Transcript, TranscriptError, read_transcript
from evalrun.transcripts.trajectory import Call, match_trajectory

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "transcripts"
ANSWER = "Fixed: add() now returns a + b, and the test passes."
#: one recorded run a format, each fixing add() in calc.py; pi.jsonl and copilot.jsonl are written
#: by hand from the formats' documentation (docs/agents.md), as their CLIs would print them
RECORDED = {
    "claude-code": "claude-code.jsonl",
    "codex": "codex.jsonl",
    "jsonl": "evalrun.jsonl",
    "pi": "pi.jsonl",
    "copilot": "copilot.jsonl",
}


def recorded(fmt: str) -> Transcript:
    return read_transcript(fmt, (DATA / RECORDED[fmt]).read_text())


def test_claude_code_stream() -> None:
    t = recorded("claude-code")
    assert t.answer == ANSWER
    assert [(c.name, c.id) for c in t.tool_calls] == [
        ("Read", "toolu_01"),
        ("Edit", "toolu_02"),
        ("Bash", "toolu_03"),
    ]
    read, edit, bash = t.tool_calls
    assert read.arguments == {"file_path": "/tmp/proj/calc.py"}
    assert "return a - b" in read.result
    assert edit.result == "The file /tmp/proj/calc.py has been updated."  # text blocks joined
    assert bash.result == "1 passed in 0.01s" and not bash.is_error
    # the result event's totals; input counts cache reads and writes (docs/agents.md)
    assert t.usage is not None
    assert (t.usage.input_tokens, t.usage.output_tokens, t.usage.cached_tokens) == (
        20 + 1480 + 3930,
        198,
        3930,
    )
    assert (t.cost_usd, t.duration_ms) == (0.04213, 14210)
    assert t.steps[0].text == "I'll read the module first."
    assert t.steps[0].usage is not None and t.steps[0].usage.output_tokens == 58
    assert [s.role for s in t.steps] == ["assistant"] * 4  # tool results join their calls


def test_codex_stream() -> None:
    t = recorded("codex")
    assert t.answer == ANSWER
    assert [c.name for c in t.tool_calls] == [
        "command_execution",
        "file_change",
        "mcp:docs/search",
        "command_execution",
    ]
    first, change, mcp, _ = t.tool_calls
    assert first.arguments == {"command": "bash -lc 'cat calc.py'"}
    assert first.result == "def add(a, b):\n    return a - b\n"
    assert change.arguments == {"changes": [{"path": "/tmp/proj/calc.py", "kind": "update"}]}
    assert mcp.arguments == {"query": "pytest quiet flag"} and not mcp.is_error
    assert t.usage is not None and (t.usage.input_tokens, t.usage.cached_tokens) == (24763, 24448)
    assert t.cost_usd is None  # codex reports no cost: never guessed


def test_evalrun_jsonl_stream() -> None:
    t = recorded("jsonl")
    assert t.answer == ANSWER
    assert [c.name for c in t.tool_calls] == ["read_file", "edit_file", "run"]
    assert [c.duration_ms for c in t.tool_calls] == [3, 2, 640]
    assert [s.duration_ms for s in t.steps] == [850, None, 920, None]
    assert t.steps[0].cost_usd == 0.0051
    assert (t.cost_usd, t.duration_ms) == (0.0189, 4120)


def test_pi_stream() -> None:
    """Complete messages only: the partial updates, the tool_execution echoes and agent_end's
    copy of every message add no step; the prompt is not a step."""
    t = recorded("pi")
    assert t.answer == ANSWER
    assert [(c.name, c.id) for c in t.tool_calls] == [
        ("read", "toolu_p1"),
        ("edit", "toolu_p2"),
        ("bash", "toolu_p3"),
    ]
    read, edit, bash = t.tool_calls
    assert read.arguments == {"path": "calc.py"} and "return a - b" in read.result
    assert edit.arguments == {"path": "calc.py", "oldText": "a - b", "newText": "a + b"}
    assert bash.result == "1 passed in 0.01s" and not bash.is_error
    assert [s.role for s in t.steps] == ["assistant"] * 4
    assert t.steps[0].text == "I'll read the module first."  # thinking blocks are not text
    # per message: input counts cache reads and writes; pi prices each message
    first = t.steps[0].usage
    assert first is not None
    assert (first.input_tokens, first.output_tokens, first.cached_tokens) == (812 + 2400, 61, 0)
    assert t.usage is not None
    assert (t.usage.input_tokens, t.usage.output_tokens, t.usage.cached_tokens) == (
        812 + 2400 + 40 + 2400 + 120 + 35 + 2520 + 60 + 30 + 2580,
        61 + 88 + 52 + 19,
        2400 + 2520 + 2580,
    )
    assert t.cost_usd == pytest.approx(0.0113 + 0.0021 + 0.0016 + 0.0011)
    assert t.duration_ms is None  # pi reports none: never guessed


def test_copilot_stream() -> None:
    t = recorded("copilot")
    assert t.answer == ANSWER
    assert [(c.name, c.id) for c in t.tool_calls] == [
        ("view", "call_c1"),
        ("edit", "call_c2"),
        ("bash", "call_c3"),
    ]
    view, _, bash = t.tool_calls
    assert view.arguments == {"path": "/tmp/proj/calc.py"} and "return a - b" in view.result
    assert bash.result.startswith("1 passed in 0.01s") and not bash.is_error
    assert [s.text for s in t.steps] == ["I'll read the module first.", None, None, ANSWER]
    assert t.usage is not None
    assert (t.usage.input_tokens, t.usage.output_tokens, t.usage.cached_tokens) == (
        41230,
        286,
        30120,
    )
    assert t.cost_usd is None  # premium requests, not dollars: never guessed
    assert t.duration_ms == 10250  # session.start to session.shutdown


def test_copilot_skills_and_failed_tools() -> None:
    lines = [
        {"type": "skill.invoked", "data": {"name": "csv-analyzer"}},
        {"type": "tool.execution_start", "data": {"toolCallId": "t1", "toolName": "bash", "arguments": {"command": "false"}}},
        {"type": "tool.execution_complete", "data": {"toolCallId": "t1", "success": False, "error": {"message": "exit 1"}}},
        {"type": "assistant.message", "data": {"content": "It failed.", "toolRequests": []}},
    ]  # fmt: skip
    t = read_transcript("copilot", "\n".join(json.dumps(line) for line in lines))
    skill, bash = t.tool_calls
    assert (skill.name, skill.arguments) == ("Skill", {"skill": "csv-analyzer"})
    assert bash.is_error and bash.result == {"message": "exit 1"}
    assert t.answer == "It failed." and t.usage is None and t.duration_ms is None


def test_round_trip_through_the_results_form() -> None:
    for fmt in RECORDED:
        t = recorded(fmt)
        assert Transcript.from_dict(json.loads(json.dumps(t.to_dict()))) == t


@pytest.mark.parametrize(
    ("fmt", "text", "message"),
    [
        ("claude-code", '{"type":"system","subtype":"init"}\n{"type":"assistant",', "line 2: not JSON"),
        ("claude-code", '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t"}]}}', "line 1: tool_use block without a name"),
        ("claude-code", '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"x"}]}}', "line 1: tool_result for an unknown tool_use id 'x'"),
        ("claude-code", '{"type":"result","subtype":"error_max_turns","is_error":true}', "line 1: the agent reported an error (error_max_turns)"),
        ("claude-code", '{"type":"system","subtype":"init"}', "no final answer in the claude-code stream"),
        ("codex", '{"type":"thread.started","thread_id":"t"}\n\n[1, 2]', "line 3: not a JSON object"),
        ("codex", '{"type":"item.completed","item":{"id":"i"}}', "line 1: 'item.completed' event: item.type: Field required"),
        ("codex", '{"type":"turn.failed","error":{"message":"stream disconnected"}}', "line 1: the agent reported an error: stream disconnected"),
        ("codex", '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}', "no final answer in the codex stream"),
        ("jsonl", '{"type":"message","text":"hi"}\n{"type":"thought","text":"x"}', "line 2: 'thought' event: type: Input should be"),
        ("jsonl", '{"type":"tool_result","id":"c9","result":1}', "line 1: tool_result with no open tool_call (id 'c9')"),
        ("jsonl", '{"type":"message","text":"x","duration_ms":-1}', "line 1: 'message' event: duration_ms: Input should be greater than or equal to 0"),
        ("jsonl", '{"type":"tool_call","name":"a","arguments":{}}', "no final answer in the jsonl stream"),
        ("jsonl", "", "no final answer in the jsonl stream"),
        ("pi", '{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"overloaded"}}', "line 1: the agent reported an error: overloaded"),
        ("pi", '{"type":"message_end","message":{"role":"toolResult","toolCallId":"x","content":[]}}', "line 1: toolResult for an unknown toolCall id 'x'"),
        ("pi", '{"type":"message_end","message":{"content":[]}}', "line 1: 'message_end' event: message.role: Field required"),
        ("pi", '{"type":"agent_start"}', "no final answer in the pi stream"),
        ("copilot", '{"type":"session.error","data":{"errorType":"authentication","message":"not logged in"}}', "line 1: the agent reported an error: not logged in"),
        ("copilot", '{"type":"tool.execution_complete","data":{"toolCallId":"x","success":true}}', "line 1: tool.execution_complete for an unknown toolCallId 'x'"),
        ("copilot", '{"type":"assistant.message","data":{"toolRequests":[{"toolCallId":"a"}]}}', "line 1: a tool request without a name"),
        ("copilot", '{"type":"user.message","data":{"content":"hi"}}', "no final answer in the copilot stream"),
    ],
)  # fmt: skip
def test_broken_streams_name_the_line(fmt: str, text: str, message: str) -> None:
    with pytest.raises(TranscriptError) as caught:
        read_transcript(fmt, text)
    assert str(caught.value).startswith(message)


def test_trace_in_agentv_shape() -> None:
    t = recorded("jsonl")
    trace = t.trace()
    assert trace["tool_calls"] == {"read_file": 1, "edit_file": 1, "run": 1}
    assert trace["error_count"] == 0
    kinds = [e["type"] for e in trace["events"]]
    assert kinds == [
        "message",
        *["tool_call", "tool_result"] * 3,
        "final_response",
    ]
    assert trace["event_count"] == 3  # AgentV counts tool calls only
    assert [e["ordinal"] for e in trace["events"]] == list(range(len(kinds)))
    assert trace["events"][2]["tool"] == {
        "name": "read_file",
        "call_id": "c1",
        "output": "def add(a, b):\n    return a - b\n",
        "status": "ok",
    }
    assert trace["messages"][-1] == {"role": "assistant", "content": ANSWER}
    assert trace["token_usage"] == {"input": 3900, "output": 198}


AGENT = ROOT / "tests" / "scripted_agent.py"

#: A grader that reports what the payload carried, so the test reads it from results.jsonl.
GRADER = textwrap.dedent(
    """
    import json, sys
    p = json.load(sys.stdin)
    trace = p["trace"]
    calls = [c["tool"] for m in p["messages"] for c in m.get("tool_calls", [])]
    print(json.dumps({"score": 1, "details": {
        "output": p["output"], "calls": calls, "tool_counts": trace and trace["tool_calls"],
        "events": trace and len(trace["events"]), "summary": p["trace_summary"],
        "token_usage": p["token_usage"], "cost_usd": p["cost_usd"],
        "duration_ms": p["duration_ms"]}}))
    """
)


def _run(
    tmp_path: Path, fmt: str | None, recording: Path, graders: str = ""
) -> tuple[int, list[dict], str]:
    (tmp_path / "grader.py").write_text(GRADER)
    (tmp_path / "targets.yaml").write_text(
        textwrap.dedent(
            f"""
            targets:
              - name: agent
                kind: cli
                command: [{json.dumps(sys.executable)}, {json.dumps(str(AGENT))}, {json.dumps(str(recording))}]
                {f"transcript: {fmt}" if fmt else ""}
                max_retries: 0
            """
        )
    )
    (tmp_path / "agent.eval.yaml").write_text(
        textwrap.dedent(
            """
            target: agent
            tests:
              - id: fix-add
                input: Fix add() in calc.py and run the tests.
                graders:
                  - name: sees
                    command: [python, grader.py]
                  - name: answer
                    type: contains
                    value: a + b
            """
        )
        + textwrap.indent(textwrap.dedent(graders), " " * 6)
    )
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "evalrun", "run", str(tmp_path / "agent.eval.yaml"),
         "--targets", str(tmp_path / "targets.yaml"), "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    lines = (out / "results.jsonl").read_text().splitlines() if out.exists() else []
    return proc.returncode, [json.loads(line) for line in lines], proc.stdout + proc.stderr


@pytest.mark.parametrize(
    # each format is read in-process above; one real run in the default run, the rest slow
    "fmt",
    [pytest.param(fmt, marks=() if fmt == "jsonl" else pytest.mark.slow) for fmt in RECORDED],
)
def test_real_run_carries_the_transcript(tmp_path: Path, fmt: str) -> None:
    code, results, log = _run(tmp_path, fmt, DATA / RECORDED[fmt])
    assert code == 0, log
    (case,) = results
    assert case["output"] == ANSWER
    expected = recorded(fmt)
    assert Transcript.from_dict(case["transcript"]) == expected
    seen = next(g for g in case["graders"] if g["name"] == "sees")["details"]
    assert seen["output"] == ANSWER
    assert seen["calls"] == [c.name for c in expected.tool_calls]
    assert seen["tool_counts"] == expected.summary()["tool_calls"]
    assert seen["events"] == len(expected.trace()["events"])
    assert seen["summary"] == expected.summary()
    assert seen["token_usage"] == (expected.usage.to_dict() if expected.usage else None)
    assert (seen["cost_usd"], seen["duration_ms"]) == (expected.cost_usd, expected.duration_ms)
    if expected.cost_usd is not None:
        assert case["usage"]["target"]["cost_usd"] == expected.cost_usd
    # the bundle reader and every report format read a bundle with transcripts
    from evalrun.results.reader import read_case_results

    (read,) = list(read_case_results(tmp_path / "run"))
    assert read.transcript == case["transcript"]
    for fmt_ in ("md", "html", "junit", "json"):
        report = subprocess.run(
            [sys.executable, "-m", "evalrun", "report", str(tmp_path / "run"), "--format", fmt_],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert report.returncode == 0, report.stdout + report.stderr


def test_real_run_with_a_broken_stream_is_a_target_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    lines = (DATA / "claude-code.jsonl").read_text().splitlines()
    broken.write_text("\n".join([*lines[:3], lines[3][:40], *lines[4:]]) + "\n")
    code, results, log = _run(tmp_path, "claude-code", broken)
    (case,) = results
    assert case["status"] == "error"
    assert case["output"] is None
    assert "cannot read its claude-code transcript: line 4: not JSON" in case["error"], case
    assert "transcript" not in case
    assert code != 0, log


def test_plain_text_is_not_a_transcript(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text(ANSWER + "\n")
    _, results, _ = _run(tmp_path, "jsonl", plain)
    assert results[0]["status"] == "error"
    assert "cannot read its jsonl transcript: line 1: not JSON" in results[0]["error"]


def test_plain_cli_target_has_no_transcript(tmp_path: Path) -> None:
    """Without ``transcript:`` stdout stays the answer and the payload's trace fields are null."""
    plain = tmp_path / "plain.txt"
    plain.write_text(ANSWER + "\n")
    code, results, log = _run(tmp_path, None, plain)
    assert code == 0, log
    (case,) = results
    assert case["output"] == ANSWER and "transcript" not in case
    seen = next(g for g in case["graders"] if g["name"] == "sees")["details"]
    assert seen["calls"] == [] and seen["tool_counts"] is None and seen["summary"] is None
    assert (seen["token_usage"], seen["cost_usd"], seen["duration_ms"]) == (None, None, None)


def test_trajectory_of_a_recorded_transcript() -> None:
    """The matcher reads a transcript's calls: Claude Code's run read, edited, then tested."""
    actual = [Call(c.name, c.arguments) for c in recorded("claude-code").tool_calls]
    wanted = [
        Call("Read", {"file_path": "/tmp/proj/calc.py"}),
        Call("Bash", {"command": "python -m pytest -q"}),
    ]
    assert match_trajectory(wanted, actual, "in-order", "subset").passed
    assert not match_trajectory(wanted[::-1], actual, "in-order", "subset").passed
    assert match_trajectory(wanted[::-1], actual, "superset", "subset").passed
    assert not match_trajectory(wanted, actual, "any-order", "ignore").passed
    verdict = match_trajectory(wanted, actual, "exact", "ignore")
    assert not verdict.passed and verdict.reason.startswith("call 2: expected Bash")


def test_payload_with_a_transcript_fits_the_published_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from evalrun.launcher.payload import build_payload
    from evalrun.spec.models import GraderSpec, TestCase

    schema = json.loads((ROOT / "docs" / "schemas" / "grader-input.schema.json").read_text())
    case = TestCase.model_validate({"id": "c", "input": "Fix add()."})
    grader = GraderSpec.model_validate({"name": "g", "command": ["python", "g.py"]})
    for fmt in RECORDED:
        t = recorded(fmt)
        payload = build_payload(case, grader, t.answer, 0, t)
        jsonschema.validate(payload, schema)
        assert payload["messages"][0] == {"role": "user", "content": "Fix add()."}
        assert payload["messages"][1:] == t.messages()
    plain = build_payload(case, grader, ANSWER)
    jsonschema.validate(plain, schema)
    assert plain["trace"] is None and plain["messages"][-1]["content"] == ANSWER


TRAJECTORY_GRADERS = """
- name: read-then-test
  type: tool-trajectory
  config:
    mode: in-order
    args: subset
    expected:
      - {tool: Read, args: {file_path: /tmp/proj/calc.py}}
      - {tool: Bash, args: {command: python -m pytest -q}}
- name: test-then-read
  type: tool-trajectory
  config:
    mode: in-order
    args: subset
    expected:
      - {tool: Bash}
      - {tool: Read}
- name: exactly
  type: tool-trajectory
  config: {mode: exact, args: ignore, expected: [{tool: Read}, {tool: Edit}, {tool: Bash}]}
"""


def test_tool_trajectory_grader_in_a_real_run(tmp_path: Path) -> None:
    code, results, log = _run(
        tmp_path, "claude-code", DATA / "claude-code.jsonl", TRAJECTORY_GRADERS
    )
    (case,) = results
    by_name = {g["name"]: g for g in case["graders"]}
    assert by_name["read-then-test"]["status"] == "passed", by_name
    assert by_name["exactly"]["status"] == "passed"
    failed = by_name["test-then-read"]
    assert failed["status"] == "failed" and failed["score"] == 0
    assert failed["reason"] == "in-order: missing Read"
    assert case["status"] == "failed" and code != 0, log


def test_tool_trajectory_without_a_transcript_is_an_error(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text(ANSWER + "\n")
    _, results, _ = _run(tmp_path, None, plain, TRAJECTORY_GRADERS)
    graders = {g["name"]: g for g in results[0]["graders"]}
    assert graders["exactly"]["status"] == "error"
    assert "needs the agent's transcript" in graders["exactly"]["reason"]


def test_tool_trajectory_config_is_refused_when_the_file_loads() -> None:
    """A config the check could not read is a validation error naming the key, not an error
    in every case at run time (docs/agents.md, "The tool-trajectory grader")."""
    from pydantic import ValidationError

    from evalrun.launcher.deterministic import run_deterministic
    from evalrun.spec.models import GraderSpec

    for config, message in [
        ({"mode": "strict", "expected": []}, "tool-trajectory: mode must be one of"),
        ({"args": "partial", "expected": []}, "tool-trajectory: args must be one of"),
        ({"args": "subset", "args_match": "subset", "expected": []}, "give args or args_match"),
        ({"args_match": "partial", "expected": []}, "args_match must be one of"),
        ({"args_match": [], "expected": []}, "or a list of field names"),
        ({"expected": [{"args": {}}]}, "expected[0] must be {tool, args?}"),
        ({"expected": [{"tool": "a", "arg": {}}]}, "expected[0]: unknown key 'arg'"),
        ({"expected": [{"tool": "a", "max_duration_ms": -1}]}, "max_duration_ms must be"),
        ({}, "tool-trajectory: config.expected must be a list of {tool, args?}"),
        ({"expected": [], "order": "any"}, "tool-trajectory: unknown option 'order'"),
        ({"mode": "exact", "minimums": {"a": 1}}, "minimums go with mode any-order"),
        ({"mode": "any_order", "minimums": {"a": "1"}}, "minimums must map tool names"),
    ]:
        with pytest.raises(ValidationError, match=re.escape(message)):
            GraderSpec.model_validate({"type": "tool-trajectory", "config": config})
    t = recorded("jsonl")
    spec = GraderSpec.model_validate(
        {"type": "tool-trajectory", "config": {"mode": "any-order", "expected": [{"tool": "run"}]}}
    )
    result = run_deterministic(spec, t.answer, t)
    assert result.status == "failed"
    # an expected call without args fits any arguments (as in AgentV); read_file and edit_file
    # are calls any-order does not allow
    assert result.reason.startswith("any-order: unexpected read_file(")


def test_tool_trajectory_reads_agentv_spellings() -> None:
    """AgentV's args_match names the rule from the actual call's side (its superset is our
    subset), ``args: any`` ignores one call's arguments, ``max_duration_ms`` bounds a call's
    duration, and ``minimums`` scores the share of tools called often enough."""
    from evalrun.launcher.deterministic import run_deterministic
    from evalrun.spec.models import GraderSpec

    t = recorded("jsonl")
    first = max(t.tool_calls, key=lambda c: len(c.arguments))  # edit_file: three arguments
    assert isinstance(first.arguments, dict) and len(first.arguments) > 1

    def run(config: dict[str, Any]) -> Any:
        spec = GraderSpec.model_validate({"type": "tool-trajectory", "config": config})
        return run_deterministic(spec, t.answer, t)

    one_key = dict(list(first.arguments.items())[:1])
    wider = {**first.arguments, "extra": 1}
    item = {"tool": first.name}
    assert run(
        {"mode": "in_order", "args_match": "superset", "expected": [{**item, "args": one_key}]}
    ).passed
    assert not run(
        {"mode": "in_order", "args_match": "subset", "expected": [{**item, "args": one_key}]}
    ).passed
    assert run(
        {"mode": "in_order", "args_match": "subset", "expected": [{**item, "args": wider}]}
    ).passed
    assert run(
        {"mode": "in_order", "args": "superset", "expected": [{**item, "args": wider}]}
    ).passed
    assert run({"mode": "in_order", "expected": [{**item, "args": "any"}]}).passed
    key = next(iter(first.arguments))
    other = {key: first.arguments[key], "extra": "not compared"}
    assert run(
        {"mode": "in_order", "args_match": [key], "expected": [{**item, "args": other}]}
    ).passed
    assert not run(
        {"mode": "in_order", "args_match": ["extra"], "expected": [{**item, "args": other}]}
    ).passed
    per_item = {**item, "args": one_key, "args_match": "superset"}
    assert run({"mode": "in_order", "args": "exact", "expected": [per_item]}).passed
    assert not run({"mode": "in_order", "expected": [{**item, "args": one_key}]}).passed
    if first.duration_ms is not None:
        fast = {**item, "args": "any", "max_duration_ms": first.duration_ms}
        slow = {**item, "args": "any", "max_duration_ms": first.duration_ms / 2}
        assert run({"mode": "in_order", "expected": [fast]}).passed
        assert not run({"mode": "in_order", "expected": [slow]}).passed
    names = [c.name for c in t.tool_calls]
    scored = run({"mode": "any_order", "minimums": {names[0]: 1, "never_called": 1}})
    assert scored.score == 0.5 and scored.passed
    assert [c["pass"] for c in scored.checks] == [True, False]
    assert run({"mode": "any_order", "minimums": {names[0]: 1 + names.count(names[0])}}).score == 0


def test_trajectory_modes_by_hand() -> None:
    a, b, c = Call("a", {"x": 1}), Call("b", {"y": 2}), Call("c")
    actual = [a, b, c]
    assert match_trajectory([a, c], actual, "in-order").passed
    assert not match_trajectory([c, a], actual, "in-order").passed
    assert match_trajectory([c, a], actual, "superset").passed
    assert not match_trajectory([c, a], actual, "any-order").passed
    assert match_trajectory([c, b, a], actual, "any-order").passed
    assert match_trajectory([a, b, c, Call("d")], actual, "subset").passed
    assert not match_trajectory([a, b], actual, "subset").passed
    assert match_trajectory([Call("a", {})], [a], "exact", "subset").passed
    assert not match_trajectory([Call("a", {})], [a], "exact", "exact").passed
    assert match_trajectory([Call("a", "q")], [Call("a", "q")], "exact", "subset").passed
    assert not match_trajectory([Call("a", "q")], [Call("a", "r")], "exact", "subset").passed
    verdict = match_trajectory([a, Call("z")], actual, "superset")
    assert (verdict.missing, verdict.unexpected) == ([1], [])
    assert verdict.reason == "superset: missing z"


def test_trace_fits_agentv_trace_schema() -> None:
    """AgentV graders check ``trace`` against its TraceSchema (read from AgentV's source into
    tests/data/transcripts/agentv-trace.schema.json); the whole payload against its input."""
    jsonschema = pytest.importorskip("jsonschema")
    from evalrun.launcher.payload import build_payload
    from evalrun.spec.models import GraderSpec, TestCase

    trace_schema = json.loads((DATA / "agentv-trace.schema.json").read_text())
    agentv_input = json.loads((ROOT / "tests/data/agentv/grader-input.schema.json").read_text())
    case = TestCase.model_validate({"id": "c", "input": "Fix add()."})
    grader = GraderSpec.model_validate({"name": "g", "command": ["python", "g.py"]})
    for fmt in RECORDED:
        t = recorded(fmt)
        payload = build_payload(case, grader, t.answer, 0, t)
        jsonschema.validate(payload["trace"], trace_schema)
        jsonschema.validate(payload, agentv_input)
    broken = {**recorded("jsonl").trace(), "events": [{"event_id": "e0", "type": "step"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, trace_schema)


def _agentv(config: dict[str, Any], calls: list[ToolCall]) -> Any:
    """The tool-trajectory check with AgentV's rules on a run of these calls."""
    from evalrun.launcher.deterministic import run_deterministic
    from evalrun.spec.models import GraderSpec

    spec = GraderSpec.model_validate(
        {"type": "tool-trajectory", "config": {"rules": "agentv", **config}}
    )
    run = Transcript("jsonl", "done", [Step("assistant", None, calls)])
    return run_deterministic(spec, "done", run)


def test_agentv_rules_score_the_share_of_items_found() -> None:
    """AgentV's tool-trajectory scoring (docs/agents.md, "The tool-trajectory grader"), each
    case worked out by hand from its rules."""
    a, b, c, x = (ToolCall(n, {"q": 1}) for n in "abcx")
    items = [{"tool": "a"}, {"tool": "b"}, {"tool": "c"}]
    # in_order: searching for b runs past c, so c is not found in the calls left
    assert _agentv({"mode": "in_order", "expected": items}, [a, x, c]).score == pytest.approx(1 / 3)
    assert _agentv({"mode": "in_order", "expected": items}, [a, x, b, c]).score == 1
    # an item is spent at the first call of its name whose arguments differ
    two = [{"tool": "a", "args": {"q": 2}}, {"tool": "a", "args": {"q": 1}}]
    assert _agentv({"mode": "in_order", "expected": two}, [a, a]).score == 0.5
    # exact: position by position; the length check fails but is not counted
    result = _agentv({"mode": "exact", "expected": items[:2]}, [a, c, x])
    assert result.score == 0.5 and result.checks[0]["text"] == "expected 2 tool calls, got 3"
    # superset: greedy; subset: one item allows any number of calls
    assert _agentv({"mode": "superset", "expected": [{"tool": "a"}] * 3}, [a, b, a]).score == (
        pytest.approx(2 / 3)
    )
    assert _agentv({"mode": "subset", "expected": [{"tool": "a"}]}, [a, a, b]).score == (
        pytest.approx(2 / 3)
    )
    assert _agentv({"mode": "subset", "expected": []}, []).score == 1
    # keys AgentV does not read on an item are ignored, as AgentV ignores them
    ignored = [{"tool": "a", "input": {"q": 9}}]
    assert _agentv({"mode": "in_order", "expected": ignored}, [a]).score == 1
    # any_order reads minimums alone
    assert _agentv({"mode": "any_order"}, [x]).score == 1
    # a duration limit is an assertion of its own, skipped when the duration is unknown
    slow = ToolCall("a", {"q": 1}, duration_ms=150)
    limited = [{"tool": "a", "max_duration_ms": 100}]
    assert _agentv({"mode": "in_order", "expected": limited}, [slow]).score == 0.5
    assert _agentv({"mode": "in_order", "expected": limited}, [a]).score == 1
    # the same grader with evalrun's rules passes or fails
    from evalrun.launcher.deterministic import run_deterministic
    from evalrun.spec.models import GraderSpec

    spec = GraderSpec.model_validate(
        {"type": "tool-trajectory", "config": {"mode": "in_order", "expected": items}}
    )
    assert (
        run_deterministic(
            spec, "done", Transcript("jsonl", "done", [Step("assistant", None, [a, x, c])])
        ).score
        == 0
    )


def test_an_agentv_file_gets_agentv_rules(tmp_path: Path) -> None:
    """The loader sets rules: agentv on an AgentV file's tool-trajectory graders (and
    no_transcript: fail on its trajectory: ones); evalrun's own files keep evalrun's."""
    from evalrun.spec.loader import load_eval

    agentv = tmp_path / "agentv.eval.yaml"
    agentv.write_text(
        "tests:\n  - id: a\n    vars: {q: hi}\n    assert:\n"
        "      - {type: tool-trajectory, mode: any_order, minimums: {search: 1}}\n"
        "      - {type: trajectory:tool-used, value: search}\n"
        "prompts: ['{{ q }}']\n"
    )
    ours = tmp_path / "ours.eval.yaml"
    ours.write_text(
        "tests:\n  - id: a\n    input: hi\n    graders:\n"
        "      - {type: tool-trajectory, config: {mode: any-order, expected: [{tool: search}]}}\n"
    )
    (case,) = load_eval(agentv).tests
    trajectory, used = case.graders
    assert trajectory.config["rules"] == "agentv"
    assert used.config["no_transcript"] == "fail"
    (case,) = load_eval(ours).tests
    assert "rules" not in case.graders[0].config
